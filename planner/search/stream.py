"""Exhaustive enumeration in chunks: memory bounded by the chunk, not by the space.

The combinations of the space are numbered in the row-major order of the axes
(:meth:`planner.space.space.Space.decode`), decoded and scored a chunk at a time (one evaluator
call each), and reduced as they go to what the Result needs (:class:`Keep`):

* one objective: every feasible plan that can still rank first, be the best of one of the first
  ``groups + 1`` groups of the ranking (the alternatives), or be within ``within`` of the best
  (the confidence Monte Carlo); plus, per stepped tie-break key, one plan with its lowest value
  (:func:`planner.search.scored.ranked` counts its steps from there). :func:`ranked` orders
  these plans exactly as it orders them among the whole space.
* several objectives: the running non-dominated set (each chunk's plans merged into it).
* counts: combinations, valid plans, feasible plans.

Kept plans stay in enumeration order, so stable sorts break exact ties as over the whole space.
Without a :class:`Keep`, every valid plan is kept (a report that lists them all).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search import valid
from planner.search.scored import TIE, Scored, merge, pareto_mask, score

# Scoring a plan takes about 0.5 kB at its peak for a CNN and 1-7 kB for a transformer (its
# per-layer columns, traced with tracemalloc): chunks are sized from a measured probe so
# that the scoring of one peaks near CHUNK_BYTES, whatever the net (smaller chunks were no
# slower: 0.1-0.3 M plans per chunk score as fast as 2 M).
CHUNK_BYTES = 128 * 2**20
PROBE = 4096  # combinations scored to measure the bytes per plan
MIN_CHUNK, MAX_CHUNK = 4096, 1 << 20
CHUNK: int | None = None  # a fixed chunk size instead (tests)


@dataclass(frozen=True)
class Keep:
    """What the Result reads of an enumerated space with one objective."""

    group: tuple[str, ...] = ()  # axes whose choices make one group of alternatives
    groups: int = 0  # alternatives: the best plans of this many further groups
    within: float = 1.0  # and every plan within this factor of the best (1: none)


@dataclass
class Enumerated:
    """Counts of an enumeration, and whether every valid plan was kept."""

    combinations: int
    valid: int = 0
    feasible: int = 0
    kept_all: bool = False


def take(s: Scored, idx: np.ndarray) -> Scored:
    """Plans ``idx`` of ``s``."""
    return Scored(
        {a: c[idx] for a, c in s.cols.items()},
        s.objectives[:, idx],
        s.constraints[:, idx],
        None if s.tiebreak is None else s.tiebreak[:, idx],
    )


def chunk_size(scorer: Scorer, objectives) -> int:
    """Combinations per chunk: :data:`CHUNK_BYTES` over the peak bytes per plan of scoring a
    probe of the space (numpy's allocations, as tracemalloc traces them)."""
    if CHUNK is not None:
        return CHUNK
    if scorer.space.raw_size <= MIN_CHUNK:
        return MIN_CHUNK
    flat, cols = next(valid.chunks(scorer.space, PROBE), (np.zeros(0), {}))
    if flat.size == 0:
        return MIN_CHUNK
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    score(scorer, cols, objectives)
    peak = tracemalloc.get_traced_memory()[1] - base
    if not tracing:
        tracemalloc.stop()
    return int(np.clip(CHUNK_BYTES // max(peak / flat.size, 1.0), MIN_CHUNK, MAX_CHUNK))


def scored_chunks(scorer: Scorer, objectives, size: int | None = None) -> Iterator[tuple[np.ndarray, Scored]]:
    """Every valid plan of the space, scored about ``size`` (default: :func:`chunk_size`) plans
    at a time, in the space's order: (numbers, scores). Only valid combinations are decoded
    (:mod:`planner.search.valid`): a model-parallel space is mostly invalid ones."""
    for flat, cols in valid.chunks(scorer.space, size or chunk_size(scorer, objectives)):
        if flat.size:
            yield flat, score(scorer, cols, objectives)


class _All:
    """Keeps every valid plan."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, Scored]] = []

    def add(self, flat: np.ndarray, s: Scored) -> None:
        self.blocks.append((flat, s))

    def result(self) -> tuple[np.ndarray, list[Scored]]:
        return np.concatenate([f for f, _ in self.blocks]), [s for _, s in self.blocks]


class _Front:
    """The running non-dominated set of the feasible plans."""

    def __init__(self) -> None:
        self.flat = np.zeros(0, dtype=np.int64)
        self.front: Scored | None = None

    def add(self, flat: np.ndarray, s: Scored) -> None:
        f = np.flatnonzero(s.feasible)
        if f.size == 0:
            return
        own = f[pareto_mask(s.objectives[:, f])]  # the chunk's front first: far fewer plans
        cand = [take(s, own)] if self.front is None else [self.front, take(s, own)]
        both = merge(cand)
        keep = np.flatnonzero(pareto_mask(both.objectives))
        self.flat = np.concatenate([self.flat, flat[own]])[keep]
        self.front = take(both, keep)

    def result(self) -> tuple[np.ndarray, list[Scored]]:
        return self.flat, [] if self.front is None else [self.front]


def _reach(w: float, low: float) -> float:
    """An objective value above every value ranked in ``w``'s tie step or before it (steps
    measured from the final lowest value, which is at most ``low``), with one step to spare."""
    if low > 0:
        return w * (1 + TIE) ** 2
    return w + 2 * (abs(low) * TIE or 1.0)  # absolute steps (scored._steps): they widen as low falls


class _Best:
    """One objective: the plans :class:`Keep` asks for (see the module docstring)."""

    def __init__(self, scorer: Scorer, keep: Keep, cut: float | None = None):
        self.keep = keep
        self.sizes = [len(scorer.space.choices(a)) for a in keep.group]
        self.gmin = np.full(int(np.prod(self.sizes)), np.inf)  # best objective per group
        self.low = np.inf  # lowest feasible objective
        self.fixed = cut  # a known cut (second pass)
        self.used = np.inf  # the lowest cut applied
        self.flat = np.zeros(0, dtype=np.int64)
        self.pool: Scored | None = None
        self.lows: dict[int, tuple[float, np.ndarray, Scored]] = {}  # tie-break row -> lowest plan

    def _group(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        g = np.zeros(len(next(iter(cols.values()))), dtype=np.int64)
        for a, n in zip(self.keep.group, self.sizes, strict=True):
            g = g * n + cols[a]
        return g

    def cut(self) -> float:
        """Plans above this objective value are not needed (given what was seen so far)."""
        if self.fixed is not None:
            return self.fixed
        k = self.keep.groups + 1
        seen = self.gmin[np.isfinite(self.gmin)]
        if seen.size < k:
            return np.inf
        w = float(np.partition(seen, k - 1)[k - 1])
        near = self.low * (1 + TIE) * self.keep.within * (1 + 1e-9) + 1e-12 if self.low > 0 else -np.inf
        return max(_reach(w, self.low), near)

    def final_cut(self) -> float:
        """The cut with everything seen; with fewer groups than asked for, the last group's."""
        seen = self.gmin[np.isfinite(self.gmin)]
        if self.fixed is not None or seen.size >= self.keep.groups + 1 or seen.size == 0:
            return self.cut()
        saved, self.keep = self.keep, Keep(self.keep.group, seen.size - 1, self.keep.within)
        try:
            return self.cut()
        finally:
            self.keep = saved

    def _note_lows(self, flat: np.ndarray, s: Scored, f: np.ndarray) -> None:
        """Keep a plan with the lowest finite value of each stepped tie-break row."""
        if s.tiebreak is None:
            return
        for r, row in enumerate(s.tiebreak[:-1]):
            vals = row[f]
            fin = np.flatnonzero(np.isfinite(vals))
            if fin.size == 0:
                continue
            j = int(f[fin[np.argmin(vals[fin])]])
            if r not in self.lows or row[j] < self.lows[r][0]:
                self.lows[r] = (float(row[j]), flat[j : j + 1], take(s, np.array([j])))

    def add(self, flat: np.ndarray, s: Scored) -> None:
        f = np.flatnonzero(s.feasible)
        if f.size == 0:
            return
        v = s.objectives[0]
        self.low = min(self.low, float(v[f].min()))
        np.minimum.at(self.gmin, self._group(s.cols)[f], v[f])
        self._note_lows(flat, s, f)
        cut = self.cut()
        self.used = min(self.used, cut)
        pick = f[v[f] <= cut]
        both = take(s, pick) if self.pool is None else merge([self.pool, take(s, pick)])
        keep = np.flatnonzero(both.objectives[0] <= cut)
        self.flat = np.concatenate([self.flat, flat[pick]])[keep]
        self.pool = take(both, keep)

    def exact(self) -> bool:
        """Whether no plan the final cut keeps was dropped by an earlier, lower cut (always
        so for positive objectives, whose cut only falls)."""
        return self.final_cut() <= self.used

    def result(self) -> tuple[np.ndarray, list[Scored]]:
        cut = self.final_cut()
        parts = [] if self.pool is None else [self.pool]
        flats = [self.flat]
        if self.pool is not None:
            keep = np.flatnonzero(self.pool.objectives[0] <= cut)
            parts, flats = [take(self.pool, keep)], [self.flat[keep]]
        for _, fl, one in self.lows.values():
            parts.append(one)
            flats.append(fl)
        return np.concatenate(flats), parts


def enumerate_space(
    scorer: Scorer, objectives: tuple[str, ...], keep: Keep | None = None, size: int | None = None
) -> tuple[Scored, Enumerated]:
    """Score every valid plan of the space in chunks of ``size`` (default: :func:`chunk_size`)
    combinations; return the plans ``keep`` asks for (every valid plan without it), in
    enumeration order, and the counts."""
    counts = Enumerated(scorer.space.raw_size, kept_all=keep is None)
    if keep is None:
        red = _All()
    elif len(objectives) > 1:
        red = _Front()
    else:
        red = _Best(scorer, keep)
    size = size or chunk_size(scorer, objectives)
    for flat, s in scored_chunks(scorer, objectives, size):
        counts.valid += len(s)
        counts.feasible += int(s.feasible.sum())
        red.add(flat, s)
    if isinstance(red, _Best) and not red.exact():  # rare: a negative objective's steps widened
        red = _Best(scorer, keep, cut=red.final_cut())
        for flat, s in scored_chunks(scorer, objectives, size):
            red.add(flat, s)
    flat, parts = red.result()
    if not parts:
        return score(scorer, {a: np.zeros(0, dtype=np.int64) for a in scorer.space.names}, objectives), counts
    _, first = np.unique(flat, return_index=True)  # enumeration order, each plan once
    return take(merge(parts), first), counts
