"""Energy and CO2 of training plans (issue 13): the cited defaults, a hand-computed figure, the
model's properties, the energy objective in optimize, pareto and sweeps, and the options."""

from __future__ import annotations

import math

import numpy as np
import pytest

from costs import energy
from planner import catalog
from planner.cli import main
from planner.energy import Energy, with_options
from planner.errors import BadInput
from planner.pipeline import build, optimize
from planner.request.optimize import OptimizeRequest
from planner.search.scored import TIE, exhaustive


def test_defaults_are_the_cited_figures():
    """configs/energy.toml: the Teads p4d.24xlarge figures (10 % / 100 % load GPU power, CPU
    package + memory at 50 % load), Uptime's 2023 PUE, Ember's 2023 world grid intensity and the
    U.S. EIA's 2023 average industrial electricity price (8.06 cents per kWh, for owned GPUs)."""
    e = catalog.energy_defaults()
    assert e.waiting_fraction == pytest.approx(1018.4 / 3259.3, abs=5e-5)
    assert e.node_w == pytest.approx(448.31 + 830.22)
    assert (e.pue, e.grid_g_per_kwh, e.usd_per_kwh) == (1.58, 481.0, 0.0806)
    table = catalog.read_toml("energy.toml")["electricity"]
    assert "eia.gov" in table["source"] and "8.06 cents per kWh" in table["source"]


def test_electricity_option_overrides_the_default_and_checks_its_bound():
    d = catalog.energy_defaults()
    assert with_options(d, None, None, "0.25").usd_per_kwh == 0.25
    assert with_options(d, None, None, 0).usd_per_kwh == 0.0
    assert with_options(d, None, None).usd_per_kwh == d.usd_per_kwh
    for bad in (-1, math.nan, math.inf, "x", True, 10):
        with pytest.raises(
            BadInput, match=r"^--electricity '.*' must be a price in USD per kWh from 0 to below 10$"
        ):
            with_options(d, None, None, bad)


def test_every_current_device_has_a_board_power():
    for key, d in catalog.devices().items():
        # the highest catalogued board power: 1,400 W (MI355X, devices.toml; the HGX B300 row is 1,100 W)
        assert 0 < d.raw["tdp_w"] <= 1400, key


def test_hand_computed_energy_of_the_main_jobs_plan():
    """`planner optimize alexnet --budget 16gpus`: 16 x T4 (70 W board power), 2 nodes x 8, one
    optimizer step 200.94 ms of which 66.32 ms compute (forward 22.56 + backward 37.88 + update
    5.88), 90 epochs x ceil(1,281,167 / 8,192) = 14,130 steps. Default parameters: waiting
    fraction 0.3125, node 1278.53 W, PUE 1.58, grid 481 g/kWh.

      per GPU  70 x 0.06632 + 0.3125 x 70 x (0.20094 - 0.06632) = 4.6424 + 2.9448125 = 7.5872125 J
      GPUs     16 x 7.5872125                                     = 121.3954 J
      nodes    2 x 1278.53 x 0.20094                              = 513.8156364 J
      meter    (121.3954 + 513.8156364) x 1.58                    = 1003.6334375 J per step
      train    1003.6334375 x 14,130 / 3.6e6                      = 3.93926 kWh
      CO2      3.93926 x 481 / 1000                               = 1.89478 kg
    """
    e = Energy(0.3125, 1278.53, 1.58, 481.0)
    m = e.metrics(70.0, 16, 2, 0.20094, 0.06632, 14130)
    assert float(m["energy_kwh"]) == pytest.approx(3.93926, abs=5e-6)
    assert float(m["co2_kg"]) == pytest.approx(1.89478, abs=5e-6)
    # the same plan through the whole pipeline: the scorer uses its breakdown's seconds
    scorer, _ = build(OptimizeRequest("alexnet", budget=("16gpus",), gpu="T4"))
    res = optimize(OptimizeRequest("alexnet", budget=("16gpus",), gpu="T4", trials=40))
    b = res.best
    steps = 90 * math.ceil(1_281_167 / b["global_batch"])
    hand = e.metrics(70.0, b["gpus"], b["nodes"], b["iteration_ms"] / 1e3, b["compute_ms"] / 1e3, steps)
    # the lost time of failures and restarts runs at the same power (planner.goodput)
    assert b["energy_kwh"] == pytest.approx(float(hand["energy_kwh"]) / b["goodput"], rel=1e-9)
    assert "PUE 1.58, grid 481 gCO2/kWh" in res.energy
    assert scorer.energy == catalog.energy_defaults()


