"""Software stacks (configs/stacks/): the registry, the runs each is fitted on, the plans it can
run, `--stack` on every command, and calibration progress."""

from __future__ import annotations

import io
import json
import re
from itertools import product

import numpy as np
import pytest

from planner.calibrate import measurements
from planner.calibrate.progress import shown
from planner.cli import main
from planner.errors import BadInput, CatalogError
from planner.stacks import plans, registry
from planner.stacks import runs as stack_runs
from planner.stacks.listing import caveats

SHIPPED = ("fsdp", "megatron", "optimized-cnn", "pytorch")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# ---- the registry and the runs ---------------------------------------------------------------


def test_shipped_stacks_parse_with_their_profiles():
    stacks = registry.stacks()
    assert set(SHIPPED) <= set(stacks)
    for name in SHIPPED:
        s = stacks[name]
        meta = stack_runs.profile(s).meta
        assert meta["stack"] == name  # the profile was fitted for this stack
        assert meta["rules"] == "modern"
        assert set(s.families) <= set(registry.FAMILIES)
    assert {registry.DEFAULT[f] for f in registry.FAMILIES} <= set(SHIPPED)


# Run and source counts of the shipped data (configs/measurements/README.md lists the sources;
# configs/profiles/README.md the eager PyTorch session): llm.csv's 242 runs split into 28
# Megatron / NeMo and 214 FSDP-class runs.
COUNTS = {"megatron": (28, 6), "fsdp": (214, 8), "optimized-cnn": (201, 23), "pytorch": (57, 6)}


@pytest.mark.parametrize("name", SHIPPED)
def test_stack_runs_match_its_profile(name):
    got = stack_runs.select(registry.get(name))
    runs, sources = COUNTS[name]
    assert len(got.runs) == runs
    assert len({r.source for r in got.runs}) == sources
    meta = stack_runs.profile(registry.get(name)).meta
    assert (meta["runs"], meta["sources"]) == (runs, sources)
    assert meta["fitted_on"] == got.files


def test_every_fitted_run_is_of_exactly_one_stack():
    """Each run of cnn.csv and llm.csv (what the default profile is fitted on) belongs to one stack
    (DeepSeek-V3's pre-training run, whose framework, DeepSeek's HAI-LLM, is no public stack, is
    in scale.csv, held out of every fit)."""
    seen: dict[tuple[str, int], list[str]] = {}
    for name in SHIPPED:
        for r in stack_runs.select(registry.get(name)).runs:
            seen.setdefault((r.source, r.row, r.net), []).append(name)
    fitted = [r for f in measurements.shipped(measurements.FITTED) for r in measurements.load(f)]
    stackless = [r.source for r in fitted if not seen.get((r.source, r.row, r.net))]
    assert stackless == []
    assert all(len(seen.get((r.source, r.row, r.net), [])) <= 1 for r in fitted)


def test_pending_runs_never_join_a_stack():
    for name in SHIPPED:
        assert "pending.csv" not in [p.name for p in stack_runs.files(registry.get(name))]


def test_malformed_stack_files_are_one_line_errors(tmp_path):
    good = {"stack": {"description": "x", "families": ["cnn"], "profile": "p.toml"}}
    assert registry.parse(good, "x", "x.toml").families == ("cnn",)
    with pytest.raises(CatalogError, match=r"unknown key \[stack\] colour"):
        registry.parse({"stack": {**good["stack"], "colour": "red"}}, "x", "x.toml")
    with pytest.raises(CatalogError, match="families"):
        registry.parse({"stack": {**good["stack"], "families": ["rnn"]}}, "x", "x.toml")
    with pytest.raises(CatalogError, match="regular expression"):
        registry.parse({**good, "runs": {"framework": "("}}, "x", "x.toml")
    with pytest.raises(CatalogError, match="ZeRO stages"):
        registry.parse({**good, "plans": {"zero": [4]}}, "x", "x.toml")
    with pytest.raises(CatalogError, match=r"gradients 'fp8' \(valid: param, fp32\)"):
        registry.parse({"stack": {**good["stack"], "gradients": "fp8"}}, "x", "x.toml")
    assert registry.parse(good, "x", "x.toml").gradients == "param"


