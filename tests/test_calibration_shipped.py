"""The shipped calibration: the default profile is the fit of the shipped measurements, and its
error on runs it did not see meets issue targets (leave-one-source-out median <= 15%, p90 <= 40%;
fitted on half the sources, validated on the other half: median <= 20%).

These refit the modern model (tens of seconds): marked slow, run in CI.
"""

from __future__ import annotations

import numpy as np
import pytest

from costs.fit import calibration as cal
from planner.calibrate import fitting, measurements
from planner.calibrate.predict import RunTable
from planner.metrics.model import default_profile

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs():
    """The runs the default profile was fitted on: the first ``runs_cnn`` rows of cnn.csv and the
    first ``runs_transformer`` rows of llm.csv (its meta); rows appended to those files since (the
    Ada Lovelace MLPerf rows of cnn.csv) join at the next refit."""
    meta = default_profile().meta
    first = {"cnn.csv": meta["runs_cnn"], "llm.csv": meta["runs_transformer"]}
    fitted = [
        r for f in measurements.shipped(measurements.FITTED) for r in measurements.load(f)[: first[f.name]]
    ]
    assert len(fitted) == meta["runs"]
    return fitted


def test_measurement_set_spans_what_the_issue_asks(runs):
    from planner import catalog

    generations = {catalog.device(r.device).raw.get("generation") for r in runs}
    assert len(runs) >= 60 and len(generations) >= 4
    assert {"fp32"} < {r.precision for r in runs}  # fp32 and mixed precision
    assert min(r.gpus for r in runs) == 1 and max(r.gpus for r in runs) >= 64


def test_default_profile_is_the_fit_of_the_shipped_runs(runs):
    c = fitting.calibrate(runs, ["configs/measurements/cnn.csv"], loso=False)
    shipped = default_profile()
    assert set(c.profile.scales) == set(shipped.scales)
    for k, v in c.profile.scales.items():
        assert v == pytest.approx(shipped.scales[k], rel=2e-3, abs=1e-4), k
    for k, v in c.profile.overheads_us.items():
        assert v == pytest.approx(shipped.overheads_us[k], rel=2e-3), k


# Three folds of different families and GPU generations, refitted here; the profile records every
# source's held-out median error, and the full leave-one-source-out run (`planner calibrate`, or
# benchmarks/bench_calibration.py) takes about 15 minutes on two cores.
CHECKED_FOLDS = ("megatron-core-readme-2024-h100", "nvidia-dle-rn50-tf-dgx1", "llm-foundry-mpt-a100-80gb")


def test_leave_one_source_out_error(runs):
    meta = default_profile().meta
    assert meta["error_kind"] == "leave-one-source-out"
    assert meta["median_ape"] <= 15.0 and meta["p90_ape"] <= 40.0, meta
    by_source = dict(zip(meta["held_out_sources"], meta["held_out_median_ape"], strict=True))
    assert set(by_source) == {r.source for r in runs}
    table = RunTable(runs, "modern")
    labels = np.array(table.sources, dtype=object)
    for source in CHECKED_FOLDS:
        test = labels == source
        pred = fitting._fit_and_predict(table, ~test, test)
        got = cal.summary(np.log(pred / table.measured[test]))["median_ape"]
        assert got == pytest.approx(by_source[source], abs=0.01), source


def test_half_the_sources_predict_the_other_half(runs):
    """Two-fold by source (alternate sources in name order): each half fitted, the other half
    predicted. Measured 2026-11: 20.3% and 14.1% median; pooled over both, under 20%."""
    sources = sorted({r.source for r in runs})
    first = set(sources[::2])
    table = RunTable(runs, "modern")
    train = np.array([r.source in first for r in runs])
    pooled = np.empty(len(runs))
    for fit_on in (train, ~train):
        c = fitting.calibrate([r for r, k in zip(runs, fit_on) if k], ["half"], loso=False)
        test = table.subset(~fit_on)
        pooled[~fit_on] = np.log(fitting.predict(test, c.profile) / test.measured)
        assert cal.summary(pooled[~fit_on])["median_ape"] <= 25.0
    assert cal.summary(pooled)["median_ape"] <= 20.0
