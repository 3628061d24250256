"""Constraints of a search: parsing the user's budgets and deadline, and constraint values.

Optuna's convention is used throughout: a plan is feasible when every constraint value is
<= 0 (``optuna.trial.Trial.set_constraint``). Values are relative (e.g. memory needed / memory
available - 1), so that "by how much" a plan misses is comparable across constraints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from planner.errors import BadInput

BUDGET_FORMS = "a GPU count (16gpus, '16 GPUs', 16) or money ($500, 500usd)"
DEADLINE_FORMS = "a duration such as 90s, 45m, 24h, 2d or 1.5h"
_GPUS = re.compile(r"^\s*(\d+)\s*(gpus?)?\s*$", re.IGNORECASE)
_USD = re.compile(r"^\s*(?:\$\s*(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)\s*(?:usd|\$|dollars?))\s*$", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|hours?|d|days?)\s*$", re.IGNORECASE)
_UNIT_S = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}


def parse_budgets(values: list[str] | None) -> tuple[int | None, float | None]:
    """``--budget`` values -> (max GPUs, max dollars); each may be given once."""
    gpus: int | None = None
    usd: float | None = None
    for raw in values or []:
        m, u = _GPUS.match(raw), _USD.match(raw)
        if m:
            if gpus is not None:
                raise BadInput(f"--budget gives a GPU count twice ('{raw}')")
            gpus = int(m.group(1))
            if gpus < 1:
                raise BadInput(f"--budget '{raw}': the GPU count must be at least 1 (use {BUDGET_FORMS})")
        elif u:
            if usd is not None:
                raise BadInput(f"--budget gives a money amount twice ('{raw}')")
            usd = float(u.group(1) or u.group(2))
            if usd <= 0:
                raise BadInput(f"--budget '{raw}': the amount must be positive (use {BUDGET_FORMS})")
        else:
            raise BadInput(f"--budget '{raw}' is not {BUDGET_FORMS}")
    return gpus, usd


def parse_duration(raw: str | None, option: str = "--deadline") -> float | None:
    """'24h' -> 86400.0 seconds; None stays None."""
    if raw is None:
        return None
    m = _DURATION.match(raw)
    if not m or float(m.group(1)) <= 0:
        raise BadInput(f"{option} '{raw}' is not {DEADLINE_FORMS}")
    return float(m.group(1)) * _UNIT_S[m.group(2).lower()]


@dataclass(frozen=True)
class Limits:
    """What a plan must satisfy. None means "no limit"."""

    max_gpus: int | None = None
    max_usd: float | None = None
    deadline_s: float | None = None
    max_global_batch: int = 8192  # Goyal et al. 2017 train ImageNet at 8k without loss of accuracy
    min_global_batch: int = 1
    memory_fraction: float = 0.9  # usable share of device memory (context, allocator slack)

    def names(self) -> list[str]:
        out = ["memory", "max_global_batch", "min_global_batch", "supported"]
        if self.max_gpus is not None:
            out.append("budget_gpus")
        if self.max_usd is not None:
            out.append("budget_usd")
        if self.deadline_s is not None:
            out.append("deadline")
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
        return np.nan_to_num(np.vstack(rows), nan=np.inf)
