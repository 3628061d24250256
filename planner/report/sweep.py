"""`planner sweep collect`: summary.csv and a report comparing the cells of a sweep.

The report data is built by :func:`collect_data` (pure: it reads only the studies' stored
results); :func:`render_markdown` and :func:`render_html` lay it out.
"""

from __future__ import annotations

from html import escape

from planner.report import charts
from planner.result.records import PLAN_COLUMNS
from planner.units import duration

# objective -> (metric, pivot title) of the summary's pivot tables
PIVOTS = {
    "time": ("time_to_train_s", "Fastest plan per net and budget"),
    "cost": ("cost_usd", "Cheapest plan per net and budget"),
    "energy": ("energy_kwh", "Least-energy plan per net and budget"),
}


def _label(v) -> str:
    return "+".join(str(x) for x in v) if isinstance(v, list) else str(v)


def collect_data(name: str, statuses: list) -> dict:
    """Rows per cell (grid values, state, best plan) plus pivots and fronts for the report."""
    rows, fronts, missing = [], {}, []
    for st in statuses:
        cell = st.cell
        base = {
            "study": cell.study,
            **{k: _label(v) for k, v in cell.values.items()},
            "net": cell.request.net,
            "budget": "+".join(cell.request.budget) or "none",
            "objective": cell.request.objective,
            "state": st.state,
            "trials": st.complete,
        }
        if st.state != "done":
            missing.append(cell.study)
            rows.append(base)
            continue
        result = st.result
        if "infeasible" in result:
            rows.append({**base, "note": result["infeasible"]})
            continue
        best = result["best"]
        rows.append(
            {
                **base,
                **{k: best.get(k) for k in PLAN_COLUMNS},
                "front_size": len(result.get("pareto") or []) or None,
                "gap": result["search"].get("gap"),
            }
        )
        if result.get("pareto"):
            fronts.setdefault(cell.request.net, []).append(
                {"study": cell.study, "budget": base["budget"], "front": result["pareto"]}
            )
    pivots = {}
    for objective, (metric, _) in PIVOTS.items():
        table: dict[str, dict[str, dict]] = {}
        for r in rows:
            if r["objective"] == objective and r.get(metric) is not None:
                table.setdefault(r["net"], {})[r["budget"]] = r
        if table:
            pivots[objective] = table
    return {"name": name, "rows": rows, "pivots": pivots, "fronts": fronts, "missing": missing}


def _pivot(table: dict, metric: str) -> tuple[list[str], list[tuple[str, list]]]:
    """Budgets (columns) and, per net, the (value, plan) text of each cell (None if empty)."""
    budgets = sorted({b for per in table.values() for b in per})
    rows = []
    for net, per in table.items():
        cells = []
        for b in budgets:
            r = per.get(b)
            if r is None:
                cells.append(None)
                continue
            val = _value(metric, r[metric])
            cells.append((val, f"{r['gpus']} x {r['gpu']}"))
        rows.append((net, cells))
    return budgets, rows


def _value(metric: str, v: float) -> str:
    """A pivot cell's value: a duration, dollars or kWh."""
    if metric == "time_to_train_s":
        return duration(v)
    return f"{v:,.1f} kWh" if metric == "energy_kwh" else f"${v:,.2f}"


def _pivot_md(title: str, table: dict, metric: str) -> list[str]:
    budgets, rows = _pivot(table, metric)
    lines = [f"### {title}", "", "| net | " + " | ".join(budgets) + " |", "|---|" + "---|" * len(budgets)]
    for net, cells in rows:
        lines.append(f"| {net} | " + " | ".join(f"{c[0]} ({c[1]})" if c else "" for c in cells) + " |")
    return lines + [""]


def _study_cells(r: dict) -> list[str]:
    """study, state, trials, best plan, time to train, cost, energy: one row of the studies table."""
    if r.get("gpu"):
        plan = f"{r['gpus']} x {r['gpu']}, {r['batch_per_worker']}/GPU, {r['scheme']}"
        plan += f", stack {r['stack']}" if r.get("stack") else ""
        plan += f", {r['attention']} attention" if r.get("attention") else ""
    else:
        plan = r.get("note", "")
    t = duration(r["time_to_train_s"]) if r.get("time_to_train_s") is not None else ""
    c = f"${r['cost_usd']:,.2f}" if r.get("cost_usd") is not None else ""
    e = f"{r['energy_kwh']:,.1f} kWh" if r.get("energy_kwh") is not None else ""
    return [r["study"], r["state"], str(r["trials"]), plan, t, c, e]


