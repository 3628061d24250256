"""Epochs to a target accuracy by global batch (planner.epochs), against the cited values.

- Goyal et al. 2017 (arXiv:1706.02677): ResNet-50, 90 epochs, no accuracy loss up to a global
  batch of 8,192; past it the rule keeps the 8k run's step count (Shallue et al. 2019).
- MLPerf Training reference convergence points, ResNet-50 v1.5 to 75.9% top-1 with LARS
  (mlcommons/logging rcp_checker/training_4.0.0/rcps_resnet.json @0a0a659): mean epochs to
  converge, e.g. 1,632: 595/17 = 35.0; 8,192: 420/10 = 42.0; 32,768: 560/10 = 56.0;
  67,840: 2,404/28 = 85.86.
"""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest

from planner import api
from planner.epochs import GOYAL_EPOCHS, MLPERF_RCP_EPOCHS, rule_for


def test_goyal_rule_holds_90_epochs_to_8k_then_keeps_the_steps():
    rule = rule_for("resnet50", "momentum")
    assert rule.name == "goyal-2017"
    e = rule.epochs(np.array([256, 1024, 8192, 16384, 65536]))
    np.testing.assert_allclose(e, [90, 90, 90, 180, 720])
    steps = e * 1_281_167 / np.array([256, 1024, 8192, 16384, 65536])
    assert steps[3] == pytest.approx(steps[2]) and steps[4] == pytest.approx(steps[2])
    assert GOYAL_EPOCHS == 90


def test_mlperf_rule_reads_the_reference_convergence_points():
    rule = rule_for("resnet50", "momentum", "mlperf-lars")
    assert len(MLPERF_RCP_EPOCHS[67840]) == 28 and len(MLPERF_RCP_EPOCHS[1632]) == 17
    e = rule.epochs(np.array([1632, 8192, 32768, 67840]))
    np.testing.assert_allclose(e, [595 / 17, 42.0, 56.0, 2404 / 28])
    between = rule.epochs(np.array([16384]))[0]  # log-linear between 13,056 (45.4) and 32,768
    assert 45.4 < between < 56.0
    assert rule.epochs(np.array([512, 200_000])) == pytest.approx([595 / 17, 2404 / 28])  # flat outside
    assert "outside the reference batches" in rule.describe(200_000)


def test_nets_and_optimizers_without_a_cited_schedule_keep_fixed_epochs():
    assert rule_for("resnet101", "sgd").name == "goyal-2017"
    assert rule_for("resnet101", "momentum", "mlperf-lars") is None  # MLPerf's references: ResNet-50
    assert rule_for("vgg16", "momentum") is None
    assert rule_for("resnet50", "adam") is None


def test_answer_states_the_rule_and_a_larger_batch_is_not_free():
    best = api.optimize("resnet50", budget="64gpus", gpu="A100_80GB", max_global_batch=65536).best
    rec = best.record
    assert rec["epochs"] == 90.0 and best.global_batch <= 8192  # past 8k the steps stop falling
    assert rec["epochs_basis"].startswith("goyal-2017") and "1706.02677" in rec["epochs_source"]
    fixed = api.optimize("resnet50", budget="64gpus", gpu="A100_80GB", epochs=40).best.record
    assert fixed["epochs"] == 40.0 and fixed["epochs_basis"].startswith("fixed")


# --convergence: the rule named on the command line (planner.epochs.resolve)
def _json(capsys, args: list[str]):
    from planner.cli import main

    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_convergence_mlperf_lars_from_the_cli_and_its_reproduce_line(capsys, tmp_path, monkeypatch):
    """At a global batch of 4,096 the MLPerf reference runs took 400/10 = 40.0 epochs."""
    monkeypatch.chdir(tmp_path)
    args = [
        "optimize",
        "resnet50",
        "--budget",
        "64gpus",
        "--gpu",
        "A100_80GB",
        "--convergence",
        "mlperf-lars",
    ]
    best = _json(capsys, [*args, "--max-global-batch", "65536", "--format", "json"])["best"]
    batch = best["global_batch"]
    assert best["epochs_basis"].startswith(f"mlperf-lars at global batch {batch:,}")
    assert best["epochs"] == pytest.approx(
        float(rule_for("resnet50", "momentum", "mlperf-lars").epochs(batch))
    )
    assert rule_for("resnet50", "sgd", "mlperf-lars").epochs(4096) == pytest.approx(400 / 10)
    if batch == 4096:  # the answer on this catalog
        assert best["epochs"] == pytest.approx(40.0)
    words = shlex.split(best["estimate_command"])
    assert words[words.index("--convergence") + 1] == "mlperf-lars"
    (row,) = _json(capsys, [*words[1:], "--format", "json"])
    assert row["epochs"] == best["epochs"] and row["epochs_basis"] == best["epochs_basis"]
    assert row["total_ms"] == pytest.approx(best["iteration_ms"], rel=5e-3)


