"""Fit efficiency parameters to measured runs, and the error bands that follow from the fit.

The fit is bounded least squares on log error (ratios, not differences: a 2x miss counts the
same at 10 and at 10,000 samples/s), regularised toward prior values:

    minimise  sum_i ((log pred_i(theta) - log meas_i) / sigma)^2 + sum_j ((log theta_j - log prior_j) / s_j)^2

over log theta within bounds (``scipy.optimize.least_squares``, trust-region reflective). The
prior term keeps parameters the data cannot see at their cited defaults; ``s_j`` (the prior's
spread in log units) against ``sigma`` (the expected scatter of one measurement about the
model, in log units) says how far the data may pull them.

Honest error needs data the fit did not see: :func:`leave_one_group_out` refits without each
source in turn and predicts it, and :func:`interval` turns those out-of-sample residuals into
a prediction interval. Nothing here knows what the parameters mean: the model is a callable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Predict = Callable[[np.ndarray], np.ndarray]  # parameters (P,) -> predictions (N,), positive


@dataclass(frozen=True)
class Prior:
    """Named parameters with prior values, bounds and prior spreads (log units)."""

    names: tuple[str, ...]
    value: np.ndarray  # (P,) prior values, > 0
    lower: np.ndarray  # (P,) bounds, 0 < lower <= value <= upper
    upper: np.ndarray
    spread: np.ndarray  # (P,) prior standard deviation of log(theta)

    def __post_init__(self) -> None:
        n = len(self.names)
        for field in ("value", "lower", "upper", "spread"):
            if np.shape(getattr(self, field)) != (n,):
                raise ValueError(f"Prior.{field} must have one entry per name ({n})")
        if not (
            np.all(self.lower > 0) and np.all(self.lower <= self.value) and np.all(self.value <= self.upper)
        ):
            raise ValueError("Prior needs 0 < lower <= value <= upper for every parameter")
        if not np.all(self.spread > 0):
            raise ValueError("Prior.spread must be positive")


@dataclass(frozen=True)
class Fit:
    """A fitted parameter vector and what the data could say about each parameter."""

    names: tuple[str, ...]
    value: np.ndarray  # (P,) fitted parameters
    prior: np.ndarray  # (P,) prior values
    log_residuals: np.ndarray  # (N,) log(pred / meas) in sample
    identified: np.ndarray  # (P,) bool: the data narrowed the parameter well beyond its prior
    shrinkage: np.ndarray  # (P,) posterior / prior spread of log(theta), 1 = data said nothing
    cost: float

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, map(float, self.value)))


def fit(
    predict: Predict,
    measured: np.ndarray,
    prior: Prior,
    *,
    sigma: float | np.ndarray = 0.15,
    identified_below: float = 0.5,
    starts: Sequence[np.ndarray] = (),
) -> Fit:
    """Fit ``predict`` to ``measured`` (N,) under ``prior``; see the module docstring.

    ``sigma``: expected log scatter of one measurement about the model (0.15 ~ 15%), one value
    or one per measurement (N,).
    ``starts``: extra starting points (parameter vectors) besides the prior; the best fit wins.
    A model with max() terms (roofline, launch-bound) has kinks where a parameter has no
    gradient until it binds, so one start can stall on the wrong side of a kink.
    """
    measured = np.asarray(measured, dtype=float)
    if measured.size == 0 or np.any(~np.isfinite(measured)) or np.any(measured <= 0):
        raise ValueError("fit() needs at least one measurement, all positive and finite")
    log_meas = np.log(measured)
    log_prior = np.log(prior.value)
    sigma = np.broadcast_to(np.asarray(sigma, dtype=float), measured.shape)

    def residuals(z: np.ndarray) -> np.ndarray:
        pred = np.asarray(predict(np.exp(z)), dtype=float)
        data = np.log(np.maximum(pred, 1e-300)) - log_meas
        return np.concatenate([data / sigma, (z - log_prior) / prior.spread])

    lo, hi = np.log(prior.lower), np.log(prior.upper)
    best = None
    for start in (prior.value, *starts):
        z, cost = _solve(residuals, np.log(np.asarray(start, dtype=float)), lo, hi)
        if best is None or cost < best[1]:
            best = (z, cost)
    z, cost = best
    shrink = _shrinkage(residuals, z, prior.spread, len(measured))
    return Fit(
        names=prior.names,
        value=np.exp(z),
        prior=prior.value.copy(),
        log_residuals=residuals(z)[: len(measured)] * sigma,
        identified=shrink < identified_below,
        shrinkage=shrink,
        cost=cost,
    )


def _solve(residuals, z_start: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, float]:
    """One bounded least-squares solve in log space from ``z_start``; (z, cost)."""
    # start strictly inside the bounds (least_squares requires it)
    z0 = np.clip(z_start, lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo))
    free = lo != hi
    if not free.any():
        return z0, 0.5 * float(np.sum(residuals(z0) ** 2))

    def free_residuals(zf: np.ndarray) -> np.ndarray:
        full = z0.copy()
        full[free] = zf
        return residuals(full)

    from scipy.optimize import least_squares  # here, not at import: 0.4 s that estimate never needs

    sol = least_squares(free_residuals, z0[free], bounds=(lo[free], hi[free]), method="trf", x_scale=1.0)
    z = z0.copy()
    z[free] = sol.x
    return z, float(sol.cost)


def _shrinkage(residuals, z: np.ndarray, spread: np.ndarray, n_data: int) -> np.ndarray:
    """Posterior over prior standard deviation of each log parameter (Gauss-Newton, at z).

    The data's Jacobian J (N x P) and the prior's precision give the posterior covariance
    (J'J + diag(1/s^2))^-1; its diagonal square root over s is 1 when the data carry no
    information on a parameter and near 0 when they pin it down.
    """
    eps = 1e-5
    base = residuals(z)[:n_data]
    jac = np.empty((n_data, z.size))
    for j in range(z.size):  # P is small (tens): a loop over parameters, not over plans
        dz = z.copy()
        dz[j] += eps
        jac[:, j] = (residuals(dz)[:n_data] - base) / eps
    precision = jac.T @ jac + np.diag(1.0 / spread**2)
    cov = np.linalg.pinv(precision)
    return np.sqrt(np.clip(np.diag(cov), 0.0, None)) / spread


@dataclass(frozen=True)
class HeldOut:
    """Out-of-sample log residuals: each group predicted by a fit made without it."""

    groups: tuple[str, ...]  # the group of each measurement
    log_residuals: np.ndarray  # (N,) log(pred / meas), each from a fit that excluded its group


def held_out(
    fit_and_predict: Callable[[np.ndarray, np.ndarray], np.ndarray],
    measured: np.ndarray,
    groups: Sequence[str],
) -> np.ndarray:
    """(N,) log(pred / meas), each group predicted by a fit made without it.

    ``fit_and_predict(train, test)`` fits on the measurements where ``train`` is true and
    returns predictions for those where ``test`` is true. A group that is all the data stays
    NaN: nothing is left to fit on.
    """
    measured = np.asarray(measured, dtype=float)
    labels = np.array(tuple(groups), dtype=object)
    out = np.full(measured.shape, np.nan)
    for g in dict.fromkeys(labels.tolist()):
        test = labels == g
        if test.all():
            continue
        pred = np.asarray(fit_and_predict(~test, test), dtype=float)
        out[test] = np.log(pred) - np.log(measured[test])
    return out


def leave_one_group_out(
    make_predict: Callable[[np.ndarray], Predict],
    measured: np.ndarray,
    groups: Sequence[str],
    prior: Prior,
    sigma: float = 0.15,
) -> HeldOut:
    """Refit without each group (source) under one ``prior`` and predict it (:func:`held_out`).

    ``make_predict(mask)`` returns the model restricted to the measurements where ``mask``
    is true (so a model can precompute per-row work once).
    """
    measured = np.asarray(measured, dtype=float)

    def fit_and_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        theta = fit(make_predict(train), measured[train], prior, sigma=sigma).value
        return make_predict(test)(theta)

    return HeldOut(tuple(groups), held_out(fit_and_predict, measured, groups))


def ape(log_residuals: np.ndarray) -> np.ndarray:
    """Absolute percentage error |pred - meas| / meas, from log(pred / meas)."""
    return np.abs(np.expm1(np.asarray(log_residuals, dtype=float))) * 100.0


def summary(log_residuals: np.ndarray) -> dict[str, float]:
    """Median and p90 absolute percentage error, and the bias (median pred / meas - 1), in %."""
    r = np.asarray(log_residuals, dtype=float)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return {"n": 0, "median_ape": float("nan"), "p90_ape": float("nan"), "bias": float("nan")}
    e = ape(r)
    return {
        "n": int(r.size),
        "median_ape": float(np.median(e)),
        "p90_ape": float(np.percentile(e, 90)),
        "bias": float(np.expm1(np.median(r)) * 100.0),
    }


def tail_quantiles(values: np.ndarray, coverage: float = 0.8) -> tuple[float, float]:
    """The (lower, upper) order statistics of ``values`` that a next value from the same
    population falls between with probability at least ``coverage`` (split conformal
    prediction, equal tails): the k_lo-th and k_hi-th smallest of n, k_lo = floor((n + 1) t),
    k_hi = ceil((n + 1) (1 - t)), t = (1 - coverage) / 2 (Lei, G'Sell, Rinaldo, Tibshirani,
    Wasserman, "Distribution-Free Predictive Inference for Regression", JASA 2018,
    arXiv:1604.04173, section 2.2, one rank per tail). Plain empirical quantiles of n held-out
    residuals cover less than ``coverage`` of the next run, the more so the fewer runs there
    are; these ranks do not. Below n = 1 / t - 1 runs a rank leaves the sample and the
    extreme value is taken: such an interval still falls short, and its run count says so.
    NaN values are dropped; (nan, nan) when none is left."""
    v = np.sort(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    n = v.size
    if n == 0:
        return (float("nan"), float("nan"))
    tail = (1.0 - coverage) / 2.0
    k_lo = int(np.floor((n + 1) * tail + 1e-9))
    k_hi = int(np.ceil((n + 1) * (1.0 - tail) - 1e-9))
    return float(v[min(max(k_lo, 1), n) - 1]), float(v[min(max(k_hi, 1), n) - 1])


def interval(log_residuals: np.ndarray, coverage: float = 0.8) -> tuple[float, float]:
    """Multipliers (lo, hi) of a prediction such that the measured value of a next run lies in
    [pred * lo, pred * hi] with probability ``coverage``, from held-out residuals
    r = log(pred / meas) (:func:`tail_quantiles`). With meas = pred * exp(-r) the interval is
    exp(-q_hi), exp(-q_lo)."""
    q_lo, q_hi = tail_quantiles(log_residuals, coverage)
    return float(np.exp(-q_hi)), float(np.exp(-q_lo))
