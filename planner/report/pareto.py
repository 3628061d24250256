"""Pareto reports: the report's data is built by a pure function, then rendered.

:func:`report_data` turns the front's plan records, the evaluated plans' (time, cost,
feasible) arrays and the scaling curves into one JSON-serialisable dict; nothing else
computes. :func:`render_html` and :func:`render_markdown` only lay that dict out, with the SVG
charts of :mod:`planner.report.charts`. ``planner report RUN_DIR`` re-renders from the dict saved in
run.json.
"""

from __future__ import annotations

from html import escape

import numpy as np

from planner.report import charts, tornado
from planner.report.dominance import dominance, off_front
from planner.report.pareto_inputs import inputs_lines as _inputs_lines
from planner.report.pareto_table import cell as _cell
from planner.report.pareto_table import table_columns
from planner.report.text import attention_words
from planner.units import duration

CLOUD_CELLS = (120, 80)  # occupancy grid of the faint "every evaluated plan" layer

KINDS = {
    "budget-bound": "a budget binds",
    "memory-bound": "memory binds",
    "communication-bound": "communication dominates",
    "input-bound": "the data loader sets the pace",
    "compute-bound": "compute dominates",
}


def _pct(x: float) -> str:
    """A share as a percentage with enough digits to tell small ones from zero."""
    return f"{x:.0%}" if abs(x) >= 0.095 else f"{x:.1%}" if abs(x) >= 0.0095 else f"{x:.2%}"


def _describe(p: dict) -> str:
    mode = "data parallel" if p["parallel"] == "data" else f"hybrid from {p['split']}"
    if p.get("tp", 1) * p.get("pp", 1) > 1 or p.get("zero"):  # a transformer's degrees
        mode = f"TP {p['tp']} x PP {p['pp']} x DP {p['dp']}" + (
            f", ZeRO-{p['zero']}" if p.get("zero") else ""
        )
        mode += f", recompute {p['recompute']}" if p.get("recompute", "none") != "none" else ""
    return (
        f"{p['gpus']} x {p['gpu']} ({p['nodes']}x{p['gpus_per_node']}"
        + (f" {p['instance']}" if p.get("instance") else "")
        + f"), {p['batch_per_worker']}/GPU, "
        f"{mode}, {p['scheme']}, {p['precision']}"
        + (f", stack {p['stack']}" if p.get("stack") else "")
        + attention_words(p)
    )


def classify(p: dict) -> str:
    """compute-, communication-, input-, memory- or budget-bound (see :data:`KINDS`)."""
    binding = set(p.get("binding", []))
    # the loader first: a loader-bound plan also fills its GPU budget (each GPU brings its
    # host's share of the loader), and the loader is what a faster GPU cannot fix
    if p.get("input_ms", 0.0) >= 0.25 * p["iteration_ms"]:
        return "input-bound"
    if binding & {"budget_gpus", "budget_usd", "deadline", "owned_gpus", "gpu_cap"}:
        return "budget-bound"
    if "memory" in binding:
        return "memory-bound"
    return "communication-bound" if p["comm_ms"] >= 0.5 * p["iteration_ms"] else "compute-bound"


def _where(p: dict, i: int, front: list[dict]) -> str:
    """Where plan ``i`` sits on the front (sorted by time) against the plan before it: less money,
    or, on a time-cost-energy front, more money but less energy."""
    n = len(front)
    if n == 1:
        return "is the only Pareto-optimal plan"
    if i == 0:
        return "is the fastest plan"
    if i == n - 1:
        return "is the cheapest plan"
    q = front[i - 1]
    slower = _pct(p["time_to_train_s"] / q["time_to_train_s"] - 1)
    cheaper = 1 - p["cost_usd"] / q["cost_usd"]
    if cheaper > 0 or not p.get("energy_kwh") or not q.get("energy_kwh"):
        return f"takes {slower} longer than {q['label']} for {_pct(cheaper)} less money"
    saved = 1 - p["energy_kwh"] / q["energy_kwh"]
    return (
        f"takes {slower} longer than {q['label']} and costs {_pct(-cheaper)} more, "
        f"for {_pct(saved)} less energy"
    )


