"""The shipped H100 SXM example (configs/profiles/h100-sxm-pytorch-eager.*): its runs load with
the calibrate loader, its profile is what `planner calibrate` fits on them, and README's table
of what calibrating on it changes."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from planner.calibrate import measurements
from planner.calibrate.commands import run_calibrate
from planner.cli import main

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "configs/profiles/h100-sxm-pytorch-eager.csv"
TOML = ROOT / "configs/profiles/h100-sxm-pytorch-eager.toml"


def test_runs_load():
    runs = measurements.load(CSV)
    assert len(runs) == 52 and {r.device for r in runs} == {"H100_SXM"} and {r.gpus for r in runs} == {1}
    assert {r.net for r in runs} == {"resnet50", "vgg16", "alexnet", "inception_v3", "densenet121"}
    assert {r.source for r in runs} == {f"h100-sxm-pytorch-2.11-{r.net}" for r in runs}  # one per net
    rn50 = {(r.precision, r.batch_per_gpu): r.value for r in runs if r.net == "resnet50"}
    assert rn50[("bf16", 256)] == 3987.5808 and rn50[("bf16", 64)] == 3363.9058
    assert len(measurements.load(CSV.with_name("h100-sxm-pytorch-eager-transformers.csv"))) == 5


def test_profile_is_the_fit_of_the_runs():
    shipped = tomllib.loads(TOML.read_text())
    fitted = tomllib.loads(run_calibrate([str(CSV)], loso=False, from_defaults=True).profile_toml)
    assert fitted["scale"] == pytest.approx(shipped["scale"], rel=1e-4)
    assert fitted["overhead"] == pytest.approx(shipped["overhead"], rel=1e-4)
    assert shipped["profile"]["runs"] == 52 and shipped["profile"]["median_ape"] == 23.46


@pytest.mark.parametrize(
    "batch, calibration, images_per_s",
    [
        (256, None, 6558),
        (256, "--stack pytorch", 3461),
        (256, str(TOML), 3397),
        (64, None, 6029),
        (64, "--stack pytorch", 2637),
        (64, str(TOML), 2689),
    ],
)
def test_readme_table(capsys, batch, calibration, images_per_s):
    """ResNet-50, bf16, one H100 SXM (measured: 3,988 and 3,364 images/s): the default CNN stack
    (optimized-cnn), the eager PyTorch stack, and the H100 eager profile."""
    argv = ["estimate", "resnet50", "--device", "H100_SXM", "--precision", "bf16", "--batch", str(batch)]
    argv += ["--workers", "1", "--scheme", "ring", "--data-loader", "none", "--format", "json"]
    if calibration and calibration.startswith("--stack"):
        argv += calibration.split()
    elif calibration:
        argv += ["--calibration", calibration]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)[0]["throughput_samples_s"]
    assert got == pytest.approx(images_per_s, abs=0.5)