def _random_plans(n: int = 400, seed: int = 1):
    rng = np.random.default_rng(seed)
    step = rng.uniform(1e-3, 2.0, n)
    return dict(
        gpus=rng.integers(1, 64, n),
        nodes=rng.integers(1, 8, n),
        step_s=step,
        busy_s=step * rng.uniform(0, 1, n),
        board_w=rng.uniform(50, 1000, n),
    )


def _joules(p, waiting=0.3125, node=1278.53, pue=1.58, **over):
    return energy.step_joules(**{**p, **over}, waiting_fraction=waiting, node_w=node, pue=pue)


def test_energy_rises_with_gpus_at_fixed_time():
    p = _random_plans()
    more = _joules(p, gpus=p["gpus"] + 1)
    assert (more > _joules(p)).all()


def test_pue_and_grid_scale_linearly():
    p = _random_plans()
    j1 = _joules(p, pue=1.0)
    assert np.allclose(_joules(p, pue=1.58), 1.58 * j1, rtol=1e-12)
    assert np.allclose(_joules(p, pue=2.5), 2.5 * j1, rtol=1e-12)
    kwh = energy.training_kwh(j1, 1000)
    assert np.allclose(energy.co2_kg(kwh, 962.0), 2 * energy.co2_kg(kwh, 481.0), rtol=1e-12)
    assert (energy.co2_kg(kwh, 0.0) == 0).all()


def test_busy_time_costs_more_than_waiting_and_bounds_hold():
    p = _random_plans()
    idle = _joules(p, busy_s=np.zeros_like(p["step_s"]))
    full = _joules(p, busy_s=p["step_s"])
    mid = _joules(p)
    assert (idle <= mid).all() and (mid <= full).all() and (idle < full).all()
    # busy longer than the step is clipped to the step; a waiting fraction of 1 is all busy
    assert np.allclose(_joules(p, busy_s=2 * p["step_s"]), full)
    assert np.allclose(_joules(p, waiting=1.0), full)
    # all busy, no node overhead, PUE 1: board power x GPUs x seconds
    assert np.allclose(
        _joules(p, busy_s=p["step_s"], node=0.0, pue=1.0), p["gpus"] * p["board_w"] * p["step_s"]
    )


def test_unknown_board_power_gives_nan_not_zero():
    j = energy.step_joules(
        np.array([8]), np.array([1]), np.array([1.0]), np.array([0.5]), np.array([np.nan]), 0.3, 1000, 1.5
    )
    assert np.isnan(j).all()


def test_scorer_energy_is_the_model_over_its_own_breakdown():
    """Every plan of a small space: energy_kwh is costs.energy over that plan's seconds, GPUs,
    nodes and its device's board power."""
    scorer, _ = build(
        OptimizeRequest("alexnet", budget=("8gpus",), gpu="T4,A100_80GB", pue=1.2, grid_intensity=100)
    )
    m = scorer.metrics(scorer.space.grid())
    board = np.where(m["device_memory_bytes"] > 20e9, 400.0, 70.0)  # A100 80GB 400 W, T4 70 W
    steps = scorer.epochs * np.ceil(scorer.dataset_size / m["global_batch"])
    j = energy.step_joules(
        m["gpus"], m["nodes"], m["iteration_s"], m["compute_s"], board, 0.3125, 1278.53, 1.2
    )
    assert np.allclose(m["energy_kwh"], j * steps / 3.6e6 / m["goodput"], rtol=1e-12)
    assert np.allclose(m["co2_kg"], m["energy_kwh"] * 0.1, rtol=1e-12)


def test_energy_objective_is_certified_by_enumeration():
    req = OptimizeRequest(
        "alexnet", budget=("8gpus",), gpu="T4,L4,A100_80GB", objective="energy", exhaustive="always"
    )
    best = optimize(req).best
    scorer, objectives = build(req)
    full = exhaustive(scorer, objectives)
    low = full.objectives[0, full.feasible].min()
    assert best["energy_kwh"] <= low * (1 + TIE)
    t = optimize(
        OptimizeRequest("alexnet", budget=("8gpus",), gpu="T4,L4,A100_80GB", exhaustive="always")
    ).best
    assert best["energy_kwh"] <= t["energy_kwh"]


