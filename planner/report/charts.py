"""SVG charts for reports: pure functions from report data to self-contained SVG text.

No JavaScript and no external resources: every chart is plain SVG with <title> elements, so
a browser shows a tooltip naming each plan on hover, and the file works offline and in
Markdown viewers alike.
"""

from __future__ import annotations

import math
from html import escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
)
PHASE_COLORS = {
    "forward": "#4c78a8",
    "backward": "#72b7b2",
    "update": "#eeca3b",
    "communication": "#e45756",
    "overhead": "#b0b0b0",
}
SCHEME_COLORS = {"onetoall": "#e45756", "tree": "#4c78a8", "butterfly": "#54a24b", "ring": "#b279a2"}


def scheme_color(name: str) -> str:
    """A scheme's colour; a scheme registered later in costs.comm.schemes gets one of the palette."""
    return SCHEME_COLORS.get(name) or PALETTE[sum(map(ord, name)) % len(PALETTE)]


FONT = "font-family='Helvetica,Arial,sans-serif' font-size='11'"


def colors(names: list[str]) -> dict[str, str]:
    """A stable colour per name."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _ticks(lo: float, hi: float) -> list[float]:
    """Log-scale ticks at 1, 2 and 5 times powers of ten within [lo, hi]."""
    out = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if lo <= v <= hi:
                out.append(v)
    if len(out) > 8:
        out = [v for v in out if str(v).lstrip("0.").startswith("1")] or out
    return out


def _num(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 1:
        return f"{v:g}"
    return f"{v:.2g}"


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' class='chart' role='img' aria-label='{escape(label)}' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}' {FONT}>"
        f"<rect width='{width}' height='{height}' fill='white'/>" + "".join(body) + "</svg>"
    )


FRONT_SIZE = (760, 460)  # width, height of the front chart
FRONT_MARGINS = (70, 170, 20, 50)  # left, right (legend), top, bottom


class _Frame:
    """The front chart's plot area and its log-log scales."""

    def __init__(self, axes: dict):
        w, h = FRONT_SIZE
        self.ml, mr, self.mt, mb = FRONT_MARGINS
        self.pw, self.ph = w - self.ml - mr, h - self.mt - mb
        self.lx = math.log10(axes["time_h"][0]), math.log10(axes["time_h"][1])
        self.ly = math.log10(axes["cost_usd"][0]), math.log10(axes["cost_usd"][1])

    def x(self, v: float) -> float:
        return self.ml + (math.log10(v) - self.lx[0]) / (self.lx[1] - self.lx[0]) * self.pw

    def y(self, v: float) -> float:
        # a plan at no cost (GPUs owned at no marginal price) sits on the bottom edge
        lv = math.log10(v) if v > 0 else self.ly[0]
        return self.mt + self.ph - (lv - self.ly[0]) / (self.ly[1] - self.ly[0]) * self.ph


def _front_grid(f: _Frame, ax: dict) -> list[str]:
    """Plot area, log ticks and axis titles."""
    ml, mt, pw, ph = f.ml, f.mt, f.pw, f.ph
    body = [f"<rect x='{ml}' y='{mt}' width='{pw}' height='{ph}' fill='#fafafa' stroke='#ccc'/>"]
    for v in _ticks(*ax["time_h"]):
        x = f.x(v)
        body.append(f"<line x1='{x:.1f}' y1='{mt}' x2='{x:.1f}' y2='{mt + ph}' stroke='#eee'/>")
        body.append(f"<text x='{x:.1f}' y='{mt + ph + 15}' text-anchor='middle'>{_num(v)}</text>")
    for v in _ticks(*ax["cost_usd"]):
        y = f.y(v)
        body.append(f"<line x1='{ml}' y1='{y:.1f}' x2='{ml + pw}' y2='{y:.1f}' stroke='#eee'/>")
        body.append(f"<text x='{ml - 6}' y='{y + 4:.1f}' text-anchor='end'>${_num(v)}</text>")
    body.append(
        f"<text x='{ml + pw / 2}' y='{FRONT_SIZE[1] - 10}' text-anchor='middle'>time to train (hours, log scale)</text>"
    )
    body.append(
        f"<text transform='translate(14 {mt + ph / 2}) rotate(-90)' text-anchor='middle'>cost (USD, log scale)</text>"
    )
    return body