def render_markdown(data: dict) -> str:
    lines = [f"# Sweep {data['name']}", ""]
    done = sum(r["state"] == "done" for r in data["rows"])
    lines.append(f"{done} of {len(data['rows'])} studies done.")
    if data["missing"]:
        lines.append(f"Not done yet: {', '.join(data['missing'])}.")
    lines.append("")
    for objective, (metric, title) in PIVOTS.items():
        if objective in data["pivots"]:
            lines += _pivot_md(title, data["pivots"][objective], metric)
    for net, studies in data["fronts"].items():
        lines += [f"### Pareto front of {net}", ""]
        for s in studies:
            lines.append(f"Budget {s['budget']}:")
            lines.append("")
            lines.append("| GPUs | GPU | batch/GPU | scheme | time to train | cost | energy |")
            lines.append("|---|---|---|---|---|---|---|")
            for p in s["front"]:
                kwh = "" if p.get("energy_kwh") is None else f"{p['energy_kwh']:,.1f} kWh"
                lines.append(
                    f"| {p['gpus']} | {p['gpu']} | {p['batch_per_worker']} | {p['scheme']} | "
                    f"{duration(p['time_to_train_s'])} | ${p['cost_usd']:,.2f} | {kwh} |"
                )
            lines.append("")
    lines += [
        "## All studies",
        "",
        "| study | state | trials | best plan | time to train | cost | energy |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        lines.append("| " + " | ".join(_study_cells(r)) + " |")
    return "\n".join(lines) + "\n"


def _front_svg(net: str, studies: list[dict]) -> str:
    """The fronts of one net's studies on one time-vs-cost chart, a colour per budget."""
    import numpy as np

    from planner.report.pareto import report_data

    front = sorted(
        ({**p, "gpu": s["budget"]} for s in studies for p in s["front"]), key=lambda p: p["time_to_train_s"]
    )
    data = report_data(
        net=net,
        objectives=["time", "cost"],
        front=front,
        time_s=np.array([p["time_to_train_s"] for p in front]),
        cost_usd=np.array([p["cost_usd"] for p in front]),
        feasible=np.zeros(len(front), dtype=bool),
        scaling={},
        inputs={},
        search={},
        versions={},
        constraints={},
    )
    data["cloud"] = {
        **data["cloud"],
        "feasible": [],
        "infeasible": [],
        "counts": {"feasible": 0, "infeasible": 0, "outside_axes": 0},
    }
    data.update(
        gpu_colors=charts.colors(sorted({s["budget"] for s in studies})), series=True, legend="budget"
    )
    return charts.front_chart(data, labels=False)


def render_html(data: dict) -> str:
    """Self-contained HTML: the Markdown's tables as HTML, and one front chart per net."""
    from planner.report.pareto import CSS

    body = [f"<h1>Sweep {escape(data['name'])}</h1>"]
    done = sum(r["state"] == "done" for r in data["rows"])
    body.append(f"<p>{done} of {len(data['rows'])} studies done.</p>")
    if data["missing"]:
        body.append(f"<p class='muted'>Not done yet: {escape(', '.join(data['missing']))}.</p>")

    def pivot(title, table, metric):
        budgets, rows = _pivot(table, metric)
        head = "".join(f"<th>{escape(b)}</th>" for b in budgets)
        trs = "".join(
            f"<tr><td>{escape(net)}</td>"
            + "".join(
                f"<td>{escape(c[0])}<br><span class='muted'>{escape(c[1])}</span></td>" if c else "<td></td>"
                for c in cells
            )
            + "</tr>"
            for net, cells in rows
        )
        return f"<h2>{escape(title)}</h2><table class='pivot'><tr><th>net</th>{head}</tr>{trs}</table>"

    for objective, (metric, title) in PIVOTS.items():
        if objective in data["pivots"]:
            body.append(pivot(title, data["pivots"][objective], metric))
    for net, studies in data["fronts"].items():
        body.append(f"<h2>Pareto front of {escape(net)}</h2>{_front_svg(net, studies)}")
    head = "".join(
        f"<th>{h}</th>" for h in ("study", "state", "trials", "best plan", "time to train", "cost", "energy")
    )
    rows = [
        "<tr>" + "".join(f"<td>{escape(x)}</td>" for x in _study_cells(r)) + "</tr>" for r in data["rows"]
    ]
    body.append(f"<h2>All studies</h2><table><tr>{head}</tr>{''.join(rows)}</table>")
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Sweep {escape(data['name'])}</title>"
        f"<style>{CSS} .pivot td,.pivot th{{text-align:left}}</style></head><body>{''.join(body)}</body></html>\n"
    )
