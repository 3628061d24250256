"""Which plans a stack can run: its ``[plans]`` table as a check of one plan (``estimate``
refuses in one line) and as a vectorised mask over many (the search space's validity).

Keys: ``tp``, ``pp``, ``sp``, ``ep``, ``interleave``, ``tp_overlap``, ``cp`` (transformer parallelism
the stack has), ``hybrid`` (a CNN's model-parallel split), ``zero`` (ZeRO stages of its
data-parallel engine), ``zero_with_pp`` (the stages it allows with pipeline parallelism) and
``schedules`` (its pipeline schedules, costs.llm.pipeline.SCHEDULES; default 1f1b).
"""

from __future__ import annotations

import numpy as np

from planner.stacks.registry import Stack

_WHAT = {
    "tp": "tensor parallelism (--tp)",
    "pp": "pipeline parallelism (--pp)",
    "sp": "sequence parallelism (--sp)",
    "ep": "expert parallelism (--ep)",
    "interleave": "an interleaved pipeline schedule (--interleave)",
    "tp_overlap": "tensor-parallel communication overlap (--tp-overlap)",
    "cp": "context parallelism (--cp)",
    "ep_overlap": "expert all-to-all overlap (--ep-overlap)",
    "hybrid": "a model-parallel split (--parallel hybrid or model)",
}


def _used(plan: dict) -> dict[str, bool]:
    """Which restricted features one plan (scalars) uses."""
    return {
        "tp": plan.get("tp", 1) > 1,
        "pp": plan.get("pp", 1) > 1,
        "sp": bool(plan.get("sp", False)),
        "ep": plan.get("ep", 1) > 1,
        "interleave": plan.get("interleave", 1) > 1,
        "tp_overlap": bool(plan.get("tp_overlap", False)),
        "cp": plan.get("cp", 1) > 1,
        "ep_overlap": bool(plan.get("ep_overlap", False)),
        "hybrid": bool(plan.get("hybrid", False)),
    }


def refusal(stack: Stack, plan: dict) -> str | None:
    """Why ``stack`` cannot run ``plan`` (keys tp, pp, sp, ep, interleave, tp_overlap, cp, zero,
    hybrid; absent: not used), or None when it can. One line naming --stack and the option."""
    for key, used in _used(plan).items():
        if used and not stack.allows(key):
            return f"--stack {stack.name} has no {_WHAT[key]} ({stack.framework})"
    schedule = plan.get("pp_schedule", "1f1b")
    if schedule not in stack.schedules:
        return f"--stack {stack.name} has no {schedule} pipeline schedule (valid: {', '.join(stack.schedules)}; {stack.framework})"
    zero = int(plan.get("zero", 0))
    allowed = stack.zero_with_pp if plan.get("pp", 1) > 1 else stack.zero
    if zero not in allowed:
        with_pp = " with pipeline parallelism" if plan.get("pp", 1) > 1 else ""
        return (
            f"--stack {stack.name} cannot run --zero {zero}{with_pp} "
            f"(valid: {', '.join(map(str, allowed))}; {stack.data_parallel})"
        )
    return None


def mask(stack: Stack, cols: dict[str, np.ndarray]) -> np.ndarray:
    """Whether ``stack`` can run each plan of ``cols`` (arrays of tp, pp, sp, ep, interleave,
    tp_overlap, cp, zero, hybrid values; a missing column is not used)."""
    n = len(next(iter(cols.values())))
    ok = np.ones(n, dtype=bool)
    flags = {
        "tp": lambda v: v > 1,
        "pp": lambda v: v > 1,
        "ep": lambda v: v > 1,
        "interleave": lambda v: v > 1,
        "cp": lambda v: v > 1,
        "sp": lambda v: v.astype(bool),
        "tp_overlap": lambda v: v.astype(bool),
        "ep_overlap": lambda v: v.astype(bool),
        "hybrid": lambda v: v.astype(bool),
    }
    for key, used in flags.items():
        if key in cols and not stack.allows(key):
            ok &= ~used(np.asarray(cols[key]))
    if "pp_schedule" in cols:
        ok &= np.isin(np.asarray(cols["pp_schedule"]), stack.schedules)
    if "zero" in cols:
        zero = np.asarray(cols["zero"])
        pp = np.asarray(cols.get("pp", np.ones(n)))
        ok &= np.where(pp > 1, np.isin(zero, stack.zero_with_pp), np.isin(zero, stack.zero))
    return ok
