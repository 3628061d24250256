"""Prediction error against measured runs, as data first, then text, Markdown and HTML.

:func:`error_data` is a pure function of the runs, their predictions and (optionally) the
held-out predictions; the renderers only format it. The HTML page is self-contained (inline
SVG, no script), like the Pareto report.
"""

from __future__ import annotations

import math
from html import escape

import numpy as np

from costs.fit import calibration as cal
from planner.report import charts, render


def _row(run, predicted: float) -> dict:
    err = (predicted / run.samples_per_s - 1.0) * 100.0
    return {
        "row": run.row,
        "source": run.source,
        "net": run.net,
        "device": run.device,
        "precision": run.precision,
        "gpus": run.gpus,
        "batch_per_gpu": run.batch_per_gpu,
        "measured": run.samples_per_s,
        "predicted": float(predicted),
        "error_pct": float(err),
    }


def error_data(runs, predicted: np.ndarray, title: str, worst: int = 10) -> dict:
    """Per-source and overall median / p90 APE and bias, the worst rows, and the scatter points.

    ``predicted`` is samples/s per run; errors are (predicted - measured) / measured.
    """
    measured = np.array([r.samples_per_s for r in runs])
    logr = np.log(np.asarray(predicted, dtype=float) / measured)
    sources = list(dict.fromkeys(r.source for r in runs))
    labels = np.array([r.source for r in runs], dtype=object)
    per_source = [{"source": s, **cal.summary(logr[labels == s])} for s in sources]
    order = np.argsort(-np.abs(logr))[:worst]
    rows = [_row(r, p) for r, p in zip(runs, predicted)]
    return {
        "title": title,
        "overall": cal.summary(logr),
        "sources": per_source,
        "worst": [rows[i] for i in order],
        "points": rows,
    }


def _fmt(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.1f}%"


def table_rows(data: dict) -> list[list[str]]:
    """The per-source table: source, runs, median APE, p90 APE, bias; then all sources."""
    out = [
        [s["source"], str(s["n"]), _fmt(s["median_ape"]), _fmt(s["p90_ape"]), _bias(s["bias"])]
        for s in data["sources"]
    ]
    o = data["overall"]
    out.append(["all sources", str(o["n"]), _fmt(o["median_ape"]), _fmt(o["p90_ape"]), _bias(o["bias"])])
    return out


def _bias(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:+.1f}%"


HEAD = ["source", "runs", "median APE", "p90 APE", "bias"]
WORST_HEAD = [
    "row",
    "source",
    "net",
    "device",
    "precision",
    "GPUs",
    "batch/GPU",
    "measured/s",
    "predicted/s",
    "error",
]


def _worst_cells(r: dict) -> list[str]:
    return [
        str(r["row"]),
        r["source"],
        r["net"],
        r["device"],
        r["precision"],
        str(r["gpus"]),
        str(r["batch_per_gpu"]),
        f"{r['measured']:,.0f}",
        f"{r['predicted']:,.0f}",
        f"{r['error_pct']:+.0f}%",
    ]


def text_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """Aligned text lines of string cells (the project's one table renderer)."""
    return render.table([dict(zip(head, r)) for r in rows], [(h, h) for h in head]).splitlines()


def render_text(data: dict) -> str:
    """The terminal view: the per-source table and the worst rows."""
    lines = [data["title"], ""]
    lines += text_table(HEAD, table_rows(data))
    lines += ["", "Worst rows (prediction vs measurement):"]
    lines += text_table(WORST_HEAD, [_worst_cells(r) for r in data["worst"]])
    return "\n".join(lines) + "\n"


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def render_markdown(data: dict, chart: str = "charts/scatter.svg") -> str:
    lines = [f"# {data['title']}", "", f"![predicted vs measured]({chart})", ""]
    lines += _md_table(HEAD, table_rows(data))
    lines += ["", "## Worst rows", ""]
    lines += _md_table(WORST_HEAD, [_worst_cells(r) for r in data["worst"]])
    return "\n".join(lines) + "\n"


