"""The attention kernel is the run's (--attention, the measurement column ``attention``).

* Memory: GPT-3 175B (96 layers, 96 heads, s = 2,048, bf16 E = 2) at TP 8, one stage, micro-batch
  2 under standard and flash attention differs by exactly the score terms of
  costs/llm/memory.py's docstring: a standard kernel keeps the softmax output, E a s^2 b per layer
  (no dropout in GPT-3's spec), a flash kernel the fp32 row log-sum-exp, 4 a s b, both split by t:
  96 x (2 x 96 x 2048^2 x 2 - 4 x 96 x 2048 x 2) / 8 = 19,308,478,464 bytes.
* Time follows it (a flash kernel skips a causal mask's masked tiles); selective recomputation is
  refused or left out of the search under flash.
* The override reaches the answer (text and JSON), the Reproduce line, plan files, sweep specs and
  `planner launch --target megatron` (``--attention-backend``) and comes back exactly; the
  spec's own value changes nothing; bad values and CNNs are one line with exit 2.
* Measurement rows: the column is read and validated; the two NeMo 24.07 GPT-3 175B rows say flash.
"""

from __future__ import annotations

import json
import shlex

import pytest
from test_fabric_cli import _json
from test_fabric_cli import _run as _cli
from test_launch import llm

GPT3 = ["gpt3-175b", "--device", "H100_SXM", "--gpus-per-node", "8", "--workers", "8", "--tp", "8"]
SCORE_BYTES = 96 * (2 * 96 * 2048**2 * 2 - 4 * 96 * 2048 * 2) / 8  # see the module docstring
SEARCH = ["gpt3-175b", "--budget", "64gpus", "--gpu", "H100_SXM", "--trials", "20"]


def test_flash_and_standard_differ_by_the_score_terms(capsys):
    standard = _json(capsys, "estimate", *GPT3, "--batch", "2", "--attention", "standard")[0]
    flash = _json(capsys, "estimate", *GPT3, "--batch", "2", "--attention", "flash")[0]
    assert SCORE_BYTES == 19_308_478_464
    assert (standard["memory_gb_per_gpu"] - flash["memory_gb_per_gpu"]) * 1e9 == pytest.approx(
        SCORE_BYTES, rel=1e-9
    )
    assert flash["total_ms"] < standard["total_ms"]  # half the causal scores' matmuls skipped
    assert (flash["attention"], flash["attention_source"]) == ("flash", "--attention")
    assert (standard["attention"], standard["attention_source"]) == ("standard", "net spec")  # the spec's
    plain = _json(capsys, "estimate", *GPT3, "--batch", "2")[0]
    assert plain == standard


def test_the_answer_names_an_override_and_selective_recompute_follows_it(capsys):
    code, out, _ = _cli(capsys, "estimate", *GPT3, "--attention", "flash")
    assert code == 0 and ", flash attention (--attention; not the net spec's)" in out.splitlines()[0]
    code, _, err = _cli(capsys, "estimate", *GPT3, "--recompute", "selective", "--attention", "flash")
    assert code == 2 and err.strip().startswith("error: --recompute selective recomputes standard")
    llama = ["llama3-8b", "--device", "H100_SXM", "--gpus-per-node", "8", "--workers", "8", "--tp", "2"]
    code, _, err = _cli(capsys, "estimate", *llama, "--recompute", "selective")
    assert code == 2  # Llama 3's spec is flash
    code, out, err = _cli(capsys, "estimate", *llama, "--recompute", "selective", "--attention", "standard")
    assert code == 0, err
    assert "standard attention (--attention; not the net spec's)" in out


def test_the_search_leaves_out_selective_under_flash():
    from planner.request.optimize import OptimizeRequest, validate
    from planner.space.llm_axes import recompute_choices

    def choices(attention):
        req = OptimizeRequest(net="gpt3-175b", budget=("64gpus",), gpu="H100_SXM", attention=attention)
        return recompute_choices(validate(req))

    assert choices(None) == ("none", "selective", "full")
    assert choices("flash") == ("none", "full")
    assert choices("standard") == ("none", "selective", "full")


def test_optimize_answer_reproduce_line_plan_files_and_launch_carry_the_kernel(capsys, tmp_path):
    data = _json(capsys, "optimize", *SEARCH, "--attention", "flash", "--out", str(tmp_path / "o"))
    best = data["best"]
    assert best["attention"] == "flash" and data["request"]["attention"] == "flash"
    assert best["recompute"] != "selective"
    assert "--attention flash" in best["estimate_command"]
    again = _json(capsys, *shlex.split(best["estimate_command"])[1:])
    assert again[0]["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-9)
    assert again[0]["attention"] == "flash"
    code, out, _ = _cli(capsys, "optimize", *SEARCH, "--attention", "flash", "--out", str(tmp_path / "t"))
    assert code == 0 and ", flash attention (--attention; not the net spec's)" in out
    code, _, err = _cli(capsys, "pareto", *SEARCH, "--attention", "flash", "--out", str(tmp_path / "p"))
    assert code == 0, err
    files = sorted((tmp_path / "p").glob("plan_*.json"))
    assert files
    for path in files:
        plan = json.loads(path.read_text())
        assert plan["attention"] == "flash"
        row = _json(capsys, "estimate", "--plan", str(path))[0]
        assert row["total_ms"] == pytest.approx(plan["expected"]["iteration_ms"], rel=1e-9)
        assert row["attention"] == "flash"
        # --plan with --attention: the option wins, as --fabric and --rank-order do
        back = _json(capsys, "estimate", "--plan", str(path), "--attention", "standard")[0]
        assert back["attention_source"] == "net spec" and back["memory_gb_per_gpu"] > row["memory_gb_per_gpu"]
    from planner.launch.plan import load_plan

    assert load_plan(files[0]).attention == "flash"
    plain = _json(capsys, "optimize", *SEARCH, "--out", str(tmp_path / "d"))
    assert (plain["best"]["attention"], plain["best"]["attention_source"]) == ("standard", "net spec")
    assert "attention" not in plain["request"]
    assert "--attention" not in plain["best"]["estimate_command"]


def test_sweep_spec_takes_an_attention_kernel(tmp_path):
    from planner.sweep.spec import SweepSpecError, load

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  attention: [standard, flash]\n"
        "options:\n  net: gpt3-175b\n  budget: 64gpus\n  gpu: H100_SXM\n"
    )
    assert sorted(c.request.attention for c in load(path, tmp_path / "r").cells()) == ["flash", "standard"]
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  net: [gpt3-175b]\noptions:\n  budget: 8gpus\n  attention: 3\n"
    )
    with pytest.raises(SweepSpecError, match="attention"):
        load(path, tmp_path / "r")