def _front_cloud(f: _Frame, cloud: dict) -> list[str]:
    """Every evaluated plan as faint occupied cells, infeasible below feasible."""
    cw, ch = f.pw / cloud["nx"], f.ph / cloud["ny"]
    body = []
    for layer, fill, op in (("infeasible", "#f4a6a6", 0.35), ("feasible", "#9aa5b1", 0.45)):
        if not cloud[layer]:
            continue
        cells = "".join(
            f"<rect x='{f.ml + i * cw:.1f}' y='{f.mt + f.ph - (j + 1) * ch:.1f}' width='{cw:.1f}' height='{ch:.1f}'/>"
            for i, j in cloud[layer]
        )
        body.append(
            f"<g class='cloud-{layer}' fill='{fill}' fill-opacity='{op}'><title>{cloud['counts'][layer]:,} "
            f"{layer} plans evaluated</title>{cells}</g>"
        )
    return body


def _front_lines(data: dict, pts: list[tuple[float, float]]) -> list[str]:
    """Dashed lines joining the front's points: one per colour with ``series``, else one."""
    front, gpu_color = data["front"], data["gpu_colors"]
    body = []
    for g in list(gpu_color) if data.get("series") else [None]:
        line = [xy for p, xy in zip(front, pts, strict=True) if g is None or p["gpu"] == g]
        if len(line) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in line)
            stroke = "#333" if g is None else gpu_color[g]
            body.append(
                f"<polyline points='{path}' fill='none' stroke='{stroke}' stroke-width='1.2' "
                "stroke-dasharray='4 3'/>"
            )
    return body


def _front_marks(data: dict, pts: list[tuple[float, float]], labels: bool) -> str:
    """The front's points with a tooltip each, labelled P1, P2 ... when ``labels``."""
    marks = []
    for n, (p, (x, y)) in enumerate(zip(data["front"], pts, strict=True)):
        dy = -9 if n % 2 == 0 else 17  # alternate above and below: neighbours rarely collide
        tip = escape(f"{p['label']}: {p['description']} - {p['time_text']}, ${p['cost_usd']:,.2f}")
        label = f"<text x='{x + 5:.1f}' y='{y + dy:.1f}' font-weight='bold'>{escape(p['label'])}</text>"
        marks.append(
            f"<g class='front-point'><title>{tip}</title><circle cx='{x:.1f}' cy='{y:.1f}' r='6' "
            f"fill='{data['gpu_colors'][p['gpu']]}' stroke='#222'/>" + (label if labels else "") + "</g>"
        )
    return "<g class='front'>" + "".join(marks) + "</g>"


def _front_legend(f: _Frame, data: dict) -> list[str]:
    """Colour legend, and the cloud's two swatches when there is a cloud."""
    x0, ly = f.ml + f.pw, f.mt + 10
    body = [f"<text x='{x0 + 15}' y='{ly}' font-weight='bold'>{escape(data.get('legend', 'GPU'))}</text>"]
    for name, color in data["gpu_colors"].items():
        ly += 18
        body.append(
            f"<circle cx='{x0 + 20}' cy='{ly - 4}' r='5' fill='{color}' stroke='#222'/>"
            f"<text x='{x0 + 30}' y='{ly}'>{escape(name)}</text>"
        )
    counts = data["cloud"]["counts"]
    if not counts.get("feasible") and not counts.get("infeasible"):
        return body
    for step, fill, text in ((26, "#9aa5b1", "feasible plans"), (18, "#f4a6a6", "infeasible plans")):
        ly += step
        body.append(
            f"<rect x='{x0 + 15}' y='{ly - 9}' width='10' height='10' fill='{fill}'/>"
            f"<text x='{x0 + 30}' y='{ly}'>{text}</text>"
        )
    return body


