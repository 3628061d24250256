"""Prediction intervals per net family: a transformer plan's range comes from the transformer
runs' held-out error, a CNN plan's from the CNN runs'."""

from __future__ import annotations

import numpy as np
import pytest

from costs.fit import calibration as cal
from planner.calibrate import fitting, measurements
from planner.calibrate.predict import RunTable
from planner.calibrate.profile import Profile
from planner.metrics.model import CostModel


def test_family_error_splits_residuals_by_family():
    runs = [r for r in measurements.load(measurements.shipped(("llm.csv",))[0])][:6]
    runs += [r for r in measurements.load(measurements.shipped(("cnn.csv",))[0])][:10]
    table = RunTable(runs, "modern")
    residuals = np.log(np.r_[np.full(6, 1.5), np.linspace(0.9, 1.1, 10)])  # pred / meas
    out = fitting._family_error(table, residuals)
    assert (out["runs_transformer"], out["runs_cnn"]) == (6, 10)
    assert out["median_ape_transformer"] == pytest.approx(50.0)
    # measured = predicted x [lo, hi]: a model 1.5x too fast gives 1/1.5 at both ends
    assert out["interval_transformer"] == pytest.approx([1 / 1.5, 1 / 1.5], abs=1e-4)
    lo, hi = cal.interval(residuals[6:], fitting.COVERAGE)
    assert out["interval_cnn"] == pytest.approx([round(lo, 4), round(hi, 4)])


def test_cost_model_takes_its_familys_interval():
    meta = {"interval": [0.8, 1.2], "interval_transformer": [0.6, 1.1], "interval_cnn": [0.9, 1.1]}
    # a profile given with --calibration keeps its family intervals (without one, for_net takes
    # the stack's profile: tests/test_stacks.py)
    model = CostModel("modern", calibration="mine.toml", profile=Profile({}, {}, meta))
    assert model.interval == (0.8, 1.2)
    assert model.for_net({"model": {"d_model": 1}}).interval == (0.6, 1.1)
    assert model.for_net({"name": "alexnet"}).interval == (0.9, 1.1)
    older = CostModel("modern", calibration="old.toml", profile=Profile({}, {}, {"interval": [0.8, 1.2]}))
    assert older.for_net({"model": {}}).interval == (0.8, 1.2)
