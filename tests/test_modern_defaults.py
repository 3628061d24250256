"""The modern rules as every command's default: shared defaults, the data-loader bound, the
calibration's interval on every prediction, how sure the optimizer is, and bad-input lines."""

from __future__ import annotations

import json

import pytest

from planner import catalog
from planner.cli import main
from planner.metrics.model import CostModel
from planner.pipeline import optimize
from planner.request import defaults
from planner.request.estimate import EstimateRequest
from planner.request.optimize import OptimizeRequest


def test_one_set_of_defaults():
    o, e = OptimizeRequest("alexnet"), EstimateRequest("alexnet")
    for key in ("rules", "precision", "ppp_comp", "ppp_comm", "network", "optimizer", "data_loader"):
        assert getattr(o, key) == getattr(e, key) == getattr(defaults, key.upper()), key
    assert o.rules == "modern" and o.precision == "auto"


def _json(capsys, *argv):
    assert main([*argv, "--format", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_cpu_loader_bounds_alexnet_and_is_cited(capsys):
    """CPU JPEG decoding: samples/s per core x host cores per GPU (configs/efficiencies.toml)."""
    per_gpu = catalog.loader_rates()["cpu_jpeg"]["samples_per_s_per_core"] * catalog.host_cores_per_gpu()
    assert CostModel.of("modern", loader="cpu").loader_per_gpu == pytest.approx(per_gpu)
    eight = [
        "estimate",
        "alexnet",
        "--workers",
        "8",
        "--gpus-per-node",
        "8",
        "--batch",
        "512",
        "--scheme",
        "ring",
    ]
    cpu = _json(capsys, *eight)[0]
    none = _json(capsys, *eight, "--data-loader", "none")[0]
    # AlexNet on 8 H100s outruns a CPU loader: the loader's rate is the throughput
    assert cpu["throughput_samples_s"] == pytest.approx(8 * per_gpu, rel=1e-9)
    assert none["throughput_samples_s"] > 2 * cpu["throughput_samples_s"]
    # a GPU (DALI) loader is faster than the CPU one
    assert CostModel.of("modern", loader="dali").loader_per_gpu > per_gpu
    # the loader is a modern-rules term only
    assert CostModel.of("paleo-2018", loader="cpu").loader_per_gpu == float("inf")


def test_main_job_explains_the_input_bound_and_how_sure(capsys):
    r = optimize(OptimizeRequest("alexnet", budget=("16gpus",)))
    best = r.best
    assert best["precision"] in ("bf16", "fp16")  # auto: no fp32 on tensor-core GPUs
    # the first reason names what binds, and the host's loader is named whenever it binds at all
    share = best["input_ms"] / best["iteration_ms"]
    kind = best["why"][0].split(":")[0]
    assert kind in ("input-bound", "compute-bound", "communication-bound")
    assert (kind == "input-bound") == (share >= 0.25)
    assert (share >= 0.005) == any(w.startswith("the data loader binds") for w in best["why"])
    assert best["loader"].startswith("JPEG decoding on") and best["host"]
    lo, hi = best["iteration_ms_range"]
    assert lo < best["iteration_ms"] < hi
    c = best["confidence"]
    assert 0.0 <= c["best_win"] <= 1.0 and c["draws"] >= 200
    assert c["rival"] is None or c["best_win"] + c["rival"]["win"] <= 1.0 + 1e-9


def test_estimate_flags_what_does_not_fit(capsys):
    recs = _json(
        capsys, "estimate", "vgg16", "--device", "T4", "--batch", "512", "--workers", "1", "--scheme", "ring"
    )
    assert recs[0]["fits_memory"] is False and recs[0]["memory_gb"] > 16 * 0.9
    assert (
        main(["estimate", "vgg16", "--device", "T4", "--batch", "512", "--workers", "1", "--scheme", "ring"])
        == 0
    )
    assert "Does not fit: 1 of 1 rows" in capsys.readouterr().out
    ok = _json(
        capsys, "estimate", "vgg16", "--device", "T4", "--batch", "32", "--workers", "1", "--scheme", "ring"
    )
    assert ok[0]["fits_memory"] is True


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["optimize", "alexnet", "--epochs", "nan"], "--epochs must be a positive finite number"),
        (["optimize", "alexnet", "--epochs", "inf"], "--epochs must be a positive finite number"),
        (
            ["optimize", "alexnet", "--data-loader", "disk"],
            "--data-loader 'disk' (valid: auto, cpu, dali, none)",
        ),
        (
            ["optimize", "alexnet", "--rules", "paleo-2018", "--calibration", "x.toml"],
            "--calibration applies",
        ),
        (["estimate", "alexnet", "--calibration", "missing.toml"], "--calibration missing.toml"),
        (["validate", "missing.csv"], "missing.csv"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, monkeypatch, argv, says):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_sweep_specs_take_the_cost_model_options(tmp_path):
    from planner.sweep.spec import load

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\ntrials: 10\ngrid:\n  net: [alexnet]\n  data_loader: [cpu, dali]\n"
        "options:\n  budget: 8gpus\n  rules: modern\n"
    )
    cells = load(spec).cells()
    assert [c.request.data_loader for c in cells] == ["cpu", "dali"]
    assert all(c.request.rules == "modern" and c.request.precision == "auto" for c in cells)
