"""Parsers of the user's words: budgets, durations, integer lists, prices.

Each turns one option's text into a value with SI units (seconds, USD) or raises a one-line
:class:`~planner.errors.BadInput` naming the accepted forms.
"""

from __future__ import annotations

import re

from planner.errors import BadInput
from planner.request.bounds import MAX_GPUS, check_list_length

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
            gpus = int(m.group(1)) if len(m.group(1)) <= 12 else MAX_GPUS + 1  # no 10^20-digit ints
            if not 1 <= gpus <= MAX_GPUS:
                raise BadInput(
                    f"--budget '{raw}': the GPU count must be from 1 to {MAX_GPUS:,} "
                    "(planner.request.bounds.MAX_GPUS, the largest published training run)"
                )
        elif u:
            if usd is not None:
                raise BadInput(f"--budget gives a money amount twice ('{raw}')")
            usd = float(u.group(1) or u.group(2))
            if not 0 < usd < float("inf"):
                raise BadInput(f"--budget '{raw}': the amount must be positive (use {BUDGET_FORMS})")
        else:
            raise BadInput(f"--budget '{raw}' is not {BUDGET_FORMS}")
    return gpus, usd


def parse_duration(raw: str | None, option: str = "--deadline") -> float | None:
    """'24h' -> 86400.0 seconds; None stays None."""
    if raw is None:
        return None
    m = _DURATION.match(raw)
    if not m or not 0 < float(m.group(1)) < float("inf"):
        raise BadInput(f"{option} '{raw}' is not {DEADLINE_FORMS}")
    return float(m.group(1)) * _UNIT_S[m.group(2).lower()]


def memory_fraction(value: float | None) -> float:
    """``--memory-headroom``: the share of each GPU's memory a plan may fill, in (0, 1]; None:
    the default (planner.metrics.memory.USABLE_FRACTION, justified there by recipes that ran)."""
    from planner.metrics.memory import USABLE_FRACTION

    if value is None:
        return USABLE_FRACTION
    if not (isinstance(value, int | float) and 0 < value <= 1):  # rejects nan and inf too
        raise BadInput(
            f"--memory-headroom {value!r} must be the share of GPU memory a plan may use, in (0, 1] "
            f"(default {USABLE_FRACTION})"
        )
    return float(value)


def parse_int_list(value: str, option: str) -> tuple[int, ...]:
    """'1,2,4,8' or '1-8' (powers of two) -> a tuple of positive integers, each at most
    :data:`~planner.request.bounds.MAX_GPUS` (every such list counts GPUs, steps or samples)."""
    out: list[int] = []
    parts = value.replace(" ", "").split(",")
    check_list_length(option, parts)
    for part in parts:
        try:
            if "-" in part[1:]:
                lo, hi = (int(x) for x in part.split("-", 1))
                if lo < 1 or hi > MAX_GPUS:  # refused below; a range from 0 would never end
                    out.append(lo if lo < 1 else hi)
                    continue
                v = lo
                while v <= hi:
                    out.append(v)
                    v *= 2
            else:
                out.append(int(part))
        except ValueError:
            raise BadInput(
                f"{option} takes integers like 1,2,4,8 or a range 1-128 (powers of two), got '{value}'"
            ) from None
    if not out or min(out) < 1:
        raise BadInput(f"{option} takes positive integers, got '{value}'")
    if max(out) > MAX_GPUS:
        raise BadInput(f"{option} '{value}': each value must be at most {MAX_GPUS:,}")
    return tuple(out)
