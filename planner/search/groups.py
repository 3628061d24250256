"""Whole hardware groups scored exactly: the search's answer to a space too large to enumerate.

A plan's GPU type and count (its *group*) fix the price per second and most of the speed; the
other axes (tensor and pipeline degrees, microbatch, ZeRO, recomputation, scheme, ...) decide
whether it fits in memory and how fast it runs, through divisibility rules that a one- or
two-axis move cannot follow (changing the pipeline degree forces a new microbatch). A group
holds a few thousand to a few tens of thousands of valid plans: the evaluator scores one whole
in milliseconds, so within a group the search needs no guess.

Starting from the groups of the best plans found so far (by objective among feasible plans,
else by the smallest constraint violation, so that a deadline or memory limit no sampled plan
meets still steers the search), every plan of a group is scored; then the neighbours of the
best group (the next GPU counts of its type, its count on the other promising types) until the
best group stays or :data:`BUDGET` plans were scored.
"""

from __future__ import annotations

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search import valid
from planner.search.scored import INVALID, Scored, merge, ranked, score
from planner.search.stream import take

AXES = ("gpu", "gpus")  # a group: one GPU type and count
STARTS = 8  # groups scored first
TYPES = 3  # GPU types whose plans at the best group's count are tried
BUDGET = 160_000  # plans scored in whole groups per search (about 0.2 s of transformer plans)


def plans(space, core: valid.Core, key: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Every valid plan of group ``key`` (choice indices of :data:`AXES`), as index columns."""
    rows = np.ones(len(next(iter(core.cols.values()))), dtype=bool)
    fixed = {}
    for a, v in zip(AXES, key, strict=True):
        if a in core.cols:
            rows &= core.cols[a] == v
        else:
            fixed[a] = v
    idx = np.flatnonzero(rows)
    free = [a for a in core.free if a not in fixed]
    grids = np.meshgrid(idx, *[np.arange(len(space.choices(a))) for a in free], indexing="ij")
    flat = [g.ravel() for g in grids]
    out = {}
    for a in space.names:
        if a in core.cols:
            out[a] = core.cols[a][flat[0]].astype(np.int64)
        elif a in fixed:
            out[a] = np.full(flat[0].size, fixed[a], dtype=np.int64)
        elif a in free:
            out[a] = flat[1 + free.index(a)]
        else:
            out[a] = np.zeros(flat[0].size, dtype=np.int64)
    return out


def _group_ids(space, s: Scored) -> np.ndarray:
    """Each plan's group as one integer (GPU type x GPU counts + count)."""
    return s.cols["gpu"] * len(space.choices("gpus")) + s.cols["gpus"]


def leaders(space, s: Scored) -> np.ndarray:
    """The leading plan of each group among ``s``'s valid plans, best group first: groups by
    their best feasible plan, then groups with no feasible plan by their plan with the smallest
    worst relative constraint violation (how far it misses a deadline, memory, ...)."""
    feasible = ranked(s)
    worst = s.constraints.max(axis=0) if s.constraints.size else np.zeros(len(s))
    infeasible = np.flatnonzero((s.objectives[0] < INVALID) & ~s.feasible)
    order = np.concatenate([feasible, infeasible[np.argsort(worst[infeasible], kind="stable")]])
    _, first = np.unique(_group_ids(space, s)[order], return_index=True)
    return order[np.sort(first)]


def _key(s: Scored, j: int) -> tuple[int, int]:
    return int(s.cols["gpu"][j]), int(s.cols["gpus"][j])


JUMPS = (0.5, 0.75, 1.5, 2.0)  # GPU-count factors tried besides the next counts


def _neighbours(space, best: tuple[int, ...], order: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The best group's next GPU counts (two each way) and the counts nearest to
    :data:`JUMPS` times its count on its type, and its count and the next ones on the
    :data:`TYPES` most promising other types."""
    g, n = best
    counts = np.asarray(space.choices("gpus"), dtype=float)
    near = [int(np.argmin(np.abs(np.log(counts / (counts[n] * f))))) for f in JUMPS]
    out = [(g, m) for m in (n - 1, n + 1, n - 2, n + 2, *near) if 0 <= m < counts.size and m != n]
    types = []
    for t, _ in order:
        if t != g and t not in types:
            types.append(t)
    out += [(t, m) for t in types[:TYPES] for m in (n - 1, n, n + 1) if 0 <= m < counts.size]
    return list(dict.fromkeys(out))


def search(scorer: Scorer, objectives: tuple[str, ...], found: Scored, core: valid.Core) -> Scored:
    """Every plan of the promising groups (see the module docstring), merged with ``found``."""
    space = scorer.space
    if any(a not in space.names for a in AXES) or len(found) == 0:
        return found
    pool = [found]
    lead = take(found, leaders(space, found))  # one plan per group seen, best group first
    done: set[tuple[int, int]] = set()
    spent = 0
    todo = [_key(lead, j) for j in range(min(STARTS, len(lead)))]
    best = None
    while todo and spent < BUDGET:
        for key in todo:
            done.add(key)
            cols = plans(space, core, key)
            if len(cols[AXES[0]]):
                s = score(scorer, cols, objectives)
                pool.append(s)
                lead = merge([lead, take(s, leaders(space, s))])
                spent += len(s)
        lead = take(lead, leaders(space, lead))
        order = [_key(lead, j) for j in range(len(lead))]
        if order[0] == best:
            break
        best = order[0]
        todo = [k for k in _neighbours(space, best, order) if k not in done]
    return merge(pool)