def front_chart(data: dict, labels: bool = True) -> str:
    """Time vs cost, log-log: every evaluated plan as faint cells, the front on top.

    Points are coloured by ``p['gpu']`` (the keys of ``data['gpu_colors']``), and one dashed
    line joins the points of each colour when ``data.get('series')`` is set, else all of them.
    """
    f = _Frame(data["axes"])
    pts = [(f.x(p["time_to_train_s"] / 3600), f.y(p["cost_usd"])) for p in data["front"]]
    body = _front_grid(f, data["axes"]) + _front_cloud(f, data["cloud"]) + _front_lines(data, pts)
    body.append(_front_marks(data, pts, labels))
    body += _front_legend(f, data)
    return _svg(*FRONT_SIZE, body, "Pareto front: time to train vs cost")


def breakdown_chart(data: dict) -> str:
    """Stacked horizontal bars: where each front plan's iteration time goes (ms)."""
    front = data["front"]
    bar, gap, ml, mr, mt = 20, 8, 70, 80, 30  # right margin: room for the total label
    w = 760
    h = max(mt + len(front) * (bar + gap) + 50, 160)  # a one-plan front still gets a readable panel
    pw = w - ml - mr
    parts = [
        ("forward", "forward_ms"),
        ("backward", "backward_ms"),
        ("update", "update_ms"),
        ("communication", "comm_ms"),
        ("overhead", "overhead_ms"),  # host-bound stall, framework time, input wait (modern rules)
    ]
    top = max(sum(p.get(k, 0.0) for _, k in parts) for p in front) or 1.0
    body = []
    for i, name in enumerate(PHASE_COLORS):
        body.append(
            f"<rect x='{ml + i * 125}' y='6' width='10' height='10' fill='{PHASE_COLORS[name]}'/>"
            f"<text x='{ml + i * 125 + 14}' y='15'>{name}</text>"
        )
    for r, p in enumerate(front):
        y = mt + r * (bar + gap)
        body.append(
            f"<text x='{ml - 6}' y='{y + bar / 2 + 4}' text-anchor='end' font-weight='bold'>{escape(p['label'])}</text>"
        )
        x = ml
        for name, key in parts:
            width = p.get(key, 0.0) / top * pw
            if width <= 0:
                continue
            tip = escape(f"{p['label']} {name}: {p[key]:,.2f} ms ({p[key] / p['iteration_ms']:.0%})")
            body.append(
                f"<rect class='segment' x='{x:.1f}' y='{y}' width='{width:.1f}' height='{bar}' "
                f"fill='{PHASE_COLORS[name]}'><title>{tip}</title></rect>"
            )
            x += width
        body.append(
            f"<text x='{x + 4:.1f}' y='{y + bar / 2 + 4}' fill='#555'>{p['iteration_ms']:,.1f} ms</text>"
        )
    body.append(
        f"<text x='{ml + pw / 2}' y='{h - 12}' text-anchor='middle'>milliseconds per iteration</text>"
    )
    return _svg(w, h, body, "Iteration time breakdown of the front's plans")


