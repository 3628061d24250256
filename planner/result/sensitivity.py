"""What the answer hangs on: the best plan's iteration time with each efficiency, bandwidth and
overhead moved by +-20% on its own (:func:`costs.fit.sensitivity.tornado`), modern rules only."""

from __future__ import annotations

from costs.fit.sensitivity import tornado
from planner.metrics.scorer import Scorer

DELTA = 0.2


def sensitivity(scorer: Scorer, cols: dict, i: int) -> list[dict] | None:
    """Tornado rows (parameter, iteration ms at -20% and +20%, base) of plan ``i``; None under
    PALEO's rule sets, whose knobs (PPP) are the user's to set."""
    one = {a: c[i : i + 1] for a, c in cols.items()}
    eff = scorer.efficiency_of(one)  # with several stacks searched: the plan's stack's
    if eff is None:
        return None
    p, _ = scorer.evaluate(one)
    where = {
        "device": int(p.device[0]),
        "precision": int(p.precision[0]),
        "intra": int(p.intra_link[0]),
        "inter": int(p.network[0]),
    }
    rows = tornado(lambda e: scorer.evaluate(one, efficiency=e)[1].total[0], eff, where, DELTA)
    return [
        {
            "parameter": r["parameter"],
            "minus_ms": r["minus"] * 1e3,
            "plus_ms": r["plus"] * 1e3,
            "base_ms": r["base"] * 1e3,
        }
        for r in rows
    ]
