"""The sensitivity (tornado) chart: the fastest plan's iteration time with each efficiency,
bandwidth and overhead moved by +-20% on its own. Pure function of the rows, inline SVG."""

from __future__ import annotations

from html import escape

from planner.report.charts import _svg

TITLE = "What the fastest plan hangs on"
NOTE = (
    "Iteration time of the fastest plan with each rate (compute, memory, links) or overhead 20% lower "
    "(left end) or higher (right end), the others held; the line is the prediction as it stands."
)


def rows_of(data: dict) -> list[dict]:
    """The fastest front plan's tornado rows that move its time at all."""
    rows = (data.get("front") or [{}])[0].get("sensitivity") or []
    return [r for r in rows if abs(r["plus_ms"] - r["minus_ms"]) > 1e-3 * r["base_ms"]]


def tornado_chart(data: dict) -> str:
    """Horizontal bars from the -20% time to the +20% time of each parameter, largest swing first."""
    rows = rows_of(data)
    bar, gap, ml, mr, mt = 18, 8, 210, 90, 20
    w, h = 760, max(170, mt + max(len(rows), 1) * (bar + gap) + 40)
    base = rows[0]["base_ms"] if rows else 1.0
    lo = min([base] + [min(r["minus_ms"], r["plus_ms"]) for r in rows])
    hi = max([base] + [max(r["minus_ms"], r["plus_ms"]) for r in rows])
    span = (hi - lo) or 1.0
    X = lambda v: ml + (v - lo) / span * (w - ml - mr)  # noqa: E731
    body = []
    for i, r in enumerate(rows):
        y = mt + i * (bar + gap)
        a, b = sorted((r["minus_ms"], r["plus_ms"]))
        tip = escape(f"{r['parameter']}: {r['minus_ms']:,.2f} ms at -20%, {r['plus_ms']:,.2f} ms at +20%")
        body.append(
            f"<text x='{ml - 8}' y='{y + bar / 2 + 4}' text-anchor='end'>{escape(r['parameter'])}</text>"
        )
        body.append(
            f"<rect class='swing' x='{X(a):.1f}' y='{y}' width='{max(X(b) - X(a), 1):.1f}' height='{bar}' "
            f"fill='#4c78a8'><title>{tip}</title></rect>"
        )
        body.append(f"<text x='{X(b) + 4:.1f}' y='{y + bar / 2 + 4}' fill='#555'>{a:,.1f}-{b:,.1f} ms</text>")
    y1 = mt + len(rows) * (bar + gap)
    body.append(f"<line x1='{X(base):.1f}' y1='{mt - 4}' x2='{X(base):.1f}' y2='{y1}' stroke='#222'/>")
    body.append(
        f"<text x='{X(base):.1f}' y='{y1 + 16}' text-anchor='middle'>{base:,.2f} ms per iteration</text>"
    )
    return _svg(w, h, body, "Sensitivity of the fastest plan's iteration time (tornado)")


def html_section(data: dict) -> str:
    if not rows_of(data):
        return ""
    return f'<h2>{TITLE}</h2>\n<p class="muted">{escape(NOTE)}</p>\n{tornado_chart(data)}\n'


def markdown_lines(data: dict, chart_dir: str) -> list[str]:
    if not rows_of(data):
        return []
    return [f"## {TITLE}", "", NOTE, "", f"![Sensitivity]({chart_dir}/tornado.svg)", ""]
