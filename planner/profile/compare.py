"""``planner profile --layers``: measured per-layer times beside the modern rules' prediction.

Rows: every layer (forward, backward, total; measured and predicted, in ms), the optimizer
step, and ``other``, the part of the measured step no layer mark covers (before the first
mark, between phases, after the last), against the predicted host overhead. Sorted by absolute
error. Shares per layer type class (convolution, matmul, norm, activation, pooling, attention,
optimizer, other) of the measured and the predicted step. The model counts an implied ReLU on
the layer it follows (:mod:`costs.modern.roofline`); when a BatchNorm comes between, the ReLU runs
after it and is measured in the BatchNorm's row. No torch here.
"""

from __future__ import annotations

from html import escape

from costs.specs.graph import Net

CATEGORIES = ("convolution", "matmul", "norm", "activation", "pooling", "attention", "optimizer", "other")
_CLASS = {
    "Convolution": "convolution",
    "Deconvolution": "convolution",
    "InnerProduct": "matmul",
    "Linear": "matmul",
    "LMHead": "matmul",
    "BatchedMatMul": "matmul",
    "MoE": "matmul",
    "BatchNorm": "norm",
    "LayerNorm": "norm",
    "RMSNorm": "norm",
    "Generic": "norm",  # the zoo's Generic layers are local response normalisation
    "ReLU": "activation",
    "Sigmoid": "activation",
    "Tanh": "activation",
    "GELU": "activation",
    "SwiGLU": "activation",
    "Pooling": "pooling",
    "AvgPool": "pooling",
    "UpSampling2D": "pooling",
    "Attention": "attention",
    "SeqSoftmax": "attention",
}


def category(layer_type: str) -> str:
    return _CLASS.get(layer_type, "other")


def _row(name, kind, cat, mf, mb, pf, pb) -> dict:
    """One row (ms); ``pf`` None: no prediction, so no predicted columns, error or ratio."""
    m = mf + mb
    row = {
        "layer": name,
        "type": kind,
        "category": cat,
        "measured_fwd_ms": mf * 1e3,
        "measured_bwd_ms": mb * 1e3,
        "measured_ms": m * 1e3,
    }
    if pf is None:
        return row | dict.fromkeys(
            ("predicted_fwd_ms", "predicted_bwd_ms", "predicted_ms", "error_ms", "ratio")
        )
    p = pf + pb
    return row | {
        "predicted_fwd_ms": pf * 1e3,
        "predicted_bwd_ms": pb * 1e3,
        "predicted_ms": p * 1e3,
        "error_ms": (p - m) * 1e3,
        "ratio": p / m if m > 0 else None,
    }


def _rows(net: Net, measured, predicted) -> list[dict]:
    has = predicted is not None
    rows = [
        _row(
            s.name,
            s.type,
            category(s.type),
            measured.forward[i],
            measured.backward[i],
            predicted.forward[i] if has else None,
            predicted.backward[i] if has else None,
        )
        for i, s in enumerate(net.layers)
    ]
    upd, over = (predicted.update, predicted.overhead) if has else (None, None)
    rows.append(_row("optimizer step", "", "optimizer", 0.0, measured.optimizer, upd and 0.0, upd))
    covered = float(measured.forward.sum() + measured.backward.sum()) + measured.optimizer
    other = max(measured.step - covered, 0.0)
    rows.append(_row("other (unattributed)", "", "other", other, 0.0, over, over and 0.0))
    key = "error_ms" if has else "measured_ms"
    rows.sort(key=lambda r: -abs(r[key]))
    return rows


def _total(rows: list[dict], key: str, cat: str | None = None) -> float:
    return sum(r[key] or 0.0 for r in rows if cat is None or r["category"] == cat)


