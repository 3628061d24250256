"""The fitting core of costs.fit.calibration on models whose true parameters are known.

A roofline-shaped toy model, time = max(flops / (peak * e_c), bytes / (bw * e_m)) + k * t0,
generates "measurements" with known efficiencies and multiplicative noise; the fit must recover
them, leave a parameter the data never exercise at its prior, and report out-of-sample error.
"""

from __future__ import annotations

import numpy as np
import pytest

from costs.fit import calibration as cal

RNG = np.random.default_rng(7)
N = 120
FLOPS = 10 ** RNG.uniform(9, 12, N)
BYTES = 10 ** RNG.uniform(7, 10, N)
KERNELS = RNG.integers(50, 500, N).astype(float)
PEAK, BW = 100e12, 2e12
TRUE = np.array([0.55, 0.80, 6e-6, 0.3])  # e_c, e_m, t0, and a parameter no row uses
NAMES = ("compute", "memory", "kernel_s", "unused")


def model(theta, rows=slice(None)):
    e_c, e_m, t0, _ = theta
    t = np.maximum(FLOPS[rows] / (PEAK * e_c), BYTES[rows] / (BW * e_m)) + KERNELS[rows] * t0
    return 1.0 / t  # a throughput


def prior(value=(0.7, 0.7, 4e-6, 0.5)):
    value = np.array(value)
    return cal.Prior(NAMES, value, value / 10, np.minimum(value * 10, [1, 1, 1e-3, 1]), np.full(4, 0.5))


@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_fit_recovers_known_parameters(noise):
    measured = model(TRUE) * np.exp(RNG.normal(0, noise, N))
    f = cal.fit(model, measured, prior())
    np.testing.assert_allclose(f.value[:3], TRUE[:3], rtol=0.02 + 2 * noise)
    assert f.identified[:3].all()
    # the unused parameter stays at its prior and is reported as not identified
    assert f.value[3] == pytest.approx(0.5, rel=1e-6)
    assert not f.identified[3] and f.shrinkage[3] == pytest.approx(1.0, abs=1e-6)
    # in-sample error: the noise, plus under 0.5% from the prior's pull
    assert cal.summary(f.log_residuals)["median_ape"] <= 100 * noise * 1.5 + 0.5


def test_bounds_hold():
    measured = model(TRUE)
    p = prior()
    tight = cal.Prior(p.names, p.value, p.value * 0.9, p.value * 1.1, p.spread)
    f = cal.fit(model, measured, tight)
    assert np.all(f.value >= tight.lower * (1 - 1e-9)) and np.all(f.value <= tight.upper * (1 + 1e-9))
    # the compute efficiency wants 0.55 but may not go below 0.63
    assert f.value[0] == pytest.approx(0.63, rel=1e-3)


def test_leave_one_group_out_is_out_of_sample():
    measured = model(TRUE) * np.exp(RNG.normal(0, 0.05, N))
    groups = [f"src{i % 6}" for i in range(N)]
    held = cal.leave_one_group_out(lambda mask: lambda th: model(th, mask), measured, groups, prior())
    inside = cal.fit(model, measured, prior()).log_residuals
    assert np.isfinite(held.log_residuals).all()
    assert np.mean(held.log_residuals**2) >= np.mean(inside**2)
    assert cal.summary(held.log_residuals)["median_ape"] < 10.0


def test_summary_and_interval_by_hand():
    # pred/meas = 1.1, 0.8, 1.5, 1.0 -> APE 10, 20, 50, 0 %
    r = np.log([1.1, 0.8, 1.5, 1.0])
    s = cal.summary(r)
    assert s["median_ape"] == pytest.approx(15.0)
    assert s["p90_ape"] == pytest.approx(np.percentile([10, 20, 50, 0], 90))
    assert s["bias"] == pytest.approx((np.sqrt(1.1 * 1.0) - 1) * 100)
    lo, hi = cal.interval(np.log(np.linspace(0.5, 2.0, 1001)), coverage=0.8)
    # meas = pred * exp(-r); of 1,001 ratios pred/meas (0.5 + 0.0015 i) the split-conformal ranks
    # are the floor(1002 x 0.1) = 100th and ceil(1002 x 0.9) = 902nd smallest: 0.6485 and 1.8515
    assert lo == pytest.approx(1 / 1.8515, rel=1e-9) and hi == pytest.approx(1 / 0.6485, rel=1e-9)


@pytest.mark.parametrize("n", [9, 12, 28, 57])
def test_interval_covers_a_next_run_at_least_as_promised(n):
    """Split-conformal ranks: over exchangeable draws, a next residual falls inside the interval
    of the n before it with probability (k_hi - k_lo) / (n + 1) >= 80% (Lei et al. 2018, section
    2.2), where plain empirical quantiles of n runs fall short."""
    rng = np.random.default_rng(n)
    draws = rng.standard_t(4, size=(20_000, n + 1))
    inside = np.empty(len(draws), dtype=bool)
    for i, d in enumerate(draws):
        q_lo, q_hi = cal.tail_quantiles(d[:n], 0.8)
        inside[i] = q_lo <= d[n] <= q_hi
    exact = (np.ceil((n + 1) * 0.9 - 1e-9) - np.floor((n + 1) * 0.1 + 1e-9)) / (n + 1)
    assert exact >= 0.8 and inside.mean() == pytest.approx(exact, abs=0.012)


def test_tail_quantiles_by_hand():
    v = np.arange(1.0, 29.0)[::-1]  # 28 held-out residuals, in any order
    assert cal.tail_quantiles(v, 0.8) == (2.0, 27.0)  # floor(29 x 0.1) = 2, ceil(29 x 0.9) = 27
    assert cal.tail_quantiles(np.arange(1.0, 6.0), 0.8) == (1.0, 5.0)  # too few runs: the extremes
    assert cal.tail_quantiles(np.array([np.nan, 3.0]), 0.8) == (3.0, 3.0)
    assert all(np.isnan(cal.tail_quantiles(np.array([np.nan]), 0.8)))


def test_interval_covers_held_out_rows():
    measured = model(TRUE) * np.exp(RNG.normal(0, 0.1, N))
    groups = [f"s{i % 10}" for i in range(N)]
    held = cal.leave_one_group_out(lambda m: lambda th: model(th, m), measured, groups, prior())
    lo, hi = cal.interval(held.log_residuals, 0.8)
    pred = measured * np.exp(held.log_residuals)
    inside = (measured >= pred * lo) & (measured <= pred * hi)
    assert 0.75 <= inside.mean() <= 0.85


def test_prior_validation():
    with pytest.raises(ValueError, match="lower <= value <= upper"):
        cal.Prior(("a",), np.array([2.0]), np.array([0.1]), np.array([1.0]), np.array([0.5]))
    with pytest.raises(ValueError, match="positive and finite"):
        cal.fit(model, np.array([]), prior())
