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

import weakref
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


EXTEND_BLOCK = 1 << 20  # combinations tested at once: bounds the decoded values' memory


def _extend(
    space, checks: tuple[_Check, ...], rows: dict[str, np.ndarray], name: str
) -> dict[str, np.ndarray]:
    """Rows x the choices of axis ``name`` (the new axis varying fastest), without the rows
    that ``checks`` reject; tested :data:`EXTEND_BLOCK` combinations at a time."""
    n = len(space.choices(name))
    size = len(next(iter(rows.values()))) if rows else 1
    step = max(EXTEND_BLOCK // n, 1)
    if not checks or size <= step:
        return _extend_block(space, checks, rows, name, n)
    parts = [
        _extend_block(space, checks, {a: c[i : i + step] for a, c in rows.items()}, name, n)
        for i in range(0, size, step)
    ]
    return {a: np.concatenate([p[a] for p in parts]) for a in parts[0]}


def _extend_block(space, checks, rows: dict[str, np.ndarray], name: str, n: int) -> dict[str, np.ndarray]:
    size = len(next(iter(rows.values()))) if rows else 1
    new = {a: np.repeat(c, n) for a, c in rows.items()}
    new[name] = np.tile(np.arange(n, dtype=_dtype(space)), size)
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
                out[a] = self.cols[a][rows].astype(np.int64)
            else:
                out[a] = rng.integers(0, len(space.choices(a)), n)
        return out


def _dtype(space) -> type:
    """The narrowest integer type of the core's choice indices (a 16,384-GPU space's core holds
    millions of rows of about twenty axes: int16 keeps it a quarter of int64's size)."""
    return np.int16 if max(len(space.choices(a)) for a in space.names) <= np.iinfo(np.int16).max else np.int32


PROBE_ROWS = 2048  # rows a candidate axis is tried on to measure how many combinations survive


def _growth(space, checks: tuple[_Check, ...], rows: dict[str, np.ndarray], a: str) -> float:
    """Rows per row after extending by axis ``a`` with ``checks``: its choices times the share
    that pass, measured on up to :data:`PROBE_ROWS` evenly spread rows."""
    n = len(space.choices(a))
    if not checks:
        return float(n)
    size = len(next(iter(rows.values()))) if rows else 1
    if size == 0:
        return 0.0  # no valid row left: every order walks the same empty core
    pick = np.unique(np.linspace(0, size - 1, min(size, PROBE_ROWS)).astype(np.int64))
    probe = {x: c[pick] for x, c in rows.items()}
    kept = _extend(space, checks, probe, a)
    return len(next(iter(kept.values()))) / pick.size


def _next(space, checks: tuple[_Check, ...], rows, done: set[str], left: list[str]) -> tuple[str, tuple]:
    """The axis to set next and the constraints it completes: the one completing the most
    constraints; among those, the one the rows grow least by (measured, :func:`_growth`), so a
    constraint that prunes hard (a microbatch that must divide the batch) runs before an axis
    that multiplies the rows (virtual pipeline stages)."""
    todo = {a: tuple(c for c in checks if a in c.reads and c.reads <= done | {a}) for a in left}
    most = max(len(t) for t in todo.values())
    tied = [a for a in left if len(todo[a]) == most]
    if len(tied) == 1:
        return tied[0], todo[tied[0]]
    best = min(tied, key=lambda a: (_growth(space, todo[a], rows, a), len(space.choices(a))))
    return best, todo[best]


# The last spaces' cores: a search asks for one several times (the count, the chunk probe, the
# enumeration), and walking a 16,384-GPU model-parallel space takes about a second.
_CORES: dict[int, tuple[weakref.ref, Core]] = {}


def core(space) -> Core:
    """The space's :class:`Core`, walked over the constrained axes only (memory: the valid
    combinations of those axes, a small fraction of the space's); built once per space."""
    held = _CORES.get(id(space))
    if held is not None and held[0]() is space:
        return held[1]
    c = _walk(space)
    for key in [k for k, (ref, _) in _CORES.items() if ref() is None]:
        del _CORES[key]
    _CORES[id(space)] = (weakref.ref(space), c)
    return c


def _walk(space) -> Core:
    checks = _checks(space)
    read = set().union(*(c.reads for c in checks)) if checks else set()
    sizes = {a: len(space.choices(a)) for a in space.names}
    bound = [a for a in space.names if a in read or sizes[a] == 1] or [space.names[0]]
    free = tuple(a for a in space.names if a not in bound)
    rows: dict[str, np.ndarray] = {}
    done: set[str] = set()
    left = list(bound)
    while left:
        a, todo = _next(space, checks, rows, done, left)
        rows = _extend(space, todo, rows, a)
        done.add(a)
        left.remove(a)
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
            base += strides[a] * col[rows].astype(np.int64)
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
        flat += strides[a] * np.asarray(cols[a], dtype=np.int64)
    return flat
