"""The valid plans of a space, counted, drawn and enumerated without testing its invalid
combinations.

A model-parallel space multiplies a dozen axes into 10^8-10^9 combinations of which 1-25% are
plans (tensor x pipeline degrees must divide the GPUs, the replicas x microbatch the global
batch, ...). Decoding and testing every combination costs far more than scoring the plans.

Each axis's constraint reads a few axes (recorded once per space by evaluating it on one
combination through :class:`_Reads`). The *core* is the valid combinations of the axes some
constraint reads, built one axis at a time (in an order that completes constraints early) and
filtered as soon as a constraint's axes are all set; the axes no constraint reads (*free*)
multiply it: valid plans = core rows x every free choice. From the core, :func:`chunks` yields
exactly what :meth:`Space.chunks` yields (the valid combinations' numbers and index columns, in
the same row-major order) by splitting on leading axes until a block is small, numbering its
rows and sorting them; :meth:`Core.draw` draws valid plans uniformly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from planner.space.axes import AXES
from planner.space.declare import Chosen


class _Reads(Chosen):
    """A :class:`Chosen` that notes which axes a constraint reads."""

    def __init__(self, space, cols):
        super().__init__(space, cols)
        self.read: set[str] = set()

    def index(self, axis: str) -> np.ndarray:
        self.read.add(axis)
        return super().index(axis)

    def value(self, axis: str) -> np.ndarray:
        self.read.add(axis)
        return super().value(axis)


@dataclass(frozen=True)
class _Check:
    """One axis's constraint and the axes it reads."""

    test: Callable[[Chosen], np.ndarray]
    reads: frozenset[str]


def _checks(space) -> tuple[_Check, ...]:
    one = {a: np.zeros(1, dtype=np.int64) for a in space.names}
    out = []
    for ax in AXES:
        if ax.valid is None:
            continue
        rec = _Reads(space, one)
        ax.valid(rec)
        # a constraint that reads no axis holds or fails alike for every plan: test it with the first
        out.append(_Check(ax.valid, frozenset(rec.read) or frozenset(space.names[:1])))
    return tuple(out)


def _schedule(checks: tuple[_Check, ...], order: tuple[str, ...]) -> tuple[tuple[_Check, ...], ...]:
    """Per axis of ``order``: the constraints whose axes are all set once it is."""
    done: set[str] = set()
    out = []
    for a in order:
        done.add(a)
        out.append(tuple(c for c in checks if a in c.reads and c.reads <= done))
    return tuple(out)


def _extend(
    space, checks: tuple[_Check, ...], rows: dict[str, np.ndarray], name: str
) -> dict[str, np.ndarray]:
    """Rows x the choices of axis ``name`` (the new axis varying fastest), without the rows
    that ``checks`` reject."""
    n = len(space.choices(name))
    size = len(next(iter(rows.values()))) if rows else 1
    new = {a: np.repeat(c, n) for a, c in rows.items()}
    new[name] = np.tile(np.arange(n, dtype=np.int64), size)
    if checks:
        ch = Chosen(space, new)
        ok = np.ones(size * n, dtype=bool)
        for c in checks:
            ok &= c.test(ch)
        new = {a: col[ok] for a, col in new.items()}
    return new


