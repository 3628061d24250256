"""Constraints of a search: the limits a plan must meet, as constraint values.

Optuna's convention is used throughout: a plan is feasible when every constraint value is
<= 0 (``optuna.trial.Trial.set_constraint``). Values are relative (e.g. memory needed / memory
available - 1), so that "by how much" a plan misses is comparable across constraints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.metrics.memory import USABLE_FRACTION


@dataclass(frozen=True)
class Limits:
    """What a plan must satisfy. None means "no limit"."""

    max_gpus: int | None = None
    max_usd: float | None = None
    deadline_s: float | None = None
    max_global_batch: int = 8192  # Goyal et al. 2017 train ImageNet at 8k without loss of accuracy
    min_global_batch: int = 1
    memory_fraction: float = USABLE_FRACTION  # usable share of device memory
    owned: bool = False  # --owned caps the GPUs of some devices (metric gpu_cap)

    def names(self) -> list[str]:
        out = ["memory", "max_global_batch", "min_global_batch", "supported"]
        if self.max_gpus is not None:
            out.append("budget_gpus")
        if self.max_usd is not None:
            out.append("budget_usd")
        if self.deadline_s is not None:
            out.append("deadline")
        if self.owned:
            out.append("owned_gpus")
        return out

    def summary(self) -> dict:
        """The limits as reports show them (None: no limit)."""
        return {
            "budget_gpus": self.max_gpus,
            "budget_usd": self.max_usd,
            "deadline_s": self.deadline_s,
            "max_global_batch": self.max_global_batch,
            "min_global_batch": self.min_global_batch,
            "memory_fraction": self.memory_fraction,
        }

    def values(self, m: dict[str, np.ndarray]) -> np.ndarray:
        """(n_constraints, plans) constraint values, <= 0 when satisfied, from plan metrics."""
        rows = [
            m["memory_bytes"] / (m["device_memory_bytes"] * self.memory_fraction) - 1.0,
            m["global_batch"] / self.max_global_batch - 1.0,
            1.0 - m["global_batch"] / self.min_global_batch,
            np.where(np.isfinite(m["iteration_s"]), -1.0, 1.0),
        ]
        if self.max_gpus is not None:
            rows.append(m["gpus"] / self.max_gpus - 1.0)
        if self.max_usd is not None:
            rows.append(np.where(np.isfinite(m["cost_usd"]), m["cost_usd"] / self.max_usd - 1.0, np.inf))
        if self.deadline_s is not None:
            rows.append(m["time_to_train_s"] / self.deadline_s - 1.0)
        if self.owned:  # at most the GPUs owned of an owned device (the cap is inf for others)
            rows.append(m["gpus"] / m["gpu_cap"] - 1.0)
        return np.nan_to_num(np.vstack(rows), nan=np.inf)
