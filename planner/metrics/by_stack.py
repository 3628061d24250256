"""Score plans of several stacks at once: each stack's plans go through the evaluator together
(vectorised) with that stack's efficiencies, and the breakdowns are put back in plan order."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np


def merge(parts: list[tuple[np.ndarray, object]], n: int):
    """One breakdown of ``n`` plans from ``(rows, breakdown)`` parts: every per-plan array of
    part ``k`` lands at its ``rows`` (a boolean mask); other fields come from the first part."""
    first = parts[0][1]
    size = int(parts[0][0].sum())
    values = {}
    for f in fields(first):
        v0 = getattr(first, f.name)
        if not (isinstance(v0, np.ndarray) and v0.ndim >= 1 and v0.shape[0] == size):
            continue
        dtype = np.result_type(*(getattr(r, f.name).dtype for _, r in parts))
        out = np.zeros((n, *v0.shape[1:]), dtype=dtype)
        for rows, r in parts:
            out[rows] = getattr(r, f.name)
        values[f.name] = out
    return replace(first, **values)


def evaluate_by_stack(evaluate, costs, cols, to_plans, devices, links, kwargs_of, plan_kwargs):
    """(breakdown) of the plans ``cols`` whose ``stack`` column picks the evaluator arguments
    ``kwargs_of(i)`` of stack ``i``; ``to_plans(sub_cols)`` builds a group's plans."""
    idx = cols["stack"]
    n = len(idx)
    parts = []
    for i in np.unique(idx):
        rows = idx == i
        p = to_plans({a: c[rows] for a, c in cols.items()})
        parts.append((rows, evaluate(costs, p, devices, links, **kwargs_of(int(i)), **plan_kwargs(p))))
    return merge(parts, n)
