"""`planner summary`: per-layer parameters, FLOPs and activation bytes of a net."""

from __future__ import annotations

import math

from costs.specs import layers
from planner import catalog

TOTAL_KEYS = ("params", "forward_flops", "backward_flops", "activation_bytes")


def summarize(net_name: str, batch: int | None, rules: str) -> tuple[list[dict], dict]:
    """Rows per layer and a totals record, at ``batch`` (default: the spec's batch).

    FLOPs count a multiply-add as 2, parameters include a bias for every conv and FC layer,
    and activation bytes are fp32 outputs of every layer including the input (PALEO's
    counting, paleo-model.md §E.2).
    """
    from costs.rules import get_rules
    from planner.errors import BadInput

    net = catalog.load_net(net_name, rules)
    n = net.default_batch if batch is None else batch
    if n < 1:
        raise BadInput(f"--batch must be a positive integer, got {n}")
    r = get_rules(rules)
    rows = []
    for s in net.layers:
        w = layers.work(s, n, r)
        fwd = sum(w["fwd"].flops) if "fwd" in w else 0.0
        bwd = sum(sum(w[p].flops) for p in ("bwd_data", "bwd_filter") if p in w)
        rows.append(
            {
                "layer": s.name,
                "type": s.type,
                "output_shape": "x".join(str(d) for d in (n, *s.out_shape)),
                "params": layers.params(s),
                "forward_flops": int(round(fwd)),
                "backward_flops": int(round(bwd)),
                "activation_bytes": n * math.prod(s.out_shape) * 4,
            }
        )
    totals = {"net": net.name, "batch": n, **{k: sum(row[k] for row in rows) for k in TOTAL_KEYS}}
    totals["params_bytes"] = totals["params"] * 4
    return rows, totals