def test_shipped_stacks_count_gradients_at_the_parameters_precision():
    """The published NeMo / Megatron-Bridge performance recipes reduce gradients in bf16
    (grad_reduce_in_fp32 = False), torchtitan's FSDP2 shards fp32 gradients (16 bytes either
    way) and plain PyTorch AMP keeps fp32 parameters and gradients: every shipped stack counts
    gradients at the parameters' precision. A user stack of Megatron-LM's own scripts, which keep
    fp32 buffers under bf16, says gradients = "fp32" (tests/test_llm_terms_memory.py counts it)."""
    assert {registry.get(name).gradients for name in SHIPPED} == {"param"}


def test_choice_parsing():
    assert registry.parse_choice(None, "transformer") == ("megatron",)
    assert registry.parse_choice(None, "cnn") == ("optimized-cnn",)
    assert registry.parse_choice("any", "cnn") == ("optimized-cnn", "pytorch")
    assert registry.parse_choice("megatron, fsdp,megatron", "transformer") == ("megatron", "fsdp")
    for bad in ("", ",", "megatron,", "a b", "Megatron"):
        with pytest.raises(BadInput, match=r"--stack .* \(valid: fsdp, megatron, optimized-cnn, pytorch"):
            registry.parse_choice(bad, "transformer")
    with pytest.raises(BadInput, match="has no transformer runs"):
        registry.parse_choice("optimized-cnn", "transformer")


def test_caveats():
    assert (
        caveats(
            {
                "runs": 100,
                "sources": 10,
                "generations": ["Ampere", "Hopper"],
                "error_kind": "leave-one-source-out",
            }
        )
        == []
    )
    few = caveats({"runs": 26, "sources": 3, "generations": ["Hopper"], "error_kind": "in-sample"})
    assert few == [
        "few runs (26, under 30)",
        "few sources (3, under 4)",
        "one GPU generation (Hopper)",
        "in-sample error only (fitted with --no-loso)",
    ]


# ---- the plans a stack can run ---------------------------------------------------------------


def test_refusals():
    pt, mg, fs = (registry.get(n) for n in ("pytorch", "megatron", "fsdp"))
    assert (
        plans.refusal(pt, {"tp": 2})
        == "--stack pytorch has no tensor parallelism (--tp) (PyTorch (eager mode))"
    )
    assert plans.refusal(pt, {"zero": 3}) is None
    assert "cannot run --zero 1" in plans.refusal(pt, {"zero": 1})
    assert plans.refusal(mg, {"tp": 8, "pp": 4, "zero": 1, "interleave": 2, "sp": True}) is None
    # Megatron-LM's validate_args: no FSDP (ZeRO-3) with pipeline parallelism
    assert "--zero 3 with pipeline parallelism" in plans.refusal(mg, {"pp": 2, "zero": 3})
    assert plans.refusal(mg, {"pp": 1, "zero": 3}) is None
    assert "--zero 1" in plans.refusal(fs, {"zero": 1})  # FSDP has no optimizer-only sharding
    assert plans.refusal(fs, {"tp": 2, "pp": 2, "zero": 3}) is None
    assert "model-parallel split" in plans.refusal(pt, {"hybrid": True})
    assert plans.refusal(registry.get("optimized-cnn"), {"hybrid": True}) is None


def test_mask_agrees_with_refusal_on_every_combination():
    grid = list(
        product((1, 2), (1, 4), (False, True), (1, 2), (1, 2), (False, True), (0, 1, 2, 3), (False, True))
    )
    keys = ("tp", "pp", "sp", "ep", "interleave", "tp_overlap", "zero", "hybrid")
    cols = {k: np.array([g[i] for g in grid]) for i, k in enumerate(keys)}
    for name in SHIPPED:
        s = registry.get(name)
        want = [plans.refusal(s, dict(zip(keys, g, strict=True))) is None for g in grid]
        assert plans.mask(s, cols).tolist() == want


# ---- --stack on the commands -----------------------------------------------------------------


@pytest.mark.parametrize("value", ["nope", "a b", "megatron,", ","])
@pytest.mark.parametrize(
    "command",
    [["estimate", "llama3-8b"], ["optimize", "llama3-8b", "--trials", "5"], ["validate"], ["calibrate"]],
)
def test_bad_stack_is_one_line_exit_2(capsys, command, value):
    code, _, err = run(capsys, *command, "--stack", value)
    assert code == 2
    line = one_error_line(err)
    assert f"--stack '{value}'" in line and "valid: fsdp, megatron, optimized-cnn, pytorch" in line


