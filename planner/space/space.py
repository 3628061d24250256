"""The Space stage: the choice list of every declared axis, plan <-> trial, enumeration.

A :class:`Space` is built from a validated :class:`~planner.request.optimize.Problem` by
:func:`build`: one choice list per axis of :data:`planner.space.axes.AXES`. Plans are index
columns (one integer array per axis). A combination is *valid* when every axis's constraint
holds (e.g. the GPUs fill whole nodes of a size the device comes in); invalid combinations are
never scored: they are not plans. Valid plans that break a limit are scored and marked
infeasible.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from costs.model import Plans, plans
from planner.space.axes import AXES, FIELDS, NAMES, Chosen

if TYPE_CHECKING:
    from planner.request.optimize import Problem


@dataclass(frozen=True)
class Space:
    """Choice lists of every axis, and what the axes' constraints read from the problem."""

    axes: dict[str, tuple]  # axis name -> choices, in the order of AXES
    max_per_node: tuple[int, ...]  # per gpu choice
    layers: tuple  # the net's layer specs (names of split points)
    global_batch: int | None = None  # fixes GPUs x batch (x accumulation): strong scaling
    auto_precision: tuple[int, ...] = ()  # per gpu choice: the precision index "auto" means
    llm: dict | None = None  # the transformer's description when model-parallel axes apply
    # per gpu choice and per_node choice: whether some kept provider rents such nodes (planner.hosts)
    node_offered: tuple[tuple[bool, ...], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return NAMES

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def choices(self, axis: str) -> tuple:
        return self.axes[axis]

    @property
    def raw_size(self) -> int:
        return int(np.prod([len(c) for c in self.axes.values()]))

    def grid(self) -> dict[str, np.ndarray]:
        """Every valid combination, as index arrays per axis (vectorised, no Python loop)."""
        cols = self.decode(np.arange(self.raw_size, dtype=np.int64))
        valid = self.valid(cols)
        return {a: c[valid] for a, c in cols.items()}

    def decode(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Index columns of combinations numbered ``flat`` in the row-major order of the axes
        (the last axis varies fastest): mixed-radix digits, one per axis."""
        cols = {}
        rest = np.asarray(flat, dtype=np.int64)
        for a in reversed(NAMES):
            rest, cols[a] = np.divmod(rest, len(self.axes[a]))
        return {a: cols[a] for a in NAMES}

    def chunks(self, size: int) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """The valid combinations ``size`` raw combinations at a time, in :meth:`grid`'s order:
        (their numbers, their index columns). Memory is bounded by ``size``, not the space."""
        for start in range(0, self.raw_size, size):
            flat = np.arange(start, min(start + size, self.raw_size), dtype=np.int64)
            cols = self.decode(flat)
            valid = self.valid(cols)
            yield flat[valid], {a: c[valid] for a, c in cols.items()}

    def valid(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        """Mask of valid index combinations: every axis's constraint holds."""
        ch = Chosen(self, cols)
        ok = np.ones(len(next(iter(cols.values()))), dtype=bool)
        for a in AXES:
            if a.valid is not None:
                ok &= a.valid(ch)
        return ok

    def to_plans(self, cols: dict[str, np.ndarray], **common) -> Plans:
        """Index columns -> evaluator plans; ``common`` are columns shared by every plan
        (ppp_comp, ppp_comm, pipeline). Link table: [network, intra-node link of each gpu]."""
        ch = Chosen(self, cols)
        columns = {"network": 0, **common}
        for a in AXES:
            columns.update(a.plan(ch))
        return plans(self.n_layers, **columns)

    def fields(self, cols: dict[str, np.ndarray], metrics: dict) -> dict[str, np.ndarray]:
        """Every axis's record columns (arrays), in declaration order."""
        ch = Chosen(self, cols)
        return {f.key: f.values(ch, metrics) for f in FIELDS}


def build(problem: Problem) -> Space:
    """The space of a validated request: each declared axis's choices."""
    return Space(
        axes={a.name: tuple(a.choices(problem)) for a in AXES},
        max_per_node=tuple(i.device.max_per_node for i in problem.devices),
        layers=tuple(problem.costs.net.layers),
        global_batch=problem.global_batch,
        auto_precision=tuple(int(x) for x in auto_precision(problem.devices)),
        llm=problem.llm,
        node_offered=tuple(tuple(bool(x) for x in row) for row in problem.hosts.offered())
        if problem.hosts is not None
        else (),
    )


def auto_precision(infos) -> np.ndarray:
    """Precision index per catalog device: what "auto" trains in (costs.hardware.auto_precision)."""
    from costs.hardware import DeviceTable
    from costs.hardware import auto_precision as resolve

    table = DeviceTable.of([i.device for i in infos])
    return resolve(table.peak, np.arange(len(infos)))
