"""Sensitivity of one plan's iteration time to each efficiency and bandwidth (a tornado).

Each parameter of :class:`~costs.modern.efficiency.Efficiency` that the plan touches is moved by
+-``delta`` (relative) on its own, all others held, and the plan re-scored. A rate (compute
fraction, memory or link fraction: each also stands for the bandwidth or peak it multiplies)
moved up makes the plan faster; an overhead moved up makes it slower. Fractions may exceed 1
here: the question is "what if this rate were 20% higher", not a feasible efficiency.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from costs.modern.efficiency import Efficiency

# (label, field, kind): kind "device" (D,), "gemm" (D, P), "intra"/"inter" (links), "scalar"
PARAMETERS = (
    ("GEMM/convolution rate", "gemm", "gemm"),
    ("fused attention rate", "attention", "device"),
    ("memory bandwidth", "memory", "device"),
    ("vector (elementwise) rate", "vector", "device"),
    ("link inside a node", "link", "intra"),
    ("link between nodes", "link", "inter"),
    ("host time per kernel", "host_per_kernel_s", "scalar"),
    ("shortest kernel time", "kernel_min_s", "scalar"),
    ("framework time per iteration", "iteration_s", "scalar"),
)


def _scaled(eff: Efficiency, field: str, kind: str, where: dict, factor: float) -> Efficiency:
    if kind == "scalar":
        return replace(eff, **{field: getattr(eff, field) * factor})
    value = np.array(getattr(eff, field), dtype=float)
    if kind == "gemm":
        value[where["device"], where["precision"]] *= factor
    elif kind == "device":
        value[where["device"]] *= factor
    else:
        value[where[kind]] *= factor
    return replace(eff, **{field: value})


def tornado(
    seconds: Callable[[Efficiency], float],
    eff: Efficiency,
    where: dict,
    delta: float = 0.2,
) -> list[dict]:
    """One row per parameter: its name and the iteration seconds at -delta and +delta.

    ``seconds(eff)`` scores the plan under ``eff``; ``where`` holds the plan's row indices:
    ``device``, ``precision``, ``intra`` and ``inter`` (link rows). Rows are sorted by swing,
    largest first; parameters that do not move the time are kept (swing 0) so a reader sees
    them ruled out.
    """
    base = float(seconds(eff))
    rows = []
    for label, field, kind in PARAMETERS:
        lo = float(seconds(_scaled(eff, field, kind, where, 1.0 - delta)))
        hi = float(seconds(_scaled(eff, field, kind, where, 1.0 + delta)))
        rows.append({"parameter": label, "minus": lo, "plus": hi, "base": base, "swing": abs(hi - lo)})
    rows.sort(key=lambda r: -r["swing"])
    return rows
