"""Scored plans: index columns with objective and constraint values, and the optima of them.

* :func:`score` scores index columns in one evaluator call; invalid combinations are
  infeasible with a huge objective value.
* :func:`exhaustive` scores the whole space at once (the certificate of a search).
* :func:`best_index`, :func:`pareto_mask` and :func:`front_indices` pick the optimum or the
  non-dominated plans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.metrics.scorer import Scorer

INVALID = 1e30  # objective value told for an invalid combination (also marked infeasible)


@dataclass
class Scored:
    """Index columns of some plans with their objective and constraint values."""

    cols: dict[str, np.ndarray]
    objectives: np.ndarray  # (n_obj, n)
    constraints: np.ndarray  # (n_con, n)

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
    if valid.any():
        sub = {a: c[valid] for a, c in cols.items()}
        m = scorer.metrics(sub)
        obj[:, valid] = np.nan_to_num(scorer.objective_values(m, objectives), nan=INVALID, posinf=INVALID)
        con[:, valid] = scorer.limits.values(m)
    return Scored(cols, obj, con)


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
    )


def best_index(s: Scored) -> int | None:
    """Index of the feasible plan with the lowest first objective (None if none is feasible)."""
    ok = np.flatnonzero(s.feasible)
    if ok.size == 0:
        return None
    return int(ok[np.argmin(s.objectives[0, ok])])


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Non-dominated columns of ``values`` (n_obj, n), minimising every row."""
    n = values.shape[1]
    order = np.lexsort(values[::-1])
    keep = np.zeros(n, dtype=bool)
    front: list[np.ndarray] = []
    for i in order:
        v = values[:, i]
        if any((f <= v).all() and (f < v).any() for f in front) or any((f == v).all() for f in front):
            continue
        front.append(v)
        keep[i] = True
    return keep


def front_indices(s: Scored) -> np.ndarray:
    """Feasible non-dominated plans of ``s``, sorted by the first objective."""
    feas = np.flatnonzero(s.feasible)
    keep = feas[pareto_mask(s.objectives[:, feas])] if feas.size else feas
    return keep[np.argsort(s.objectives[0, keep], kind="stable")]