def test_estimate_names_its_stack_and_defaults_per_family(capsys):
    for net, stack in (("llama3-8b", "megatron"), ("resnet50", "optimized-cnn")):
        code, out, err = run(
            capsys, "estimate", net, "--workers", "8", "--gpus-per-node", "8", "--format", "json"
        )
        assert code == 0, err
        assert {r["stack"] for r in json.loads(out)} == {stack}
    code, out, _ = run(
        capsys, "estimate", "alexnet", "--rules", "paleo-2018", "--workers", "1", "--format", "json"
    )
    assert json.loads(out)[0]["stack"] is None  # PALEO's rule sets have no stack
    code, _, err = run(capsys, "estimate", "alexnet", "--rules", "paleo-2018", "--stack", "pytorch")
    assert code == 2 and "--stack applies to the modern rule set" in one_error_line(err)


def test_estimate_refuses_a_plan_the_stack_cannot_run(capsys):
    code, _, err = run(
        capsys,
        "estimate",
        "llama3-8b",
        "--workers",
        "8",
        "--gpus-per-node",
        "8",
        "--tp",
        "2",
        "--stack",
        "pytorch",
    )
    assert code == 2
    assert (
        one_error_line(err)
        == "error: --stack pytorch has no tensor parallelism (--tp) (PyTorch (eager mode))"
    )
    code, _, err = run(
        capsys, "estimate", "llama3-8b", "--workers", "16", "--gpus-per-node", "8", "--pp", "2", "--zero", "3"
    )
    assert code == 2 and "--stack megatron cannot run --zero 3 with pipeline parallelism" in one_error_line(
        err
    )
    code, _, err = run(capsys, "estimate", "llama3-8b", "--stack", "pytorch,megatron")
    assert code == 2 and "estimate scores one stack" in one_error_line(err)


def test_stack_changes_the_prediction(capsys):
    """The eager PyTorch profile predicts a slower ResNet-50 step than the tuned CNN stack's."""
    args = (
        "estimate",
        "resnet50",
        "--device",
        "H100_SXM",
        "--workers",
        "1",
        "--batch",
        "256",
        "--precision",
        "bf16",
        "--data-loader",
        "none",
        "--format",
        "json",
    )
    eager = json.loads(run(capsys, *args, "--stack", "pytorch")[1])[0]
    tuned = json.loads(run(capsys, *args)[1])[0]
    assert eager["stack"] == "pytorch" and tuned["stack"] == "optimized-cnn"
    assert eager["total_ms"] > 1.2 * tuned["total_ms"]


