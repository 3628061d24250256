"""A user's fit refines a shipped profile (its prior): the GPUs the user's runs do not measure
keep their shipped predictions, and the GPU they measure moves toward the measurements.

The runs are the cited eager-PyTorch and NGC rows of configs/measurements/pytorch.csv and the
measured H100 eager runs of configs/profiles/h100-sxm-pytorch-eager.csv; the fits are made here
from those rows (no shipped profile is changed)."""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path

import numpy as np
import pytest

from planner.calibrate import commands, measurements, profile
from planner.calibrate.fitting import predict
from planner.calibrate.predict import RunTable
from planner.catalog import configs_dir
from planner.stacks import registry
from planner.stacks import runs as stack_runs

PYTORCH_CSV = configs_dir() / "measurements" / "pytorch.csv"
H100_EAGER = configs_dir() / "profiles" / "h100-sxm-pytorch-eager.csv"
HOPPER = {"H100_SXM", "H100_PCIE", "H200", "GH200"}


def _write(rows: list[dict], path: Path) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _rows(path: Path, keep) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if keep(r)]


def _fitted(out: commands.CalibrateOutput) -> profile.Profile:
    return profile.from_dict(tomllib.loads(out.profile_toml), "fitted")


def _shipped(stack: str) -> profile.Profile:
    return stack_runs.profile(registry.get(stack))


def _log_error(runs, prof: profile.Profile) -> np.ndarray:
    table = RunTable(runs, "modern")
    return np.log(predict(table, prof) / table.measured)


@pytest.fixture(scope="module")
def no_hopper(tmp_path_factory):
    """pytorch.csv without any Hopper row, fitted without --stack: CNN runs, so the prior is the
    CNN family's default stack, optimized-cnn."""
    path = _write(
        _rows(PYTORCH_CSV, lambda r: r["device"] not in HOPPER),
        tmp_path_factory.mktemp("prior") / "no_hopper.csv",
    )
    return path, commands.run_calibrate([str(path)], loso=False)


def test_unmeasured_gpus_keep_their_shipped_predictions(no_hopper):
    path, out = no_hopper
    assert "Prior: stack optimized-cnn, configs/profiles/optimized-cnn.toml" in out.text
    fitted, shipped = _fitted(out), _shipped("optimized-cnn")
    assert fitted.meta["refines"] == "optimized-cnn"
    # every Hopper run of the file (H100 SXM and PCIe, H200, GH200; 32 runs) predicted as before
    hopper = [r for r in measurements.load(PYTORCH_CSV) if r.device in HOPPER]
    assert len(hopper) == 32
    change = np.exp(_log_error(hopper, fitted) - _log_error(hopper, shipped)) - 1
    assert np.max(np.abs(change)) < 0.01
    # and so are their intervals: optimized-cnn's held-out interval of the generation where it
    # states one (Kepler, Pascal), else its CNN interval (Hopper: 8 runs, under 10)
    assert "interval_cnn_Hopper" not in shipped.meta
    for gen in ("Hopper", "Kepler", "Pascal"):  # generations only the prior has runs of
        want = shipped.meta.get(f"interval_cnn_{gen}", shipped.meta["interval_cnn"])
        assert fitted.meta[f"interval_cnn_{gen}"] == want
    assert fitted.meta["interval_cnn_Kepler"] != shipped.meta["interval_cnn"]
    # the Hopper scales are the shipped ones, untouched
    for key, value in shipped.scales.items():
        if ".Hopper" in key:
            assert fitted.scales[key] == value
    # and the runs it was fitted on are predicted better than by the shipped profile
    runs = measurements.load(path)
    assert np.median(np.abs(_log_error(runs, fitted))) < 0.5 * np.median(np.abs(_log_error(runs, shipped)))


def test_shared_parameters_the_runs_do_not_identify_are_held(no_hopper):
    """Overheads and link scales act on every GPU: weak evidence from other GPUs leaves them at
    the prior's values (they would move the H100 predictions otherwise)."""
    _, out = no_hopper
    fitted, shipped = _fitted(out), _shipped("optimized-cnn")
    held = fitted.meta["held_at_prior"]
    assert "kernel_min_us" in held and "host_per_kernel_us" in held
    for name in held:
        value = fitted.overheads_us.get(name, fitted.scales.get(name))
        assert value == pytest.approx(shipped.overheads_us.get(name, shipped.scales.get(name)), rel=1e-5)
    assert "Held at the prior" in out.text