def scatter_chart(data: dict) -> str:
    """Predicted vs measured samples/s, log-log, one colour per source, with y = x and +-25%."""
    w, h, ml, mr, mt, mb = 760, 520, 70, 230, 20, 50
    pw, ph = w - ml - mr, h - mt - mb
    pts = data["points"]
    vals = [p["measured"] for p in pts] + [p["predicted"] for p in pts]
    lo, hi = min(vals) / 1.3, max(vals) * 1.3
    l0, l1 = math.log10(lo), math.log10(hi)
    X = lambda v: ml + (math.log10(v) - l0) / (l1 - l0) * pw  # noqa: E731
    Y = lambda v: mt + ph - (math.log10(v) - l0) / (l1 - l0) * ph  # noqa: E731
    body = [f"<rect x='{ml}' y='{mt}' width='{pw}' height='{ph}' fill='#fafafa' stroke='#ccc'/>"]
    for v in charts._ticks(lo, hi):
        body.append(f"<line x1='{X(v):.1f}' y1='{mt}' x2='{X(v):.1f}' y2='{mt + ph}' stroke='#eee'/>")
        body.append(f"<text x='{X(v):.1f}' y='{mt + ph + 15}' text-anchor='middle'>{charts._num(v)}</text>")
        body.append(f"<line x1='{ml}' y1='{Y(v):.1f}' x2='{ml + pw}' y2='{Y(v):.1f}' stroke='#eee'/>")
        body.append(f"<text x='{ml - 6}' y='{Y(v) + 4:.1f}' text-anchor='end'>{charts._num(v)}</text>")
    for f, dash in ((1.0, ""), (1.25, " stroke-dasharray='4 3'"), (0.8, " stroke-dasharray='4 3'")):
        body.append(
            f"<line x1='{X(lo):.1f}' y1='{Y(lo * f):.1f}' x2='{X(hi / f if f > 1 else hi):.1f}' "
            f"y2='{Y(hi if f > 1 else hi * f):.1f}' stroke='#888'{dash}/>"
        )
    body.append(f"<text x='{ml + pw / 2}' y='{h - 10}' text-anchor='middle'>measured samples/s (log)</text>")
    body.append(
        f"<text transform='translate(14 {mt + ph / 2}) rotate(-90)' text-anchor='middle'>predicted samples/s (log)</text>"
    )
    col = charts.colors([s["source"] for s in data["sources"]])
    for p in pts:
        tip = escape(
            f"{p['source']} row {p['row']}: {p['net']} on {p['gpus']} x {p['device']} {p['precision']}, "
            f"batch {p['batch_per_gpu']}: measured {p['measured']:,.0f}/s, predicted {p['predicted']:,.0f}/s "
            f"({p['error_pct']:+.0f}%)"
        )
        body.append(
            f"<circle cx='{X(p['measured']):.1f}' cy='{Y(p['predicted']):.1f}' r='3.5' fill='{col[p['source']]}' "
            f"fill-opacity='0.8'><title>{tip}</title></circle>"
        )
    for i, s in enumerate(data["sources"][:30]):
        y = mt + 10 + i * 15
        body.append(f"<circle cx='{ml + pw + 14}' cy='{y}' r='4' fill='{col[s['source']]}'/>")
        body.append(f"<text x='{ml + pw + 22}' y='{y + 4}'>{escape(s['source'][:30])}</text>")
    return charts._svg(w, h, body, "predicted vs measured samples per second, log-log")


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def render_html(data: dict) -> str:
    style = (
        "body{font-family:Helvetica,Arial,sans-serif;margin:2em;max-width:1000px}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ddd;padding:3px 8px;"
        "text-align:right;white-space:nowrap}td:first-child,th:first-child{text-align:left}"
        ".note{color:#555}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(data['title'])}</title>"
        f"<style>{style}</style></head><body><h1>{escape(data['title'])}</h1>"
        f"{scatter_chart(data)}<p class='note'>Solid line: prediction = measurement; dashed: "
        "prediction 25% above or 20% below. Hover a point for its run.</p>"
        f"<h2>Error per source</h2>{_html_table(HEAD, table_rows(data))}"
        f"<h2>Worst rows</h2>{_html_table(WORST_HEAD, [_worst_cells(r) for r in data['worst']])}"
        "</body></html>\n"
    )
