"""The search space of training plans: static choice lists, plan <-> trial, enumeration.

Axes (each a static list, so Optuna's samplers see the same choices in every trial):
  gpu        device key                    gpus       total GPU count
  per_node   GPUs per node (1, 2, 4, 8)    batch      samples per GPU per iteration
  split      data parallel, or the first model-parallel layer of a hybrid split
  scheme     AllReduce scheme              precision  arithmetic precision
A combination is *valid* when the GPUs fill whole nodes of a size the device comes in (GPUs a
multiple of per_node, per_node <= the device's max per node). Invalid combinations are never
scored: they are not plans. Valid plans that break a limit are scored and marked infeasible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costs import comm
from costs.hardware import PRECISIONS
from costs.model import Plans, plans

AXES = ("gpu", "gpus", "per_node", "batch", "split", "scheme", "precision")


def gpu_counts(max_gpus: int) -> tuple[int, ...]:
    """Powers of two and whole 8-GPU nodes up to ``max_gpus``, plus ``max_gpus`` itself."""
    counts = {1 << i for i in range(max_gpus.bit_length()) if 1 << i <= max_gpus}
    counts |= set(range(8, max_gpus + 1, 8))
    counts.add(max_gpus)
    return tuple(sorted(counts))


@dataclass(frozen=True)
class Space:
    """Choice lists of every axis. ``global_batch`` fixes K x batch (strong scaling)."""

    gpu: tuple[str, ...]
    gpus: tuple[int, ...]
    per_node: tuple[int, ...]
    batch: tuple[int, ...]
    split: tuple[int, ...]  # layer indices; n_layers = pure data parallelism
    scheme: tuple[str, ...]
    precision: tuple[str, ...]
    max_per_node: tuple[int, ...]  # per gpu entry
    n_layers: int
    global_batch: int | None = None

    def choices(self, axis: str) -> tuple:
        return getattr(self, axis)

    @property
    def raw_size(self) -> int:
        return int(np.prod([len(self.choices(a)) for a in AXES]))

    def grid(self) -> dict[str, np.ndarray]:
        """Every valid combination, as index arrays per axis (vectorised, no Python loop)."""
        shape = [len(self.choices(a)) for a in AXES]
        idx = np.indices(shape).reshape(len(AXES), -1)
        cols = dict(zip(AXES, idx, strict=True))
        valid = self.valid(cols)
        return {a: c[valid] for a, c in cols.items()}

    def valid(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        """Mask of valid index combinations (see the module docstring)."""
        k = np.asarray(self.gpus)[cols["gpus"]]
        g = np.asarray(self.per_node)[cols["per_node"]]
        cap = np.asarray(self.max_per_node)[cols["gpu"]]
        ok = (k % g == 0) & (g <= cap)
        # one worker has no model-parallel part: keep only the data-parallel split for it
        ok &= (k > 1) | (np.asarray(self.split)[cols["split"]] == self.n_layers)
        if self.global_batch is None:
            return ok
        return ok & (cols["batch"] == 0)

    def batch_per_worker(self, cols) -> np.ndarray:
        k = np.asarray(self.gpus)[cols["gpus"]]
        if self.global_batch is not None:
            return np.ceil(self.global_batch / k).astype(np.int64)
        return np.asarray(self.batch)[cols["batch"]]

    def to_plans(
        self, cols: dict[str, np.ndarray], ppp_comp: float, ppp_comm: float, pipeline: bool
    ) -> Plans:
        """Index arrays -> evaluator plans. Link table: [network, intra-node link of each gpu]."""
        return plans(
            self.n_layers,
            device=cols["gpu"],
            batch=self.batch_per_worker(cols),
            workers=np.asarray(self.gpus)[cols["gpus"]],
            gpus_per_node=np.asarray(self.per_node)[cols["per_node"]],
            scheme=np.array([comm.SCHEME_NAMES.index(s) for s in self.scheme])[cols["scheme"]],
            network=0,
            intra_link=1 + cols["gpu"],
            precision=np.array([PRECISIONS.index(p) for p in self.precision])[cols["precision"]],
            split=np.asarray(self.split)[cols["split"]],
            ppp_comp=ppp_comp,
            ppp_comm=ppp_comm,
            pipeline=pipeline,
        )
