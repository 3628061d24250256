"""Owned hardware (issue 13): `--owned DEVICE:COUNT[@USD_PER_GPU_HOUR]` prices a device at its
amortisation rate (0 when none is given) plus its electricity (`--electricity`, USD per kWh, default
configs/energy.toml's) and caps its plans at the GPUs owned."""

from __future__ import annotations

import json
import math
from dataclasses import replace

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


def test_owned_gpus_without_electricity_are_free_and_capped():
    r = optimize(
        OptimizeRequest(
            "alexnet", budget=("16gpus",), objective="cost", gpu="T4,L4", owned=("L4:4",), electricity=0
        )
    )
    b = r.best
    assert b["gpu"] == "L4" and b["gpus"] <= 4 and b["cost_usd"] == 0.0
    assert b["usd_per_gpu_hour"] == 0.0 and b["price_source"] == "owned (4 GPUs, no marginal price)"
    assert (b["electricity_usd_per_kwh"], b["electricity_cost_usd"]) == (0.0, 0.0)
    for p in [b, *r.alternatives]:
        assert p["gpu"] != "L4" or p["gpus"] <= 4
    assert r.search["gap"] == 0.0


def test_owned_gpus_pay_the_cited_default_electricity():
    """configs/energy.toml [electricity]: U.S. EIA industrial average 2023, 8.06 cents per kWh."""
    b = optimize(
        OptimizeRequest("alexnet", budget=("16gpus",), objective="cost", gpu="T4,L4", owned=("L4:4",))
    ).best
    assert b["gpu"] == "L4" and b["electricity_usd_per_kwh"] == 0.0806
    assert b["cost_usd"] > 0 and math.isclose(b["cost_usd"], b["energy_kwh"] * 0.0806, rel_tol=1e-12)
    assert b["price_source"] == "owned (4 GPUs, no amortisation rate, electricity $0.0806/kWh)"


# A100 80GB SXM board power, configs/devices.toml (NVIDIA A100 datasheet): 400 W. The energy
# defaults of configs/energy.toml: waiting fraction 0.3125, node 1278.53 W, PUE 1.58.
A100_W, WAITING, NODE_W, PUE = 400.0, 0.3125, 1278.53, 1.58


def test_owned_cost_is_amortisation_plus_electricity_by_hand(capsys, tmp_path):
    """cost = rate x GPUs x hours + kWh x USD/kWh, the kWh recomputed from the plan's breakdown:
    J per step = (GPUs x (400 x compute s + 0.3125 x 400 x (step - compute) s) + nodes x 1278.53 x
    step s) x 1.58; steps = 90 epochs x ceil(1,281,167 / global batch); kWh = J x steps / 3.6e6."""
    argv = ["optimize", "alexnet", "--budget", "8gpus", "--gpu", "A100_80GB"]
    argv += ["--owned", "A100_80GB:8@0.8", "--electricity", "0.12", "--format", "json"]
    code = main([*argv, "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    b = data["best"]
    step, busy = b["iteration_ms"] / 1e3, b["compute_ms"] / 1e3
    joules = (
        b["gpus"] * (A100_W * busy + WAITING * A100_W * (step - busy)) + b["nodes"] * NODE_W * step
    ) * PUE
    steps = 90 * math.ceil(1_281_167 / b["global_batch"])
    # with goodput on (the default), the wall time and its energy are the failure-free ones / goodput
    kwh = joules * steps / 3.6e6 / b["goodput"]
    hours = steps * step / 3600 / b["goodput"]
    assert math.isclose(b["useful_time_s"], steps * step, rel_tol=1e-12)
    assert math.isclose(b["time_to_train_s"], steps * step / b["goodput"], rel_tol=1e-12)
    assert math.isclose(b["energy_kwh"], kwh, rel_tol=1e-9)
    assert math.isclose(b["cost_usd"], 0.8 * b["gpus"] * hours + kwh * 0.12, rel_tol=1e-9)
    assert math.isclose(b["electricity_cost_usd"], kwh * 0.12, rel_tol=1e-9)
    # the answer states the price used, in JSON and in text
    assert b["electricity_usd_per_kwh"] == 0.12 and data["request"]["electricity"] == "0.12"
    assert b["price_source"] == "owned (8 GPUs, $0.8/GPU-h amortised, electricity $0.12/kWh)"
    code = main([*argv[:-2], "--out", str(tmp_path / "t")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "price $0.80 per GPU-hour (owned (8 GPUs, $0.8/GPU-h amortised, electricity $0.12/kWh))" in out


def test_rented_plans_ignore_the_electricity_price():
    """A rented GPU's hourly price already pays for its power: --electricity changes no rented cost."""
    req = OptimizeRequest("alexnet", budget=("8gpus",), gpu="T4,L4", objective="cost", trials=30)
    a = optimize(req).best
    b = optimize(replace(req, electricity=0.5)).best
    assert a["cost_usd"] == b["cost_usd"] and "electricity_usd_per_kwh" not in b
    assert math.isclose(b["cost_usd"], b["time_to_train_s"] / 3600 * b["gpus"] * b["usd_per_gpu_hour"])


@pytest.mark.parametrize("value", ["-0.1", "nan", "inf", "-inf", "abc", "10", "1e9", ""])
@pytest.mark.parametrize("command", ["optimize", "pareto"])
def test_bad_electricity_is_one_line_exit_2_naming_option_value_and_bound(command, value, capsys, tmp_path):
    argv = [command, "alexnet", "--budget", "4gpus", "--owned", "L4:4", "--electricity", value]
    code = main([*argv, "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == f"error: --electricity '{value}' must be a price in USD per kWh from 0 to below 10\n"


def test_pareto_report_draws_plans_at_no_cost():
    data, files = pareto(
        OptimizeRequest(
            "alexnet",
            budget=("8gpus",),
            objective="time,cost",
            gpu="T4,L4",
            owned=("L4:2",),
            electricity=0,
            trials=40,
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


def test_sweep_spec_takes_electricity(tmp_path):
    from planner.sweep.spec import SweepSpecError, load

    path = tmp_path / "s.yaml"
    base = "name: o\ngrid:\n  net: [alexnet]\n  budget: [8gpus]\noptions:\n  owned: [L4:4]\n"
    path.write_text(base + "  electricity: 0.12\n")
    assert load(path, tmp_path).cells()[0].request.electricity == 0.12
    path.write_text(base + "  electricity: cheap\n")
    with pytest.raises(SweepSpecError, match="electricity"):
        load(path, tmp_path)
    path.write_text(base + "  electricity: -1\n")
    with pytest.raises(SweepSpecError, match=r"--electricity '-1' must be a price in USD per kWh from 0"):
        load(path, tmp_path)
