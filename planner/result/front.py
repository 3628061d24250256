"""An honest Pareto front: plans that no listed plan beats by more than a stated tolerance.

A front of exact dominance lists every GPU count of a plan that scales almost linearly: each
costs a few dollars less than the next and takes twice as long, and the reader cannot tell the
choices that matter from noise. Here a plan is merged into a listed one when the listed plan is
no worse on every objective by more than ``tol`` (relative; additive epsilon-dominance on the
ratio scale, Laumanns et al. 2002, "Combining Convergence and Diversity in Evolutionary
Multiobjective Optimization", Evol. Comput. 10(3)); when the two are within ``tol`` of each other
on every objective, the one on fewer nodes (then fewer GPUs) stands for both. Merged plans are
kept as the listed plan's ``equivalents``, so nothing is hidden.
"""

from __future__ import annotations

import numpy as np

FRONT_TOLERANCE = 0.01  # 1% on every objective: below the model's own error, above rounding


def _covers(u: np.ndarray, v: np.ndarray, tol: float) -> bool:
    """Whether objective vector ``u`` is within ``tol`` of ``v`` or better, on every objective."""
    return bool(np.all(u <= v + tol * np.abs(v)))


def _layout(rec: dict) -> tuple:
    return rec.get("nodes", 1), rec.get("gpus", 1), rec.get("cost_usd") or 0.0


def _words(rec: dict) -> str:
    return f"{rec.get('gpus')} x {rec.get('gpu')} ({rec.get('nodes')} node(s) x {rec.get('gpus_per_node')})"


def thin(front: list[dict], tol: float = FRONT_TOLERANCE) -> tuple[list[int], int]:
    """Positions of ``front`` (records with an ``objective`` list, fastest first) to list, and how
    many plans were merged; each listed record gains ``equivalents`` (words) of those it stands for."""
    kept: list[int] = []
    merged = 0
    vals = [np.atleast_1d(np.asarray(r["objective"], dtype=float)) for r in front]

    def absorb(into: int, gone: int) -> None:
        front[into].setdefault("equivalents", []).extend(
            [_words(front[gone]), *front[gone].pop("equivalents", [])]
        )

    for j, v in enumerate(vals):
        cover = next((i for i in kept if _covers(vals[i], v, tol)), None)
        if cover is not None and not (
            _covers(v, vals[cover], tol) and _layout(front[j]) < _layout(front[cover])
        ):
            absorb(cover, j)
            merged += 1
            continue
        # j is listed: it stands for every listed plan it covers (ties: the smaller layout, j)
        for i in [i for i in kept if _covers(v, vals[i], tol)]:
            kept.remove(i)
            absorb(j, i)
            merged += 1
        kept.append(j)
    return sorted(kept, key=lambda i: vals[i][0]), merged