def test_one_gpu_moves_toward_its_measurements(tmp_path):
    """The 12 timm eager-PyTorch runs of one RTX 3090 (pytorch.csv) refine stack pytorch, whose
    profile has no Ampere run: the RTX 3090 moves toward its measurements, the H100 stays."""
    path = _write(_rows(PYTORCH_CSV, lambda r: r["source"].startswith("timm-")), tmp_path / "rtx3090.csv")
    runs = measurements.load(path)
    assert {r.device for r in runs} == {"RTX_3090"} and len(runs) == 12
    out = commands.run_calibrate([str(path)], loso=False, stack="pytorch")
    fitted, shipped = _fitted(out), _shipped("pytorch")
    before, after = _log_error(runs, shipped), _log_error(runs, fitted)
    # the shipped profile (cited Ampere defaults) over-predicts these runs by about half
    assert np.median(before) > 0.3
    assert np.median(np.abs(after)) < 0.5 * np.median(np.abs(before))
    assert np.mean(np.abs(after) < np.abs(before)) >= 0.75
    h100 = measurements.load(H100_EAGER)
    change = np.exp(_log_error(h100, fitted) - _log_error(h100, shipped)) - 1
    assert np.max(np.abs(change)) < 0.01


def test_a_measured_gpu_the_prior_knows_moves_and_the_others_stay(tmp_path):
    """The measured eager H100 runs without --stack refine optimized-cnn (fitted on tuned NGC
    and MLPerf runs): its H100 predictions move toward the eager runs. The runs identify eager
    PyTorch's larger host overheads, which act on every GPU (a few % on the Volta runs); with
    those two put back, the Volta predictions are the shipped ones."""
    h100 = measurements.load(H100_EAGER)
    out = commands.run_calibrate([str(H100_EAGER)], loso=False)
    fitted, shipped = _fitted(out), _shipped("optimized-cnn")
    before, after = _log_error(h100, shipped), _log_error(h100, fitted)
    assert np.median(before) > 0.2  # the tuned stack's profile over-predicts eager PyTorch
    assert np.median(np.abs(after)) < 0.5 * np.median(np.abs(before))
    volta = [
        r
        for r in measurements.load(configs_dir() / "measurements" / "cnn.csv")
        if r.device.startswith("V100")
    ]
    assert volta
    change = np.exp(_log_error(volta, fitted) - _log_error(volta, shipped)) - 1
    assert np.max(np.abs(change)) < 0.05
    moved = {
        k for k, v in fitted.overheads_us.items() if v != pytest.approx(shipped.overheads_us[k], rel=1e-5)
    }
    assert moved == {"host_per_kernel_us", "kernel_min_us"}
    assert fitted.overheads_us["host_per_kernel_us"] > 2 * shipped.overheads_us["host_per_kernel_us"]
    put_back = profile.Profile(
        fitted.scales, {**fitted.overheads_us, **{k: shipped.overheads_us[k] for k in moved}}, {}, fitted.sync
    )
    change = np.exp(_log_error(volta, put_back) - _log_error(volta, shipped)) - 1
    assert np.max(np.abs(change)) < 0.01


def test_refits_of_shipped_runs_start_from_the_cited_defaults():
    """No files (a refit of the shipped runs) or files the prior was fitted on: the cited
    defaults, as the shipped profiles were fitted (the same runs must not count twice)."""
    runs = measurements.load(H100_EAGER)
    assert commands.choose_prior([], runs, "pytorch").profile is profile.EMPTY
    same = commands.choose_prior([str(H100_EAGER)], runs, "pytorch")
    assert same.profile is profile.EMPTY and "was fitted on h100-sxm-pytorch-eager.csv" in same.note
    asked = commands.choose_prior([str(H100_EAGER)], runs, "optimized-cnn", from_defaults=True)
    assert asked.profile is profile.EMPTY and asked.note == "--from-defaults"
    other = commands.choose_prior([str(H100_EAGER)], runs, "optimized-cnn")
    assert other.name == "optimized-cnn" and other.profile.scales == _shipped("optimized-cnn").scales


def test_space_starts_at_the_prior_and_keeps_the_rest():
    from planner import catalog

    runs = [r for r in measurements.load(PYTORCH_CSV) if r.device == "V100_16GB"]
    table = RunTable(runs, "modern")
    base = catalog.efficiency(table.device_keys, table.link_keys)
    prior = profile.Profile({"gemm.Volta.16bit": 0.9, "gemm.Hopper.16bit": 0.5}, {"kernel_min_us": 7.0}, {})
    sp = profile.space(runs, base, prior)
    value = dict(zip(sp.names, sp.prior.value))
    assert value["gemm.Volta.16bit"] == 0.9 and value["kernel_min_us"] == 7.0
    assert "gemm.Hopper.16bit" not in sp.names
    made = sp.profile(sp.prior.value)
    assert made.scales["gemm.Hopper.16bit"] == 0.5 and made.overheads_us["kernel_min_us"] == 7.0