def _why(p: dict, i: int, front: list[dict]) -> str:
    """One sentence: where the plan sits on the front and what bounds it."""
    where = _where(p, i, front)
    kind = classify(p)
    it = p["iteration_ms"]
    if kind == "budget-bound":
        limits = [b for b in p["binding"] if b in ("budget_gpus", "budget_usd", "deadline", "owned_gpus")]
        text = {
            "budget_gpus": f"it uses the whole GPU budget ({p['gpus']} GPUs)",
            "owned_gpus": f"it uses every {p['gpu']} you own ({p['gpus']})",
            "budget_usd": "it spends up to the money budget",
            "deadline": "it finishes just within the deadline",
        }
        detail = " and ".join(text[b] for b in limits)
    elif kind == "memory-bound":
        detail = (
            f"it needs {p['memory_gb']:.1f} of {p['device_memory_gb']:.1f} GB ({p['device_memory_gb'] * 1e9 / 2**30:.0f} GiB) per GPU, "
            "so a larger batch per GPU would not fit"
        )
    elif kind == "input-bound":
        detail = (
            f"{p['input_ms'] / it:.0%} of its {it:,.1f} ms iteration waits on the data loader"
            + (
                f" ({p['loader']}: {p['loader_samples_s_per_gpu']:,.0f} images/s per GPU)"
                if p.get("loader")
                else ""
            )
            + ", so a faster GPU would not help"
        )
    elif kind == "communication-bound":
        link = p["network"] if p["nodes"] > 1 else p["intra_node_link"]
        detail = f"{p['comm_ms'] / it:.0%} of its {it:,.1f} ms iteration is the {p['scheme']} AllReduce over {link}"
    else:
        detail = f"{p['compute_ms'] / it:.0%} of its {it:,.1f} ms iteration is compute on the {p['gpu']}"
    return f"{p['label']} ({_describe(p)}) {where}; it is {kind}: {detail}."


