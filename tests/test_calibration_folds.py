"""Leave-one-source-out folds in worker processes equal the folds run one after another, and the
fit's per-run scatter widens with the size of a run's source (a random source effect)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.calibrate import fitting, measurements
from planner.calibrate.predict import RunTable


def test_parallel_folds_equal_sequential_folds():
    runs = measurements.load(measurements.shipped(("cnn.csv",))[0])
    keep = {"tf-benchmarks-2017-gce-k80", "nvidia-dle-rn50-tf-dgx1", "nvidia-dle-rn50-mxnet-dgx1"}
    table = RunTable([r for r in runs if r.source in keep], "modern")
    assert len(set(table.sources)) == 3
    one = fitting.leave_one_source_out(table, workers=1)
    two = fitting.leave_one_source_out(table, workers=2)
    assert np.all(np.isfinite(one))
    np.testing.assert_allclose(two, one, rtol=1e-12)


def test_run_sigma_is_sigma_plus_a_shared_source_error():
    sigma = fitting.run_sigma(["a", "b", "b", "c", "c", "c", "c"])
    s, t = fitting.SIGMA, fitting.TAU
    assert sigma[0] == pytest.approx(np.hypot(s, t))
    assert sigma[1] == sigma[2] == pytest.approx(np.sqrt(s**2 + 2 * t**2))
    # a source's total weight sum(1 / sigma^2) grows with its runs but stays below 1 / TAU^2
    weight = {k: float(np.sum(1 / sigma[np.array(list("abbcccc")) == k] ** 2)) for k in "abc"}
    assert weight["a"] < weight["b"] < weight["c"] < 1 / t**2