def test_convergence_fixed_keeps_the_nets_count_at_any_batch(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["optimize", "resnet50", "--budget", "64gpus", "--gpu", "A100_80GB", "--max-global-batch", "65536"]
    data = _json(capsys, [*args, "--convergence", "fixed", "--format", "json"])
    best = data["best"]
    run = json.loads((tmp_path / data["run_dir"] / "run.json").read_text())
    assert run["request"]["convergence"] == "fixed"
    assert best["epochs"] == 90.0 and best["epochs_basis"].startswith("fixed (--convergence fixed)")
    assert "--convergence fixed" in best["estimate_command"]
    auto = _json(capsys, [*args, "--format", "json"])["best"]  # auto: Goyal's rule, not carried
    assert auto["epochs_basis"].startswith("goyal-2017") and "--convergence" not in auto["estimate_command"]


def test_convergence_in_api_sweep_and_plan_files(capsys, tmp_path, monkeypatch):
    from planner.cli import main
    from planner.sweep.spec import load

    monkeypatch.chdir(tmp_path)
    rec = api.optimize("resnet50", budget="8gpus", gpu="A100_80GB", convergence="mlperf-lars").best.record
    assert rec["epochs_basis"].startswith("mlperf-lars")
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  convergence: [goyal-2017, mlperf-lars]\noptions:\n  net: resnet50\n"
    )
    assert sorted(c.request.convergence for c in load(path, tmp_path / "r").cells()) == [
        "goyal-2017",
        "mlperf-lars",
    ]
    args = ["pareto", "resnet50", "--budget", "8gpus", "--gpu", "A100_80GB", "--convergence", "mlperf-lars"]
    assert main([*args, "--out", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    for f in sorted((tmp_path / "p").glob("plan_*.json")):
        assert json.loads(f.read_text())["convergence"] == "mlperf-lars"
        (row,) = _json(capsys, ["estimate", "--plan", str(f), "--format", "json"])
        assert row["epochs_basis"].startswith("mlperf-lars")


@pytest.mark.parametrize(
    ("net", "extra", "message"),
    [
        (
            "resnet50",
            ["--convergence", "lars"],
            "--convergence 'lars' (valid: auto, goyal-2017, mlperf-lars, fixed)",
        ),
        (
            "vgg16",
            ["--convergence", "mlperf-lars"],
            "--convergence mlperf-lars: its study trained resnet50, not 'vgg16' (valid for it: auto, fixed)",
        ),
        (
            "resnet101",
            ["--convergence", "mlperf-lars"],
            "--convergence mlperf-lars: its study trained resnet50, not 'resnet101'",
        ),
        (
            "resnet50",
            ["--convergence", "goyal-2017", "--optimizer", "adam"],
            "--convergence goyal-2017 is for SGD with momentum (LARS for mlperf-lars), not --optimizer adam",
        ),
        (
            "llama3-8b",
            ["--convergence", "goyal-2017"],
            "its study trained resnet50, resnet101, not 'llama3-8b'",
        ),
    ],
)
@pytest.mark.parametrize("command", ["estimate", "optimize"])
def test_bad_convergence_exits_2_in_one_line(capsys, command, net, extra, message):
    from planner.cli import main

    args = [command, net, *extra]
    args += ["--budget", "8gpus", "--gpu", "A100_80GB"] if command == "optimize" else ["--workers", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_convergence_with_epochs_is_refused():
    from planner.epochs import resolve
    from planner.errors import BadInput

    with pytest.raises(BadInput, match="--convergence goyal-2017 with --epochs 40: --epochs fixes the count"):
        resolve("goyal-2017", "resnet50", "momentum", 40.0)
    assert resolve("auto", "resnet50", "momentum", 40.0) is None
    assert resolve("fixed", "resnet50", "momentum") is None
    assert resolve("mlperf-lars", "resnet50", "sgd").name == "mlperf-lars"
