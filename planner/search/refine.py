"""Vectorised local refinement of a search's result.

It tries every plan that differs from the best one (one objective) or from each Pareto plan
(several) in one or two axes, in one evaluator call per round, until nothing improves. The
neighbourhood is built over the space's declared axes, whatever they are.
"""

from __future__ import annotations

import itertools

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search.scored import INVALID, Scored, best_index, merge, pareto_mask, score


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


STARTS = 4  # descents from the best plan and from the next best that differ from it in 3+ axes


def _starts(found: Scored, k: int = STARTS) -> list[int]:
    """The best feasible plan, then the next best plans that differ from every start so far in
    at least three axes (a 2-axis descent cannot walk from one to the other)."""
    feas = np.flatnonzero(found.feasible)
    order = feas[np.argsort(found.objectives[0, feas], kind="stable")]
    keys = np.vstack(list(found.cols.values()))
    picked: list[int] = []
    for j in order:
        if all(int((keys[:, j] != keys[:, i]).sum()) >= 3 for i in picked):
            picked.append(int(j))
            if len(picked) == k:
                break
    return picked


def refine(scorer: Scorer, objectives, found: Scored, stats, max_rounds: int = 20) -> Scored:
    """Coordinate descent over pairs of axes from the best feasible plan and from a few diverse
    runners-up (see module doc)."""
    if best_index(found) is None:
        found = repair(scorer, objectives, found, stats, max_rounds)
        if best_index(found) is None:
            return found
    pool = [found]
    for i in _starts(found):
        pool.append(_descend(scorer, objectives, found, i, stats, max_rounds))
    return merge(pool)


def _descend(scorer: Scorer, objectives, found: Scored, i: int, stats, max_rounds: int) -> Scored:
    """One coordinate descent from plan ``i`` of ``found``: every plan it scored."""
    names = scorer.space.names
    pool = []
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


def violation(s: Scored) -> np.ndarray:
    """Each plan's summed constraint violation (0 when feasible; invalid combinations +inf)."""
    v = np.clip(s.constraints, 0.0, None).sum(axis=0)
    return np.where(s.objectives[0] >= INVALID, np.inf, v)


def repair(scorer: Scorer, objectives, found: Scored, stats, max_rounds: int = 20) -> Scored:
    """No feasible plan found: coordinate descent on the summed constraint violation from the
    least-violating plans (Deb's feasibility rule: of two infeasible plans the one that violates
    less is better; Deb 2000, doi:10.1016/S0045-7825(99)00389-8), until a step finds a feasible
    plan or stops improving. A tight deadline leaves few feasible plans for a sampler to hit."""
    names = scorer.space.names
    pool = [found]
    v = violation(found)
    for i in np.argsort(v, kind="stable")[:STARTS]:
        if not np.isfinite(v[i]):
            break
        best, centre = v[i], dict(zip(names, found.key(int(i)), strict=True))
        for _ in range(max_rounds):
            nb = score(scorer, neighbours(scorer.space, centre), objectives)
            pool.append(nb)
            stats.refinement_rounds += 1
            if nb.feasible.any():
                return merge(pool)
            w = violation(nb)
            j = int(np.argmin(w))
            if w[j] >= best * (1 - 1e-12):
                break
            best, centre = w[j], dict(zip(names, nb.key(j), strict=True))
    return merge(pool)