def _scaling_panel(gpu: str, c: dict, ox: float, oy: float, pw: int, ph: int) -> list[str]:
    """One GPU type's panel: speedup per scheme against GPU count, log-log, origin (ox, oy)."""
    body = []
    kmax = max(k for pts in c["schemes"].values() for k, _ in pts)
    speedups = [s for pts in c["schemes"].values() for _, s in pts if s > 0]
    # log-log: ideal (linear) scaling is the diagonal; speedups below 1/16 sit on the floor
    lo = max(min(speedups + [1.0]), 1 / 16)
    hi = max(speedups + [float(kmax), 2.0])
    span = math.log2(hi) - math.log2(lo)
    X = lambda k, kmax=kmax, ox=ox: ox + (math.log2(k) / max(math.log2(kmax), 1)) * pw
    Y = lambda v, lo=lo, span=span, oy=oy: oy + ph - (math.log2(max(v, lo)) - math.log2(lo)) / span * ph
    body.append(
        f"<text x='{ox}' y='{oy - 10}' font-weight='bold'>{escape(gpu)} "
        f"(batch {c['batch_per_worker']} per GPU, {c['per_node']} GPUs per node)</text>"
    )
    body.append(
        f"<rect class='panel' x='{ox}' y='{oy}' width='{pw}' height='{ph}' fill='#fafafa' stroke='#ccc'/>"
    )
    step = 4 if kmax > 64 else 2
    k = 1
    while k <= kmax:
        body.append(f"<text x='{X(k):.1f}' y='{oy + ph + 14}' text-anchor='middle'>{k}</text>")
        k *= step
    v = 2 ** math.ceil(math.log2(lo))
    while v <= hi:
        body.append(f"<text x='{ox - 5}' y='{Y(v) + 4:.1f}' text-anchor='end'>{_num(v)}</text>")
        v *= step
    body.append(
        f"<line x1='{X(1):.1f}' y1='{Y(1):.1f}' x2='{X(kmax):.1f}' y2='{Y(kmax):.1f}' "
        "stroke='#999' stroke-dasharray='3 3'/>"
    )
    for scheme, pts in c["schemes"].items():
        path = " ".join(f"{X(k):.1f},{Y(s):.1f}" for k, s in pts)
        tip = escape(f"{gpu}, {scheme}: " + ", ".join(f"{k} GPUs {s:.1f}x" for k, s in pts))
        body.append(
            f"<polyline class='curve' points='{path}' fill='none' stroke='{scheme_color(scheme)}' "
            f"stroke-width='2'><title>{tip}</title></polyline>"
        )
    body.append(f"<text x='{ox + pw / 2}' y='{oy + ph + 30}' text-anchor='middle'>GPUs</text>")
    body.append(
        f"<text transform='translate({ox - 32} {oy + ph / 2}) rotate(-90)' text-anchor='middle'>speedup</text>"
    )
    return body


def scaling_chart(data: dict) -> str:
    """Speedup against GPU count per AllReduce scheme, one panel per GPU type of the front
    (log-log axes, so linear scaling is the dashed diagonal)."""
    curves = data["scaling"]
    names = list(curves)
    cols = min(3, len(names)) or 1
    rows = math.ceil(len(names) / cols) or 1
    pw, ph, ml, mt = 220, 170, 45, 40
    w = max(cols * (pw + ml + 20) + 10, 520)  # room for the legend over a single panel
    h = rows * (ph + mt + 40) + 30
    body = []
    # the legend names the schemes the curves use (a transformer's space searches NCCL's ring only)
    schemes = dict.fromkeys(s for c in curves.values() for s in c["schemes"])
    for i, name in enumerate(schemes):
        body.append(
            f"<rect x='{10 + i * 110}' y='6' width='10' height='10' fill='{scheme_color(name)}'/>"
            f"<text x='{24 + i * 110}' y='15'>{name}</text>"
        )
    body.append(
        "<line x1='460' y1='11' x2='490' y2='11' stroke='#999' stroke-dasharray='3 3'/>"
        "<text x='494' y='15'>linear</text>"
    )
    for n, gpu in enumerate(names):
        ox = 10 + (n % cols) * (pw + ml + 20) + ml
        oy = 30 + (n // cols) * (ph + mt + 40) + mt
        body += _scaling_panel(gpu, curves[gpu], ox, oy, pw, ph)
    return _svg(w, h, body, "Speedup against GPU count per AllReduce scheme")