def table(net: Net, measured, predicted) -> dict:
    """Rows and shares of one comparison (``measured``: hooks.LayerTimes; ``predicted``:
    predict.Prediction, or None when there is no catalog device to predict for)."""
    rows = _rows(net, measured, predicted)
    m_total, p_total = _total(rows, "measured_ms"), _total(rows, "predicted_ms")
    shares = []
    for cat in CATEGORIES:
        m, p = _total(rows, "measured_ms", cat), _total(rows, "predicted_ms", cat)
        shares.append(
            {
                "category": cat,
                "measured_ms": m,
                "measured_share": m / m_total if m_total else 0.0,
                "predicted_ms": p if predicted is not None else None,
                "predicted_share": (p / p_total if p_total else 0.0) if predicted is not None else None,
            }
        )
    covered = float(measured.forward.sum() + measured.backward.sum()) + measured.optimizer
    return {
        "rows": rows,
        "shares": shares,
        "measured_step_ms": measured.step * 1e3,
        "predicted_step_ms": p_total if predicted is not None else None,
        "layers_cover": (covered / measured.step) if measured.step else 0.0,
    }


ROW_COLUMNS = [
    ("layer", "layer"),
    ("type", "type"),
    ("category", "class"),
    ("measured_fwd_ms", "meas fwd ms"),
    ("measured_bwd_ms", "meas bwd ms"),
    ("measured_ms", "measured ms"),
    ("predicted_ms", "predicted ms"),
    ("error_ms", "error ms"),
    ("ratio", "pred/meas"),
]
SHARE_COLUMNS = [
    ("category", "class"),
    ("measured_ms", "measured ms"),
    ("measured_pct", "measured %"),
    ("predicted_ms", "predicted ms"),
    ("predicted_pct", "predicted %"),
]


def shares_for_text(shares: list[dict]) -> list[dict]:
    pct = lambda v: "" if v is None else 100 * v  # noqa: E731
    return [
        s | {"measured_pct": pct(s["measured_share"]), "predicted_pct": pct(s["predicted_share"])}
        for s in shares
    ]


def chart(data: dict, title: str) -> str:
    """An HTML page: paired horizontal bars (measured, predicted ms) per class and per layer
    (the 25 largest errors), plain SVG with a tooltip on each bar."""
    groups = [(s["category"], s["measured_ms"], s["predicted_ms"] or 0.0) for s in data["shares"]]
    layers = [(r["layer"], r["measured_ms"], r["predicted_ms"] or 0.0) for r in data["rows"][:25]]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>"
        + escape(title)
        + "</title></head><body style='font-family:sans-serif'><h1>"
        + escape(title)
        + "</h1><p>Blue: measured; orange: predicted by the modern rules (ms per step).</p><h2>By layer class</h2>"
        + _bars(groups)
        + "<h2>Layers with the largest absolute error</h2>"
        + _bars(layers)
        + "</body></html>\n"
    )


def _bars(items: list[tuple[str, float, float]]) -> str:
    bar, ml, pw = 9, 220, 520
    h = 20 + len(items) * (2 * bar + 8)
    top = max((max(m, p) for _, m, p in items), default=1.0) or 1.0
    body = []
    for k, (name, m, p) in enumerate(items):
        y = 10 + k * (2 * bar + 8)
        body.append(
            f"<text x='{ml - 6}' y='{y + bar + 3}' text-anchor='end' font-size='11'>{escape(name)}</text>"
        )
        for j, (v, color, what) in enumerate(((m, "#4c78a8", "measured"), (p, "#f58518", "predicted"))):
            body.append(
                f"<rect x='{ml}' y='{y + j * bar}' width='{v / top * pw:.1f}' height='{bar - 1}' fill='{color}'>"
                f"<title>{escape(name)} {what}: {v:,.3f} ms</title></rect>"
            )
        body.append(
            f"<text x='{ml + max(m, p) / top * pw + 4:.1f}' y='{y + bar + 3}' font-size='10'>{m:,.2f} / {p:,.2f}</text>"
        )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{ml + pw + 120}' height='{h}'>"
        + "".join(body)
        + "</svg>"
    )
