"""What an axis declaration is: :class:`Axis`, its output :class:`Field` s, and :class:`Chosen`
(index columns with their values), shared by :mod:`planner.space.axes` and
:mod:`planner.space.llm_axes`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from planner.hosts import NODE_SIZES as PER_NODE  # noqa: F401  (GPUs per node every search tries)

if TYPE_CHECKING:
    from planner.request.optimize import Problem


class SpaceView(Protocol):
    """What declarations read of a space (:class:`planner.space.space.Space` is one); a
    protocol, so that declarations and the space that collects them import one way only."""

    llm: dict | None
    global_batch: int | None

    def choices(self, axis: str) -> list: ...


class Chosen:
    """Index columns of some plans, with the chosen value of every axis on demand."""

    def __init__(self, space: SpaceView, cols: dict[str, np.ndarray]):
        self.space = space
        self.cols = cols

    def index(self, axis: str) -> np.ndarray:
        return self.cols[axis]

    def value(self, axis: str) -> np.ndarray:
        return np.asarray(self.space.choices(axis))[self.cols[axis]]


_no_args = lambda rec: []


@dataclass(frozen=True)
class Field:
    """One output column of an axis: record key, values (arrays), compact-table header."""

    key: str
    values: Callable[[Chosen, dict], np.ndarray]
    header: str | None = None


@dataclass(frozen=True)
class Axis:
    """One search axis (see the module docstring)."""

    name: str
    choices: Callable[[Problem], tuple]
    plan: Callable[[Chosen], dict[str, np.ndarray]]
    fields: tuple[Field, ...]
    valid: Callable[[Chosen], np.ndarray] | None = None
    estimate_args: Callable[[dict], list[str]] = field(default=_no_args)
    estimate_tail: bool = False  # its estimate options come after the model's (ppp, rules)
    option: str | None = None
