"""Scored plans: index columns with objective and constraint values, and the optima of them.

* :func:`score` scores index columns in one evaluator call; invalid combinations are
  infeasible with a huge objective value.
* :func:`exhaustive` scores the whole space at once (a reference: the certificate streams it,
  :mod:`planner.search.stream`).
* :func:`best_index`, :func:`pareto_mask` and :func:`front_indices` pick the optimum or the
  non-dominated plans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.metrics.scorer import Scorer

INVALID = 1e30  # objective value told for an invalid combination (also marked infeasible)
# Plans whose objective is within this fraction (0.5%, far inside the model's error) of the best
# are equally good: the cheaper (for
# time) or faster (for cost) one wins. Input-bound plans, for one, all take the same time.
TIE = 5e-3
_SECOND = {
    "time": "cost_usd",
    "throughput": "cost_usd",
    "cost": "time_to_train_s",
    "memory": "time_to_train_s",
    "energy": "time_to_train_s",
}


@dataclass
class Scored:
    """Index columns of some plans with their objective and constraint values."""

    cols: dict[str, np.ndarray]
    objectives: np.ndarray  # (n_obj, n)
    constraints: np.ndarray  # (n_con, n)
    tiebreak: np.ndarray | None = None  # (k, n) further keys among equally good plans (lower wins)

    @property
    def feasible(self) -> np.ndarray:
        return (self.constraints <= 0).all(axis=0)

    def __len__(self) -> int:
        return self.objectives.shape[1]

    def key(self, j: int) -> tuple[int, ...]:
        """Plan ``j`` as a tuple of choice indices, in axis order."""
        return tuple(int(c[j]) for c in self.cols.values())


def score(scorer: Scorer, cols: dict[str, np.ndarray], objectives: tuple[str, ...]) -> Scored:
    """Objective and constraint values of index columns; invalid combinations are infeasible."""
    valid = scorer.space.valid(cols)
    n = len(valid)
    obj = np.full((len(objectives), n), INVALID)
    con = np.ones((len(scorer.limits.names()), n))
    second = np.full((3, n), np.inf)
    if valid.any():
        sub = {a: c[valid] for a, c in cols.items()}
        m = scorer.metrics(sub)
        obj[:, valid] = np.nan_to_num(scorer.objective_values(m, objectives), nan=INVALID, posinf=INVALID)
        con[:, valid] = scorer.limits.values(m)
        if len(objectives) == 1:  # then the cheaper (or faster), the fewer nodes, the less comm-bound
            second[0, valid] = np.nan_to_num(m[_SECOND[objectives[0]]], nan=np.inf)
            second[1, valid] = m["nodes"]
            second[2, valid] = m["comm_s"] / m["iteration_s"]
    return Scored(cols, obj, con, second)


def exhaustive(scorer: Scorer, objectives: tuple[str, ...]) -> Scored:
    """Every valid plan of the space, scored in one call."""
    return score(scorer, scorer.space.grid(), objectives)


def merge(pool: list[Scored]) -> Scored:
    """One :class:`Scored` of several (same axes)."""
    names = list(pool[0].cols)
    return Scored(
        {a: np.concatenate([p.cols[a] for p in pool]) for a in names},
        np.concatenate([p.objectives for p in pool], axis=1),
        np.concatenate([p.constraints for p in pool], axis=1),
        None if any(p.tiebreak is None for p in pool) else np.concatenate([p.tiebreak for p in pool], axis=1),
    )


def _steps(values: np.ndarray) -> np.ndarray:
    """Values in steps of :data:`TIE` relative to the smallest (equal within a step)."""
    finite = values[np.isfinite(values)]
    low = finite.min() if finite.size else 0.0
    if low > 0:
        return np.floor(np.log(np.maximum(values, low) / low) / np.log1p(TIE))
    # zero or negative objectives (throughput is maximised as -throughput): absolute steps
    return np.floor((values - low) / (abs(low) * TIE or 1.0))


def ranked(s: Scored) -> np.ndarray:
    """Feasible plans, best first: by first objective in steps of :data:`TIE` (relative); within
    a step by each ``tiebreak`` row in turn, all but the last also in steps (e.g. the cheaper of
    two equally fast plans, then the one on fewer nodes, then the less communication-bound)."""
    ok = np.flatnonzero(s.feasible)
    if ok.size == 0 or s.tiebreak is None:
        return ok[np.argsort(s.objectives[0, ok], kind="stable")]
    keys = [s.objectives[0, ok]]  # last resort: the exact objective
    keys.append(s.tiebreak[-1, ok])
    keys += [_steps(row[ok]) for row in s.tiebreak[-2::-1]]
    keys.append(_steps(s.objectives[0, ok]))
    return ok[np.lexsort(keys)]


def best_index(s: Scored) -> int | None:
    """Index of the feasible plan ranked first by :func:`ranked` (None if none is feasible)."""
    order = ranked(s)
    return int(order[0]) if order.size else None


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Non-dominated columns of ``values`` (n_obj, n), minimising every row; of equal columns
    the first. In lexicographic order the first plan left is non-dominated: keep it, drop every
    plan it dominates or equals, repeat (one vectorised step per front plan)."""
    n = values.shape[1]
    order = np.lexsort(values[::-1])
    v = values[:, order]
    keep = np.zeros(n, dtype=bool)
    left = np.arange(n)
    while left.size:
        i = left[0]
        keep[order[i]] = True
        left = left[~(v[:, left] >= v[:, i : i + 1]).all(axis=0)]
    return keep


def front_indices(s: Scored) -> np.ndarray:
    """Feasible non-dominated plans of ``s``, sorted by the first objective."""
    feas = np.flatnonzero(s.feasible)
    keep = feas[pareto_mask(s.objectives[:, feas])] if feas.size else feas
    return keep[np.argsort(s.objectives[0, keep], kind="stable")]
