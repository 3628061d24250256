"""The transformer options of the CLI: bad degrees get one line and exit 2, the explicit
`estimate` form of issue 12, JSON records of `optimize`, and a sweep over a transformer."""

from __future__ import annotations

import json

import pytest

from planner.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["optimize", "llama3-8b", "--budget", "16gpus", "--tp", "3"],
            "--tp 3 does not divide the 32 attention heads",
        ),
        (["optimize", "llama3-8b", "--budget", "64gpus", "--tp", "16"], "--tp 16 is wider than a node"),
        (
            ["optimize", "llama3-8b", "--budget", "64gpus", "--pp", "64"],
            "--pp 64 is deeper than the 32 layers",
        ),
        (["optimize", "llama3-8b", "--budget", "16gpus", "--zero", "4"], "--zero '4' (valid"),
        (["optimize", "llama3-8b", "--budget", "16gpus", "--recompute", "half"], "--recompute 'half' (valid"),
        (["optimize", "alexnet", "--budget", "16gpus", "--tp", "2"], "--tp needs a transformer net"),
        (["optimize", "llama3-8b", "--budget", "16gpus", "--ep", "2"], "--ep needs a mixture-of-experts"),
        (
            ["estimate", "llama3-8b", "--tp", "3", "--workers", "3", "--gpus-per-node", "3"],
            "--tp 3 does not divide",
        ),
        (
            ["estimate", "llama3-8b", "--tp", "16", "--workers", "16", "--gpus-per-node", "8"],
            "--tp 16 is wider than a node",
        ),
        (
            ["estimate", "llama3-70b", "--pp", "128", "--workers", "128"],
            "--pp 128 is deeper than the 80 layers",
        ),
        (
            ["estimate", "llama3-8b", "--tp", "2", "--workers", "3", "--gpus-per-node", "2"],
            "--workers 3 is not a multiple",
        ),
        (
            ["estimate", "llama3-8b", "--global-batch", "100", "--microbatch", "3", "--workers", "8"],
            "--global-batch 100",
        ),
        (["estimate", "llama3-8b", "--recompute", "selective"], "--recompute selective"),
        (
            ["estimate", "alexnet", "--tp", "2", "--workers", "2", "--gpus-per-node", "2"],
            "need a transformer net",
        ),
        (["estimate", "bert-large", "--seq-len", "1024"], "exceeds the 512 learned positions"),
    ],
)
def test_bad_parallel_options_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2, (code, out, err)
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_explicit_estimate_form_of_the_issue(capsys):
    code, out, err = run(
        capsys,
        *"estimate gpt3-175b --device A100_80GB --workers 1024 --gpus-per-node 8 --network ib_hdr --tp 8 --pp 16 "
        "--microbatch 1 --global-batch 1536 --seq-len 2048 --precision bf16 --recompute full --format json".split(),
    )
    assert code == 0, err
    recs = json.loads(out)
    for r in recs:
        assert (r["tp"], r["pp"], r["dp"], r["zero"], r["microbatch"], r["recompute"]) == (
            8,
            16,
            8,
            0,
            1,
            "full",
        )
        assert r["accumulation"] == 192 and r["seq_len"] == 2048
        assert r["tokens_per_s"] == pytest.approx(1536 * 2048 / (r["total_ms"] / 1e3))
        assert 0 < r["mfu"] < r["hfu"] < 1 and r["memory_gb_per_gpu"] < 80


def test_optimize_json_records_carry_the_llm_fields(capsys):
    code, out, err = run(capsys, "optimize", "bert-large", "--budget", "16gpus", "--format", "json")
    assert code == 0, err
    best = json.loads(out)["best"]
    for key in (
        "tp",
        "pp",
        "dp",
        "zero",
        "microbatch",
        "recompute",
        "tokens_per_s",
        "mfu",
        "memory_gb_per_gpu",
    ):
        assert key in best, key
    assert best["tp"] * best["pp"] * best["dp"] == best["gpus"]
    assert best["global_batch"] == 256  # BERT's published batch (Devlin et al. 2019)
    assert best["dp"] * best["microbatch"] * best["accumulation"] == 256


