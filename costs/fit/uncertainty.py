"""How sure is a ranking? Monte Carlo over the efficiencies' uncertainty, vectorised.

Each draw scales every plan's compute time by a log-normal factor shared by all plans of its
(device, precision) group, and its communication time by a factor shared by all plans (the
links' efficiencies are fitted as one group per kind). Devices drift independently of each
other: that is what can reorder plans of different GPUs; plans of the same group move together,
so their order only changes through the compute/communication mix.

The objective of a plan must be its iteration time times a per-plan constant (time to train =
iterations x iteration time; cost = that x GPUs x price; energy likewise), so it is re-ranked
without re-running the evaluator. Feasibility is held at its nominal value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ranking:
    """Per-plan share of draws in which the plan is the best, and the draws' spread."""

    win: np.ndarray  # (P,) fraction of draws where the plan has the lowest objective
    draws: int


def win_probability(
    compute_s: np.ndarray,
    comm_s: np.ndarray,
    per_second: np.ndarray,
    group: np.ndarray,
    sd_compute: float,
    sd_comm: float,
    *,
    draws: int = 200,
    seed: int = 0,
    candidates: np.ndarray | None = None,
    floor_s: np.ndarray | None = None,
    tiebreak: np.ndarray | None = None,
    tie: float = 0.0,
    sd_floor: float = 0.0,
) -> Ranking:
    """Share of draws in which each plan minimises ``(compute x a_g + comm x b) x per_second``.

    ``compute_s``, ``comm_s``: nominal seconds per iteration (compute includes overheads);
    ``sd_compute`` may be one spread for every plan or one per plan (a group draws with the
    spread of its first plan: e.g. a wider one for a GPU generation the fit has not seen);
    ``per_second``: objective per second of iteration (e.g. iterations to train); ``group``:
    (P,) non-negative group index of each plan (device x precision); ``sd_*``: standard
    deviation of the log factors. ``candidates``: mask of plans that may win (feasible ones).
    ``floor_s``: a per-plan iteration time no draw goes below (e.g. the data loader's bound,
    which the GPU efficiencies do not move); ``sd_floor``: the log spread of a factor every
    draw scales all floors by (the loader's rate is one uncertain figure). ``tiebreak``, ``tie``: plans within ``tie``
    (relative) of a draw's best count as equal and the lowest ``tiebreak`` among them wins, the
    rule the optimizer ranks by. Work is O(draws x P) in numpy.
    """
    compute_s = np.asarray(compute_s, dtype=float)
    comm_s = np.asarray(comm_s, dtype=float)
    per_second = np.asarray(per_second, dtype=float)
    group = np.asarray(group, dtype=np.int64)
    n = compute_s.shape[0]
    ok = np.ones(n, bool) if candidates is None else np.asarray(candidates, bool)
    win = np.zeros(n)
    if not ok.any():
        return Ranking(win, draws)
    idx = np.flatnonzero(ok)
    g_local, g_inv = np.unique(group[idx], return_inverse=True)
    rng = np.random.default_rng(seed)
    sd_plan = np.broadcast_to(np.asarray(sd_compute, dtype=float), (n,))[idx]
    first = np.unique(g_inv, return_index=True)[1]  # each group's first plan
    a = np.exp(rng.normal(0.0, 1.0, (draws, g_local.size)) * sd_plan[first][None, :])  # (draws, groups)
    b = np.exp(rng.normal(0.0, sd_comm, (draws, 1)))
    e = np.exp(rng.normal(0.0, sd_floor, (draws, 1))) if sd_floor > 0 else np.ones((draws, 1))
    # chunk the draws so the (draws x plans) matrix stays small for big spaces
    chunk = max(1, int(4e6 // max(idx.size, 1)))
    counts = np.zeros(idx.size)
    c, m, w = compute_s[idx], comm_s[idx], per_second[idx]
    f = np.zeros(idx.size) if floor_s is None else np.asarray(floor_s, dtype=float)[idx]
    order = None
    if tiebreak is not None and tie > 0:  # rank in [0, 1): breaks ties inside one tie step
        order = np.argsort(np.argsort(np.asarray(tiebreak, dtype=float)[idx], kind="stable")) / idx.size
    for s in range(0, draws, chunk):
        it = c[None, :] * a[s : s + chunk][:, g_inv] + m[None, :] * b[s : s + chunk]
        obj = np.maximum(it, f[None, :] * e[s : s + chunk]) * w[None, :]
        if order is not None:
            # floored at the smallest positive float: an objective of 0 (a GPU owned at no
            # marginal price) ties with 0 and is a step below any positive value
            obj = np.maximum(obj, np.finfo(float).tiny)
            low = obj.min(axis=1, keepdims=True)
            obj = np.floor(np.log(obj / low) / np.log1p(tie)) + order[None, :]
        counts += np.bincount(np.argmin(obj, axis=1), minlength=idx.size)
    win[idx] = counts / draws
    return Ranking(win, draws)


def sd_from_interval(lo: float, hi: float, coverage: float = 0.8) -> float:
    """Log standard deviation of a normal whose central ``coverage`` interval is [lo, hi]
    (multipliers): sd = (ln hi - ln lo) / (2 z), z the normal quantile of (1 + coverage) / 2."""
    from statistics import NormalDist  # the standard library's: scipy.stats costs 0.5 s to import

    z = NormalDist().inv_cdf(0.5 + coverage / 2.0)
    return float((np.log(hi) - np.log(lo)) / (2.0 * z))
