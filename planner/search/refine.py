"""Vectorised local refinement of a search's result.

It tries every plan that differs from the best one (one objective) or from each Pareto plan
(several) in one or two axes, in one evaluator call per round, until nothing improves. The
neighbourhood is built over the space's declared axes, whatever they are.
"""

from __future__ import annotations

import itertools

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search.scored import Scored, best_index, merge, pareto_mask, score


def neighbours(space, centre: dict[str, int]) -> dict[str, np.ndarray]:
    """Every plan differing from ``centre`` in one or two axes, as index columns."""
    names = space.names
    blocks = []
    for a, b in itertools.combinations(names, 2):
        na, nb = len(space.choices(a)), len(space.choices(b))
        ia, ib = np.meshgrid(np.arange(na), np.arange(nb), indexing="ij")
        cols = {x: np.full(na * nb, centre[x]) for x in names}
        cols[a], cols[b] = ia.ravel(), ib.ravel()
        blocks.append(cols)
    return {x: np.concatenate([blk[x] for blk in blocks]) for x in names}


def _front_keys(s: Scored) -> tuple[np.ndarray, set]:
    feas = np.flatnonzero(s.feasible)
    if feas.size == 0:
        return feas, set()
    keep = feas[pareto_mask(s.objectives[:, feas])]
    return keep, {s.key(j) for j in keep}


def refine_front(scorer: Scorer, objectives, found: Scored, stats, max_rounds: int = 10) -> Scored:
    """Several objectives: try the one- and two-axis neighbours of every Pareto plan, keep the
    new non-dominated ones, and repeat until the front stops changing."""
    names = scorer.space.names
    pool = [found]
    keep, front = _front_keys(found)
    tried: set = set()
    for _ in range(max_rounds):
        merged = merge(pool)
        todo = [j for j in keep if merged.key(j) not in tried]
        if not todo:
            break
        tried.update(merged.key(j) for j in todo)
        blocks = [neighbours(scorer.space, dict(zip(names, merged.key(j), strict=True))) for j in todo]
        cols = {a: np.concatenate([b[a] for b in blocks]) for a in names}
        pool.append(score(scorer, cols, objectives))
        stats.refinement_rounds += 1
        keep, new_front = _front_keys(merge(pool))
        if new_front == front:
            break
        front = new_front
    return merge(pool)


def refine(scorer: Scorer, objectives, found: Scored, stats, max_rounds: int = 20) -> Scored:
    """Coordinate descent over pairs of axes from the best feasible plan (see module doc)."""
    i = best_index(found)
    if i is None:
        return found
    names = scorer.space.names
    pool = [found]
    best_val = found.objectives[0, i]
    centre = dict(zip(names, found.key(i), strict=True))
    for _ in range(max_rounds):
        nb = score(scorer, neighbours(scorer.space, centre), objectives)
        pool.append(nb)
        stats.refinement_rounds += 1
        j = best_index(nb)
        if j is None or nb.objectives[0, j] >= best_val * (1 - 1e-12):
            break
        best_val = nb.objectives[0, j]
        centre = dict(zip(names, nb.key(j), strict=True))
    return merge(pool)
