"""Why a transformer plan has its parallel degrees: each one against its neighbours.

For the tensor-, pipeline- and context-parallel degrees, the ZeRO stage, the recomputation,
sequence parallelism, the microbatch, the virtual pipeline stages and the tensor-parallel
overlap, the plan is re-scored with that one choice changed (the GPUs stay; data parallelism
takes up the difference) and the sentence says what the neighbour
costs: it does not fit (and how much memory it needs), it is not a plan (why), or how much
slower or dearer it is.
"""

from __future__ import annotations

import numpy as np

from planner.metrics.scorer import METRIC, Scorer

_LABEL = {
    "tp": "TP",
    "pp": "PP",
    "cp": "CP",
    "zero": "ZeRO",
    "recompute": "recomputation",
    "sp": "sequence parallelism",
    "microbatch": "microbatch",
    "interleave": "virtual stages",
    "tp_overlap": "TP overlap",
}
_ALL = ("zero", "recompute", "sp", "tp_overlap")  # few choices: compare with each


def _neighbours(space, axis: str, i: int) -> list[int]:
    n = len(space.choices(axis))
    if axis in _ALL:
        return [j for j in range(n) if j != i]
    return [j for j in (i - 1, i + 1) if 0 <= j < n]


def _reason(m: dict, k: int, base: float, objective: str, usable: float) -> str | None:
    need = float(m["memory_bytes"][k])
    if need > usable:
        return f"does not fit ({need / 1e9:,.0f} GB per GPU, {usable / 1e9:,.0f} GB usable)"
    value = float(m[METRIC[objective]][k])
    if not np.isfinite(value) or base <= 0:
        return None
    change = value / base - 1.0
    word = {"time": "slower", "cost": "dearer", "memory": "more memory"}.get(objective, "worse")
    if objective == "throughput":
        change, word = base / value - 1.0, "less throughput"
    if abs(change) < 0.001:
        return "ties"
    if change < 0:  # better on the objective: another constraint (budget, deadline) rules it out
        return f"{-change:.0%} better, but breaks a constraint"
    return f"{change:.0%} {word}"


def degrees(scorer: Scorer, cols: dict[str, np.ndarray], i: int, objective: str) -> list[str]:
    """One sentence per model-parallel choice of plan ``i`` (empty for non-transformer spaces)."""
    space = scorer.space
    if space.llm is None:
        return []
    one = {a: c[i : i + 1] for a, c in cols.items()}
    base = float(scorer.metrics(one)[METRIC[objective]][0])
    usable = float(scorer.devices.memory_bytes[int(one["gpu"][0])]) * scorer.limits.memory_fraction
    lines = []
    for axis, label in _LABEL.items():
        here = int(one[axis][0])
        alts = _neighbours(space, axis, here)
        if not alts:
            continue
        trial = {a: np.repeat(c, len(alts)) for a, c in one.items()}
        trial[axis] = np.array(alts)
        ok = space.valid(trial)
        if not ok.any():
            continue
        m = scorer.metrics({a: c[ok] for a, c in trial.items()})
        parts = []
        for k, j in enumerate(np.array(alts)[ok]):
            why = _reason(m, k, base, objective, usable)
            if why is not None:
                parts.append(f"{label} {space.choices(axis)[j]} {why}")
        if parts:
            lines.append(f"{label} {space.choices(axis)[here]}: " + "; ".join(parts) + ".")
    return lines