def _cloud(time_h: np.ndarray, cost: np.ndarray, feasible: np.ndarray, axes: dict) -> dict:
    """Occupied cells of a log-log grid: every evaluated plan lands in a drawn cell."""
    nx, ny = CLOUD_CELLS
    ok = np.isfinite(time_h) & np.isfinite(cost) & (time_h > 0) & (cost > 0)
    lx = np.log10(axes["time_h"])
    ly = np.log10(axes["cost_usd"])
    ix = np.floor((np.log10(time_h[ok]) - lx[0]) / (lx[1] - lx[0]) * nx).astype(int)
    iy = np.floor((np.log10(cost[ok]) - ly[0]) / (ly[1] - ly[0]) * ny).astype(int)
    inside = (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny)
    out = {"nx": nx, "ny": ny, "counts": {}}
    for name, mask in (("feasible", feasible[ok]), ("infeasible", ~feasible[ok])):
        sel = inside & mask
        cells = np.unique(ix[sel] * ny + iy[sel])
        out[name] = [[int(c // ny), int(c % ny)] for c in cells]
        out["counts"][name] = int(mask.sum())
    out["counts"]["outside_axes"] = int((~inside).sum())
    return out


def _cost_axis(fc: np.ndarray) -> list[float]:
    """The log cost axis of the front chart; plans at no cost (owned GPUs) lie on its lower edge."""
    pos = fc[fc > 0]
    low = float(pos.min()) if pos.size else 0.01
    return [low / 1.25, float(max(fc.max() * 2.5, low * 4))]


def _goodput_text(p: dict) -> str:
    """A front plan's goodput as a percentage ('' for a record from before goodput was modelled)."""
    return f"{p['goodput']:.1%}" if "goodput" in p else ""


def report_data(
    *,
    net: str,
    objectives: list[str],
    front: list[dict],
    time_s: np.ndarray,
    cost_usd: np.ndarray,
    feasible: np.ndarray,
    scaling: dict,
    inputs: dict,
    search: dict,
    versions: dict,
    constraints: dict,
    rivals: list[dict] | None = None,
    energy: str = "",
) -> dict:
    """Everything the report shows, as plain data (pure: no I/O, no model evaluation)."""
    front = [dict(p) for p in front]
    for i, p in enumerate(front):
        p["label"] = f"P{i + 1}"
        p["description"] = _describe(p)
        p["time_text"] = duration(p["time_to_train_s"])
        p["goodput_text"] = _goodput_text(p)
        p["kind"] = classify(p)
        p["binding_text"] = ", ".join(p.get("binding") or []) or "none"
        p["instance_text"] = p.get("instance") or ("assumed host" if p.get("host") else "")
    for i, p in enumerate(front):
        p["why"] = _why(p, i, front)
    ft = np.array([p["time_to_train_s"] for p in front]) / 3600
    fc = np.array([p["cost_usd"] for p in front])
    t_h = np.asarray(time_s, dtype=float) / 3600
    cost = np.asarray(cost_usd, dtype=float)
    feasible = np.asarray(feasible, dtype=bool)
    # Axes frame the front and its neighbourhood; plans beyond are counted, not drawn.
    axes = {
        "time_h": [float(ft.min() / 1.6), float(max(ft.max() * 2.5, ft.min() * 10))],
        "cost_usd": _cost_axis(fc),
    }
    gpus = sorted({p["gpu"] for p in front})
    return {
        "title": f"Time vs cost of training {net}",
        "net": net,
        "objectives": list(objectives),
        "front": front,
        "axes": axes,
        "cloud": _cloud(t_h, cost, feasible, axes),
        "gpu_colors": charts.colors(gpus),
        "scaling": scaling,
        "kinds": {k: sum(p["kind"] == k for p in front) for k in KINDS},
        "inputs": inputs,
        "search": search,
        "versions": versions,
        "constraints": constraints,
        "evaluated": int(len(feasible)),
        "feasible": int(feasible.sum()),
        "dominance": dominance(front, rivals or []),
        "off_front": off_front(front, rivals or []),
        "energy": energy,
    }


CSS = """
body{font-family:Helvetica,Arial,sans-serif;margin:24px auto;max-width:980px;color:#222;line-height:1.4}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:12px;width:100%}th,td{border:1px solid #ddd;padding:4px 6px;text-align:right}
th{background:#f3f3f3}td:first-child,td:nth-child(2),td:nth-child(6),td:nth-child(7),td:nth-child(14),td:nth-child(15){text-align:left}
.chart{max-width:100%;height:auto;display:block;margin:8px 0}
.why li{margin:4px 0}.inputs td{text-align:left;vertical-align:top}.muted{color:#666;font-size:12px}
"""


def _modern(data: dict) -> bool:
    return data.get("inputs", {}).get("rules", "modern") == "modern"


def _time_note(data: dict) -> str:
    if _modern(data):
        return (
            "Per iteration (optimizer step). Communication is the part of the gradient AllReduce that the "
            "backward pass does not hide; overhead is time the GPU waits on the host (kernel launches, "
            "framework) or on the data loader."
        )
    return "Per iteration; communication is not overlapped with compute (PALEO's model)."


def _model_note(data: dict) -> str:
    if _modern(data):
        return (
            "Generated by planner with its modern cost model (per-layer roofline, overlapped hierarchical "
            "collectives), calibrated on published measurements; see `planner validate` for its error."
        )
    return "Generated by planner with the PALEO performance model (Qi, Sparks, Talwalkar, ICLR 2017)."


def render_html(data: dict) -> str:
    """One self-contained HTML file: inline CSS and SVG, no script, no external request."""
    f = data["front"]
    table = table_columns(data["front"])
    head = "".join(f"<th>{escape(h)}</th>" for _, h in table)
    rows = "".join(
        "<tr class='front-row'>" + "".join(f"<td>{escape(_cell(p, k))}</td>" for k, _ in table) + "</tr>"
        for p in f
    )
    why = "".join(f"<li>{escape(p['why'])}</li>" for p in f)
    inputs = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in _inputs_lines(data))
    cloud = data["cloud"]["counts"]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(data["title"])}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>
<body>
<h1>{escape(data["title"])}</h1>
<p>{len(f)} Pareto-optimal plans out of {data["evaluated"]:,} evaluated ({data["feasible"]:,} feasible).
Fastest: {escape(f[0]["description"])}, {escape(f[0]["time_text"])} for ${f[0]["cost_usd"]:,.2f}.
Cheapest: {escape(f[-1]["description"])}, {escape(f[-1]["time_text"])} for ${f[-1]["cost_usd"]:,.2f}.</p>
{_dominance_html(data)}
<h2>Pareto front</h2>
<p class="muted">Every evaluated plan is drawn faintly ({cloud["feasible"]:,} feasible in grey,
{cloud["infeasible"]:,} infeasible in red; {cloud["outside_axes"]:,} lie beyond the axes, far
from the front); hover a point for its plan.</p>
{charts.front_chart(data)}
<h2>Why each plan is on the front</h2>
<ul class="why">{why}</ul>
<h2>The front</h2>
<table id="front-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>
<h2>Where the time goes</h2>
<p class="muted">{escape(_time_note(data))}</p>
{charts.breakdown_chart(data)}
{tornado.html_section(data)}<h2>Scaling</h2>
<p class="muted">Throughput with N GPUs over one GPU, data parallel, same batch per GPU.</p>
{charts.scaling_chart(data)}
<h2>Inputs</h2>
<table class="inputs">{inputs}</table>
<p class="muted">{escape(_model_note(data))}</p>
</body></html>
"""


def _dominance_html(data: dict) -> str:
    html = f"<p class='dominance'>{escape(data['dominance'])}</p>" if data.get("dominance") else ""
    if data.get("off_front"):
        items = "".join(f"<li>{escape(x)}</li>" for x in data["off_front"])
        html += f"<h2>GPU types off the front</h2><ul class='off-front'>{items}</ul>"
    return html


def render_markdown(data: dict, chart_dir: str = "charts") -> str:
    """The same report for a terminal or a pull request; charts are SVG files beside it."""
    f = data["front"]
    lines = [f"# {data['title']}", ""]
    lines.append(
        f"{len(f)} Pareto-optimal plans out of {data['evaluated']:,} evaluated "
        f"({data['feasible']:,} feasible)."
    )
    if data.get("dominance"):
        lines += ["", data["dominance"]]
    if data.get("off_front"):
        lines += ["", "## GPU types off the front", "", *[f"- {x}" for x in data["off_front"]]]
    lines += [
        "",
        "## Pareto front",
        "",
        f"![Pareto front]({chart_dir}/front.svg)",
        "",
        "## Why each plan is on the front",
        "",
    ]
    lines += [f"- {p['why']}" for p in f]
    lines += ["", "## The front", ""]
    table = table_columns(f)
    lines.append("| " + " | ".join(h for _, h in table) + " |")
    lines.append("|" + "---|" * len(table))
    lines += ["| " + " | ".join(_cell(p, k).replace("|", "/") for k, _ in table) + " |" for p in f]
    lines += [
        "",
        "## Where the time goes",
        "",
        f"![Breakdown]({chart_dir}/breakdown.svg)",
        "",
        *tornado.markdown_lines(data, chart_dir),
        "## Scaling",
        "",
        f"![Scaling]({chart_dir}/scaling.svg)",
        "",
        "## Inputs",
        "",
    ]
    lines += [f"- **{k}**: {v}" for k, v in _inputs_lines(data)]
    return "\n".join(lines) + "\n"


def render_files(data: dict) -> dict[str, str]:
    """Every rendered file of a report folder, by relative path."""
    return {
        "report.html": render_html(data),
        "report.md": render_markdown(data),
        "charts/front.svg": charts.front_chart(data),
        "charts/breakdown.svg": charts.breakdown_chart(data),
        "charts/scaling.svg": charts.scaling_chart(data),
        **({"charts/tornado.svg": tornado.tornado_chart(data)} if tornado.rows_of(data) else {}),
    }