def test_a_sweep_over_transformers_with_model_parallel_keys(tmp_path, capsys):
    """Sweep specs take the model-parallel axes' keys; the summary carries TP and PP, and each
    net's attention kernel (BERT's spec: standard; Llama 3's: flash)."""
    import csv

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: llm\ntrials: 20\nseed: 0\ngrid:\n  net: [bert-large, llama3-8b]\n  budget: [16gpus]\n"
        "options:\n  gpu: H100_SXM\n  tp: 1,2,4\n  recompute: none,full\n  global_batch: 256\n"
    )
    results = tmp_path / "results"
    assert main(["sweep", "run", str(spec), "--results", str(results)]) == 0
    assert main(["sweep", "collect", str(spec), "--results", str(results)]) == 0
    rows = list(csv.DictReader((results / "llm" / "summary.csv").open()))
    assert [r["net"] for r in rows] == ["bert-large", "llama3-8b"]
    for r in rows:
        assert r["state"] == "done" and int(r["tp"]) in (1, 2, 4) and r["recompute"] in ("none", "full")
        assert int(r["tp"]) * int(r["pp"]) * int(r["dp"]) == int(r["gpus"])
    assert [r["attention"] for r in rows] == ["standard", "flash"]
    md = (results / "llm" / "summary.md").read_text()
    assert ", standard attention |" in md and ", flash attention |" in md
    capsys.readouterr()


def test_tp_overlap_option(capsys):
    base = "estimate gpt3-175b --device H100_SXM --workers 64 --gpus-per-node 8 --tp 8 --pp 8 --microbatch 1 "
    base += "--global-batch 64 --recompute full --scheme ring --format json"
    code, out, err = run(capsys, *base.split())
    plain = json.loads(out)[0]
    code2, out2, err2 = run(capsys, *base.split(), "--tp-overlap")
    hidden = json.loads(out2)[0]
    assert code == code2 == 0 and hidden["tp_overlap"] == "on" and plain["tp_overlap"] == "off"
    assert hidden["tp_comm_ms"] < plain["tp_comm_ms"] and hidden["total_ms"] < plain["total_ms"]
    code, out, err = run(capsys, "optimize", "llama3-8b", "--budget", "16gpus", "--tp-overlap", "maybe")
    assert code == 2 and "--tp-overlap 'maybe' (valid: on, off, or on,off)" in err


def test_tp_overlap_is_searched_where_the_stack_runs_it(capsys, tmp_path):
    """The megatron stack (the transformer default) runs Megatron-Core's --tp-comm-overlap, so
    optimize searches it on and off: Llama 3 70B on 512 H100 takes TP 8 with it, says so in the
    plan's words and against its neighbour, and the Reproduce line sets it. The pytorch stack
    runs no tensor parallelism, so its search keeps it off; a target's pinned axes (deepspeed:
    no TP overlap, EP 1, CP 1, one virtual stage) are not listed as raw keys."""
    args = ["optimize", "llama3-70b", "--budget", "512gpus", "--gpu", "H100_SXM", "--network", "ib_ndr"]
    code, out, err = run(capsys, *args, "--out", str(tmp_path / "a"))
    assert code == 0, err
    plan = out.splitlines()[2]
    assert plan.startswith("  TP 8 x PP 1") and "TP communication overlapped" in plan
    assert "  - TP overlap on: TP overlap off " in out and "--tp-overlap" in out.split("Reproduce:")[1]
    code, out, err = run(capsys, *args, "--target", "deepspeed", "--out", str(tmp_path / "b"))
    plan = out.splitlines()[2]
    assert code == 0 and "overlapped" not in plan
    assert not any(k in plan for k in ("tp_overlap", "ep 1", "cp 1", "interleave", "pp_schedule")), plan
    code, out, err = run(
        capsys, *args, "--stack", "pytorch", "--format", "json", "--out", str(tmp_path / "c")
    )
    assert code == 0 and json.loads(out)["best"]["tp_overlap"] == "off"