@pytest.mark.parametrize(
    "args, message",
    [
        (["estimate", *GPT3, "--attention", "fused"], "--attention 'fused' (valid: standard, flash)"),
        (
            ["optimize", "gpt3-175b", "--budget", "64gpus", "--attention", "Flash"],
            "--attention 'Flash' (valid: standard, flash)",
        ),
        (
            ["estimate", "resnet50", "--attention", "flash"],
            "--attention flash applies to transformer nets (a 'model' description); 'resnet50.json' is not one",
        ),
        (
            ["optimize", "vit_b_16", "--budget", "8gpus", "--attention", "standard"],
            "--attention standard applies to transformer nets (a 'model' description); 'vit_b_16.json' is not one",
        ),
    ],
)
def test_a_bad_attention_is_one_line(capsys, args, message):
    code, _, err = _cli(capsys, *args)
    assert code == 2 and err.strip() == f"error: {message}"


HEAD = "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,tp,recompute,attention"


@pytest.mark.parametrize(
    "row, column, message",
    [
        ("gpt3-175b,1,8,,fused", "attention", "unknown attention kernel 'fused' (valid: flash, standard)"),
        ("resnet50,32,1,,flash", "attention", "'flash' needs a transformer net (resnet50 has no 'model'"),
        ("gpt3-175b,1,8,selective,flash", "recompute", "selective recomputes standard attention; the run's"),
    ],
)
def test_a_measurement_row_with_a_bad_attention_is_refused(tmp_path, row, column, message):
    import re

    from planner.calibrate import measurements
    from planner.errors import BadInput

    net, batch, rest = row.split(",", 2)
    path = tmp_path / "runs.csv"
    path.write_text(f"{HEAD}\nx,{net},H100_SXM,bf16,8,8,,{batch},ring,samples_per_s,1,{rest}\n")
    with pytest.raises(BadInput, match=rf"row 1, column '{column}': {re.escape(message)}"):
        measurements.load(path)


def test_a_measurement_row_says_its_kernel(tmp_path):
    from planner.calibrate import measurements
    from planner.calibrate.predict import RunTable

    path = tmp_path / "runs.csv"
    row = "x,gpt3-175b,H100_SXM,bf16,8,8,,1,ring,samples_per_s,1,8"
    path.write_text(f"{HEAD}\n{row},,\n{row},,flash\n{row},selective,standard\n")
    runs = measurements.load(path)
    assert [r.attention for r in runs] == [None, "flash", "standard"]
    assert [measurements.kernel(r.net, r.attention) for r in runs] == ["standard", "flash", "standard"]
    table = RunTable(runs, "modern")  # the flash run costed with its kernel: its own group
    kernels = [(list(g.rows), g.costs.net.meta["model"]["attention"]) for g in table.groups]
    assert sorted(kernels) == [([0], "standard"), ([1], "flash"), ([2], "standard")]
    shipped = measurements.load("configs/measurements/llm.csv")
    flash = {(r.source, r.net, r.gpus) for r in shipped if r.attention == "flash"}
    assert flash == {("nemo-24.07-h100-fp8", "gpt3-175b", 128), ("nemo-24.07-h100-fp8", "gpt3-175b", 512)}
    assert {r.attention for r in shipped if r.source == "megatron-lm-readme-gpt3-175b"} == {None}


def test_megatron_launch_writes_the_plans_attention_backend():
    """Megatron-LM's --attention-backend (TransformerConfig.attention_backend, an AttnBackend):
    flash for a flash plan, unfused (scores materialised) for a standard one."""
    from dataclasses import replace

    from planner.launch.registry import TARGETS
    from planner.launch.target import LaunchOptions

    plan = llm(
        net="gpt3-175b", gpus=64, microbatch=1, accumulation=8, tp=8, pp=8, sp=False, zero=0, seq_len=2048
    )

    def backend(p):
        args = shlex.split(TARGETS["megatron"].files(p, LaunchOptions())["megatron_args.txt"])
        return args[args.index("--attention-backend") + 1]

    assert backend(plan) == "unfused" and backend(replace(plan, attention="flash")) == "flash"
    try:
        from megatron.core.transformer.enums import AttnBackend
    except ImportError:
        return
    assert {"flash", "unfused"} <= {b.name for b in AttnBackend}
