"""Per-layer forward and backward times of training steps (imports torch).

A time mark goes down before each layer's forward (a forward pre-hook) and when the gradient
of each layer's output is ready (a tensor hook, which fires as the backward reaches that
layer). The step's timeline is cut at these marks: a layer's forward time runs from its mark
to the next layer's, its backward time from its gradient's mark to the next gradient mark (its
own backward kernels and its weight gradients run in between). So the layers and the
optimizer step account for the whole hooked step but for what runs before the first mark and
after the last (``other``). Marks are CUDA events on a GPU (no synchronisation inside a step),
perf_counter on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from planner.profile.timing import Trainer


@dataclass(frozen=True)
class LayerTimes:
    """Seconds: per layer (L,) forward and backward; optimizer; the whole hooked step. Means over
    the middle half of the timed steps (ranked by step time), so the parts add up to the step."""

    forward: np.ndarray
    backward: np.ndarray
    optimizer: float
    step: float


class _Marks:
    def __init__(self, trainer: Trainer):
        self.clock = trainer.clock
        self.fwd: list = []
        self.bwd: list = []
        self.handles = []
        for i, node in enumerate(trainer.model.nodes):
            self.handles.append(node.register_forward_pre_hook(self._pre(i)))
            self.handles.append(node.register_forward_hook(self._post(i)))

    def _pre(self, i: int):
        def hook(module, args):
            self.fwd.append((i, self.clock.mark()))

        return hook

    def _post(self, i: int):
        def hook(module, args, out):
            if getattr(out, "requires_grad", False):
                out.register_hook(lambda grad: self.bwd.append((i, self.clock.mark())))

        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _segments(marks: list, end, clock, n: int) -> np.ndarray:
    out = np.zeros(n)
    for (i, a), (_, b) in zip(marks, marks[1:] + [(None, end)]):
        out[i] += clock.seconds(a, b)
    return out


def measure_layers(trainer: Trainer, steps: int, warmup: int) -> LayerTimes:
    """Per-layer times of ``steps`` hooked training steps after ``warmup`` (see LayerTimes)."""
    n = len(trainer.model.nodes)
    marks = _Marks(trainer)
    runs = []
    try:
        for k in range(warmup + steps):
            marks.fwd, marks.bwd = [], []
            m0, m1, m2, m3 = trainer.step()
            if k >= warmup:
                runs.append((list(marks.fwd), list(marks.bwd), (m0, m1, m2, m3)))
        trainer.clock.sync()
    finally:
        marks.remove()
    c = trainer.clock
    fwd = np.array([_segments(f, m[1], c, n) for f, _, m in runs])
    bwd = np.array([_segments(b, m[2], c, n) for _, b, m in runs])
    opt = np.array([c.seconds(m[2], m[3]) for *_, m in runs])
    step = np.array([c.seconds(m[0], m[3]) for *_, m in runs])
    keep = _middle_half(step)
    return LayerTimes(
        fwd[keep].mean(axis=0), bwd[keep].mean(axis=0), float(opt[keep].mean()), float(step[keep].mean())
    )


def _middle_half(x: np.ndarray) -> np.ndarray:
    """Indices of the middle half of ``x`` by rank (the median one when there are few)."""
    order = np.argsort(x, kind="stable")
    k = len(x) // 4
    return order[k : len(x) - k] if len(x) - 2 * k >= 1 else order[len(x) // 2 : len(x) // 2 + 1]