def test_pareto_takes_time_cost_energy(tmp_path, capsys):
    code = main(
        [
            "pareto",
            "alexnet",
            "--budget",
            "4gpus",
            "--gpu",
            "T4,L4",
            "--objectives",
            "time,cost,energy",
            "--trials",
            "30",
            "--out",
            str(tmp_path / "p"),
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and "kWh" in out
    md = (tmp_path / "p" / "report.md").read_text()
    assert "| energy (kWh) | CO2 (kg) |" in md and "PUE 1.58" in md
    trials = (tmp_path / "p" / "trials.csv").read_text().splitlines()
    assert trials[0].startswith("time_to_train_s,cost_usd,energy_kwh,co2_kg,")
    assert all(float(r.split(",")[2]) > 0 for r in trials[1:])


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--pue", "0.5"], "--pue must be a number from 1"),
        (["--pue", "nan"], "--pue must be a number from 1"),
        (["--grid-intensity", "-3"], "--grid-intensity must be gCO2 per kWh from 0"),
        (["--objective", "joules"], "energy"),
    ],
)
def test_bad_energy_options_are_one_line_exit_2(argv, fragment, capsys, tmp_path):
    code = main(["optimize", "alexnet", "--budget", "4gpus", "--out", str(tmp_path / "o"), *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err


def test_pareto_rejects_other_objective_lists_naming_the_valid_ones():
    from planner.report.pareto_files import check_objectives

    assert check_objectives("time,cost,energy") == ["time", "cost", "energy"]
    with pytest.raises(BadInput, match=r"valid: time,cost, time,cost,energy, time,cost,memory"):
        check_objectives("time,energy")


def test_options_override_the_defaults():
    d = catalog.energy_defaults()
    e = with_options(d, 1.1, 20.0)
    assert (e.pue, e.grid_g_per_kwh, e.node_w, e.waiting_fraction) == (
        1.1,
        20.0,
        d.node_w,
        d.waiting_fraction,
    )
    a = optimize(OptimizeRequest("alexnet", budget=("4gpus",), gpu="T4", trials=20)).best
    b = optimize(
        OptimizeRequest("alexnet", budget=("4gpus",), gpu="T4", trials=20, pue=1.58 * 2, grid_intensity=0)
    ).best
    assert a["time_to_train_s"] == b["time_to_train_s"]
    assert b["energy_kwh"] == pytest.approx(2 * a["energy_kwh"], rel=1e-12) and b["co2_kg"] == 0


def test_estimate_reports_energy_per_step(capsys):
    code = main(
        [
            "estimate",
            "alexnet",
            "--device",
            "A100_80GB",
            "--workers",
            "1",
            "--scheme",
            "ring",
            "--format",
            "json",
        ]
    )
    out, _ = capsys.readouterr()
    import json

    rec = json.loads(out)[0]
    assert code == 0
    step, busy = rec["total_ms"] / 1e3, rec["compute_ms"] / 1e3
    hand = (400 * busy + 0.3125 * 400 * (step - busy) + 1278.53 * step) * 1.58
    assert rec["step_energy_j"] == pytest.approx(hand, rel=1e-9)
    per_million = 1e6 / rec["effective_batch"]
    assert rec["energy_kwh_per_million_samples"] == pytest.approx(hand * per_million / 3.6e6, rel=1e-9)


def test_sweep_specs_take_energy_keys_and_objective(tmp_path):
    from planner.sweep.spec import SweepSpecError, load

    def spec(body: str):
        path = tmp_path / "s.yaml"
        path.write_text(f"name: e\ngrid:\n  net: [alexnet]\n  budget: [4gpus]\n{body}")
        return load(path, tmp_path)

    cells = spec("  objective: [time, energy]\noptions:\n  pue: 1.1\n  grid_intensity: 50\n").cells()
    assert [c.request.objective for c in cells] == ["time", "energy"]
    assert (cells[1].request.pue, cells[1].request.grid_intensity) == (1.1, 50)
    with pytest.raises(SweepSpecError, match="--pue must be"):
        spec("options:\n  pue: 0.2\n")
    assert math.isfinite(cells[0].request.pue)


def test_sweep_runs_the_energy_objective_and_summarises_it(tmp_path):
    import csv

    spec = tmp_path / "e.yaml"
    spec.write_text(
        "name: en\ntrials: 20\nseed: 1\ngrid:\n  objective: [time, energy]\n"
        "options:\n  net: alexnet\n  budget: 4gpus\n  gpu: T4,L4\n  pue: 1.2\n"
    )
    results = tmp_path / "results"
    assert main(["sweep", "run", str(spec), "--results", str(results)]) == 0
    assert main(["sweep", "collect", str(spec), "--results", str(results)]) == 0
    rows = {r["objective"]: r for r in csv.DictReader((results / "en" / "summary.csv").open())}
    assert float(rows["energy"]["energy_kwh"]) <= float(rows["time"]["energy_kwh"])
    assert float(rows["energy"]["co2_kg"]) == pytest.approx(float(rows["energy"]["energy_kwh"]) * 0.481)
    md = (results / "en" / "summary.md").read_text()
    assert "Least-energy plan per net and budget" in md and " kWh" in md