@dataclass(frozen=True)
class Core:
    """The valid combinations of the axes constraints read (``cols``), and the axes no
    constraint reads (``free``): the valid plans are every core row with every free choice."""

    cols: dict[str, np.ndarray]
    free: tuple[str, ...]
    count: int  # valid plans

    def draw(self, space, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` valid plans drawn uniformly (with replacement), as index columns of every axis."""
        rows = rng.integers(0, len(next(iter(self.cols.values()))), n)
        out = {}
        for a in space.names:
            if a in self.cols:
                out[a] = self.cols[a][rows]
            else:
                out[a] = rng.integers(0, len(space.choices(a)), n)
        return out


def _greedy(checks: tuple[_Check, ...], axes: list[str], sizes: dict[str, int]) -> tuple[str, ...]:
    """An order of ``axes`` that completes constraints early (fewer rows walked): next, the
    axis that completes the most constraints, then the one with the fewest choices."""
    order: list[str] = []
    left = list(axes)
    while left:
        done = set(order)
        best = min(left, key=lambda a, done=done: (-_completed(checks, done, a), sizes[a]))
        order.append(best)
        left.remove(best)
    return tuple(order)


def _completed(checks: tuple[_Check, ...], done: set[str], a: str) -> int:
    """How many constraints setting axis ``a`` after the axes ``done`` completes."""
    return sum(a in c.reads and c.reads <= done | {a} for c in checks)


def core(space) -> Core:
    """The space's :class:`Core`, walked over the constrained axes only (memory: the valid
    combinations of those axes, a small fraction of the space's)."""
    checks = _checks(space)
    read = set().union(*(c.reads for c in checks)) if checks else set()
    sizes = {a: len(space.choices(a)) for a in space.names}
    bound = [a for a in space.names if a in read or sizes[a] == 1] or [space.names[0]]
    free = tuple(a for a in space.names if a not in bound)
    order = _greedy(checks, bound, sizes)
    rows: dict[str, np.ndarray] = {}
    for a, todo in zip(order, _schedule(checks, order), strict=True):
        rows = _extend(space, todo, rows, a)
    n = len(next(iter(rows.values()))) if rows else 1
    per_row = int(np.prod([sizes[a] for a in free], dtype=np.int64))
    return Core(rows, free, n * per_row)


def _strides(space) -> dict[str, int]:
    """Each axis's weight in the combination number (row-major: the last axis varies fastest)."""
    out, w = {}, 1
    for a in reversed(space.names):
        out[a] = w
        w *= len(space.choices(a))
    return out


def _free_numbers(space, axes: list[str], strides: dict[str, int]) -> np.ndarray:
    """The combination-number offsets of every combination of the free ``axes``."""
    off = np.zeros(1, dtype=np.int64)
    for a in axes:
        off = (off[:, None] + strides[a] * np.arange(len(space.choices(a)), dtype=np.int64)).ravel()
    return off


def _blocks(space, c: Core, rows: np.ndarray, fixed: int, free: list[str], depth: int, size: int):
    """The numbers of the valid combinations whose axes before ``depth`` hold the values chosen
    so far (core ``rows``; free axes folded into the offset ``fixed``, ``free`` those left),
    sorted, in blocks of at most ``size`` unless one prefix holds more."""
    if rows.size == 0:
        return
    per_row = int(np.prod([len(space.choices(a)) for a in free], dtype=np.int64))
    strides = _strides(space)
    if rows.size * per_row <= size or depth == len(space.names):
        base = np.full(rows.size, fixed, dtype=np.int64)
        for a, col in c.cols.items():
            base += strides[a] * col[rows]
        yield np.sort((base[:, None] + _free_numbers(space, free, strides)[None, :]).ravel())
        return
    a = space.names[depth]
    if a in c.cols:
        col = c.cols[a][rows]
        for v in range(len(space.choices(a))):
            yield from _blocks(space, c, rows[col == v], fixed, free, depth + 1, size)
    elif a in free:
        rest = [x for x in free if x != a]
        for v in range(len(space.choices(a))):
            yield from _blocks(space, c, rows, fixed + v * strides[a], rest, depth + 1, size)
    else:
        yield from _blocks(space, c, rows, fixed, free, depth + 1, size)


def chunks(space, size: int, c: Core | None = None) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """What :meth:`Space.chunks` yields, the numbers and index columns of the valid
    combinations in order, in blocks of about ``size`` valid combinations, without testing
    the invalid ones (``c``: the space's :func:`core` when already built)."""
    c = c or core(space)
    rows = np.arange(len(next(iter(c.cols.values()))) if c.cols else 0)
    held: list[np.ndarray] = []
    n = 0
    for flat in _blocks(space, c, rows, 0, list(c.free), 0, size):
        held.append(flat)
        n += flat.size
        if n >= size:
            out = np.concatenate(held)
            yield out, space.decode(out)
            held, n = [], 0
    if held:
        out = np.concatenate(held)
        yield out, space.decode(out)


def numbers(space, cols: dict[str, np.ndarray]) -> np.ndarray:
    """The combination numbers of index columns (the inverse of :meth:`Space.decode`)."""
    strides = _strides(space)
    flat = np.zeros(len(next(iter(cols.values()))), dtype=np.int64)
    for a in space.names:
        flat += strides[a] * cols[a]
    return flat
