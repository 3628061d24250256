"""Owned hardware (issue 13): `--owned DEVICE:COUNT[@USD_PER_GPU_HOUR]` prices a device at 0 (or
the amortisation rate given) and caps its plans at the GPUs owned."""

from __future__ import annotations

import math

import pytest

from planner.cli import main
from planner.pipeline import optimize, pareto
from planner.request.optimize import OptimizeRequest, parse_owned


def test_owned_forms():
    assert parse_owned(["L4:4"]) == {"L4": (4, 0.0)}
    assert parse_owned(["a100_80gb:16@0.80", "T4:2@$0.1"]) == {"A100_80GB": (16, 0.8), "T4": (2, 0.1)}


@pytest.mark.parametrize("raw", ["L4", "L4:0", "L4:x", "L4:4@-1", "L4:4@abc", ":4", "L4:4@inf"])
def test_bad_owned_is_one_line_exit_2_naming_the_form(raw, capsys, tmp_path):
    code = main(["optimize", "alexnet", "--budget", "4gpus", "--owned", raw, "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "DEVICE:COUNT or DEVICE:COUNT@USD_PER_GPU_HOUR" in err


def test_unknown_owned_device_lists_the_devices(capsys, tmp_path):
    code = main(["optimize", "alexnet", "--owned", "NOPE:4", "--out", str(tmp_path / "o")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "unknown device 'NOPE' (valid: TITAN_X" in err


def test_owned_gpus_are_free_and_capped():
    r = optimize(
        OptimizeRequest("alexnet", budget=("16gpus",), objective="cost", gpu="T4,L4", owned=("L4:4",))
    )
    b = r.best
    assert b["gpu"] == "L4" and b["gpus"] <= 4 and b["cost_usd"] == 0.0
    assert b["usd_per_gpu_hour"] == 0.0 and b["price_source"] == "owned (4 GPUs, no marginal price)"
    for p in [b, *r.alternatives]:
        assert p["gpu"] != "L4" or p["gpus"] <= 4
    assert r.search["gap"] == 0.0


def test_amortised_rate_prices_the_owned_device(capsys, tmp_path):
    req = OptimizeRequest("alexnet", budget=("16gpus",), gpu="A100_80GB", owned=("A100_80GB:8@0.8",))
    b = optimize(req).best
    assert b["gpus"] <= 8 and b["usd_per_gpu_hour"] == 0.8
    assert math.isclose(b["cost_usd"], b["time_to_train_s"] / 3600 * b["gpus"] * 0.8, rel_tol=1e-12)
    code = main(
        [
            "optimize",
            "alexnet",
            "--gpu",
            "A100_80GB",
            "--owned",
            "A100_80GB:8@0.8",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and "price $0.80 per GPU-hour (owned (8 GPUs, $0.8/GPU-h amortised))" in out


def test_pareto_report_draws_plans_at_no_cost():
    data, files = pareto(
        OptimizeRequest(
            "alexnet", budget=("8gpus",), objective="time,cost", gpu="T4,L4", owned=("L4:2",), trials=40
        )
    )
    free = [p for p in data["front"] if p["cost_usd"] == 0]
    assert free and all(p["gpu"] == "L4" and p["gpus"] <= 2 for p in free)
    assert data["axes"]["cost_usd"][0] > 0 and "front-row" in files["report.html"]


def test_sweep_spec_takes_owned(tmp_path):
    from planner.sweep.spec import load

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: o\ngrid:\n  net: [alexnet]\n  budget: [8gpus]\noptions:\n  owned: [L4:4, T4:2@0.1]\n"
    )
    cell = load(path, tmp_path).cells()[0]
    assert cell.request.owned == ("L4:4", "T4:2@0.1")