def test_search_keeps_to_the_stack_and_reproduce_round_trips(capsys):
    code, out, err = run(
        capsys,
        "optimize",
        "llama3-8b",
        "--budget",
        "16gpus",
        "--stack",
        "pytorch",
        "--trials",
        "40",
        "--format",
        "json",
    )
    assert code == 0, err
    best = json.loads(out)["best"]
    assert best["stack"] == "pytorch"
    assert (best["tp"], best["pp"], best["sp"], best["ep"], best["interleave"]) == (1, 1, "off", 1, 1)
    assert best["zero"] in (0, 3)
    cmd = best["estimate_command"]
    assert "--stack pytorch" in cmd
    argv = cmd.split()[1:]
    code, out, err = run(capsys, *argv, "--format", "json")
    assert code == 0, err
    again = json.loads(out)[0]
    assert again["stack"] == "pytorch"
    assert again["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-9)


def test_several_stacks_are_a_searched_axis(capsys):
    code, out, err = run(
        capsys,
        "optimize",
        "llama3-8b",
        "--budget",
        "16gpus",
        "--stack",
        "megatron,pytorch",
        "--trials",
        "60",
        "--gpu",
        "H100_SXM",
    )
    assert code == 0, err
    assert "What the stack buys" in out
    assert re.search(r"- pytorch: .*; \w+ instead: \d+\.\d\dx faster", out) or re.search(
        r"- megatron: .*; pytorch instead", out
    )
    code, out, err = run(
        capsys,
        "optimize",
        "llama3-8b",
        "--budget",
        "16gpus",
        "--stack",
        "megatron,pytorch",
        "--trials",
        "60",
        "--gpu",
        "H100_SXM",
        "--format",
        "json",
    )
    stacks = json.loads(out)["best"]["stacks"]
    assert {s["stack"] for s in stacks} == {"megatron", "pytorch"}
    assert stacks[0]["slower"] == 1.0 and all(s["slower"] >= 1.0 for s in stacks)


def test_list_stacks(capsys):
    code, out, err = run(capsys, "list", "stacks", "--format", "json")
    assert code == 0, err
    recs = {r["stack"]: r for r in json.loads(out)}
    assert set(SHIPPED) <= set(recs)
    assert recs["pytorch"]["generations"] == ["Hopper"]
    assert "one GPU generation (Hopper)" in recs["pytorch"]["caveats"]
    assert "few runs (28, under 30)" in recs["megatron"]["caveats"]
    for name in SHIPPED:
        assert recs[name]["error_kind"] == "held-out"
    code, out, _ = run(capsys, "list", "stacks")
    assert code == 0 and "default for transformer" in out and "default for cnn" in out


def test_user_stack_folder(tmp_path, monkeypatch, capsys):
    prof = tmp_path / "mine.profile.toml"
    prof.write_text(registry_path("pytorch").read_text())
    (tmp_path / "mine.toml").write_text(
        '[stack]\ndescription = "my lab"\nframework = "PyTorch"\nfamilies = ["cnn"]\nprofile = "mine.profile.toml"\n'
        "[plans]\ntp = false\npp = false\nzero = [0]\n"
    )
    monkeypatch.setenv("PLANNER_STACKS", str(tmp_path))
    code, out, err = run(
        capsys, "estimate", "resnet50", "--workers", "1", "--stack", "mine", "--format", "json"
    )
    assert code == 0, err
    assert json.loads(out)[0]["stack"] == "mine"


def registry_path(name: str):
    from planner import catalog

    return catalog.configs_dir() / "profiles" / f"{registry.get(name).profile}.toml"


# ---- progress --------------------------------------------------------------------------------


def test_progress_lines_off_a_terminal():
    buf = io.StringIO()
    with shown(stream=buf) as report:
        report(1, 3, "all runs")
        report(2, 3, "without a")
    assert buf.getvalue().splitlines() == ["[1/3] fitted all runs", "[2/3] fitted without a"]


def test_calibrate_reports_every_fold():
    """Leave-one-source-out on the eager PyTorch stack: the full fit, then one per source."""
    from planner.calibrate.commands import run_calibrate

    calls = []
    out = run_calibrate([], loso=True, stack="pytorch", progress=lambda d, t, w: calls.append((d, t, w)))
    assert [c[:2] for c in calls][0] == (1, 7) and sorted(c[0] for c in calls) == list(range(1, 8))
    assert {c[2] for c in calls[1:]} == {
        f"without {s}" for s in stack_runs.profile(registry.get("pytorch")).meta["held_out_sources"]
    }
    assert "of stack pytorch (GPU generations: Hopper)" in out.text
    assert 'stack = "pytorch"' in out.profile_toml


def test_progress_bar_on_a_terminal():
    buf = io.StringIO()
    with shown(interactive=True, stream=buf) as report:
        for i in range(1, 4):
            report(i, 3, f"fold {i}")
    assert "3/3" in buf.getvalue() and "fitted fold 3" in buf.getvalue()


def test_pareto_names_its_stacks(capsys, tmp_path):
    code, out, err = run(
        capsys,
        "pareto",
        "llama3-8b",
        "--budget",
        "16gpus",
        "--gpu",
        "H100_SXM",
        "--trials",
        "30",
        "--stack",
        "megatron,fsdp",
        "--out",
        str(tmp_path / "p"),
    )
    assert code == 0, err
    assert "Stack megatron: " in out or "Stack fsdp: " in out
    report = (tmp_path / "p" / "report.md").read_text()
    assert "stack" in report
    plans = [json.loads(p.read_text()) for p in (tmp_path / "p").glob("plan_*.json")]
    assert plans and all(p["stack"] in ("megatron", "fsdp") for p in plans)


def test_calibrate_a_stack_on_given_files(capsys):
    """--stack with files fits the rows of those files that the stack's rules keep."""
    csv = "configs/profiles/h100-sxm-pytorch-eager-transformers.csv"
    code, out, err = run(capsys, "calibrate", csv, "--stack", "pytorch", "--no-loso", "--no-progress")
    assert code == 0, err
    assert "on 5 runs from 1 sources of stack pytorch" in out
    assert "in-sample, not held-out" in out
    assert err.splitlines() == ["[1/1] fitted all runs"]
    code, _, err = run(capsys, "calibrate", csv, "--stack", "megatron", "--no-loso")
    assert code == 2 and "no run of" in one_error_line(err)
