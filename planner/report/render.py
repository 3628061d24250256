"""Plain renderers for lists of records: aligned text tables, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json

from planner.units import duration


def _fmt(value, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def table(records: list[dict], columns: list[tuple[str, str]], digits: int = 3) -> str:
    """An aligned text table of ``records``; ``columns`` are (key, header) pairs."""
    rows = [[h for _, h in columns]]
    rows += [[_fmt(r.get(k, ""), digits) for k, _ in columns] for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = []
    for j, row in enumerate(rows):
        cells = [c.ljust(w) if j == 0 or not _numeric(c) else c.rjust(w) for c, w in zip(row, widths)]
        lines.append("  ".join(cells).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _numeric(cell: str) -> bool:
    return cell.replace(",", "").replace(".", "").replace("-", "").replace("e", "").isdigit()


def to_csv(records: list[dict], columns: list[str] | None = None) -> str:
    """CSV with a header row; columns default to the keys of the first record."""
    if not records:
        return ""
    columns = columns or list(records[0])
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow(r)
    return buf.getvalue()


def to_json(obj) -> str:
    return json.dumps(obj, indent=2)


def optimize_text(result, saved) -> str:
    """The terminal report of `planner optimize`."""
    b = result.best
    lines = []
    inside = f"{b['nodes']} node{'s' if b['nodes'] > 1 else ''} x {b['gpus_per_node']}"
    split = "data parallel" if b["parallel"] == "data" else f"hybrid (model parallel from {b['split']})"
    goal = ", ".join(result.objectives)
    lines.append(f"Best plan for {result.net} (minimising {goal}):")
    lines.append(
        f"  {b['gpus']} x {b['gpu']}  ({inside}; {b['intra_node_link']} inside a node, "
        f"{b['network']} between nodes)"
    )
    lines.append(
        f"  {split}, {b['batch_per_worker']} samples per GPU (global batch {b['global_batch']:,}), "
        f"{b['scheme']} AllReduce, {b['precision']}"
    )
    cost = "n/a (no price)" if b["cost_usd"] is None else f"${b['cost_usd']:,.2f}"
    lines.append(
        f"  time to train {duration(b['time_to_train_s'])}   cost {cost}   "
        f"iteration {b['iteration_ms']:,.2f} ms   {b['throughput_samples_s']:,.0f} samples/s   "
        f"memory {b['memory_gb']:.1f} of {b['device_memory_gb']:.0f} GB"
    )
    lines.append(
        f"  per iteration: forward {b['forward_ms']:,.2f} ms, backward {b['backward_ms']:,.2f} ms, "
        f"update {b['update_ms']:,.2f} ms, communication {b['comm_ms']:,.2f} ms"
    )
    lines.append("")
    lines.append("Why it wins:")
    lines += [f"  - {w}" for w in b["why"]]
    if result.alternatives:
        lines.append("")
        lines.append("Pareto front:" if result.pareto else "Next best:")
        alts = [
            dict(
                a,
                time_to_train=duration(a["time_to_train_s"]),
                cost="-" if a["cost_usd"] is None else f"${a['cost_usd']:,.2f}",
            )
            for a in ([b] + result.alternatives if result.pareto else result.alternatives)
        ]
        cols = [
            ("gpu", "gpu"),
            ("gpus", "gpus"),
            ("gpus_per_node", "per node"),
            ("batch_per_worker", "batch/GPU"),
            ("parallel", "parallel"),
            ("scheme", "scheme"),
            ("time_to_train", "time to train"),
            ("cost", "cost"),
            ("iteration_ms", "iter ms"),
        ]
        lines += ["  " + x for x in table(alts, cols, 2).splitlines()]
    s = result.search
    lines.append("")
    certified = ""
    if "gap" in s and s["gap"] is not None:
        certified = (
            f"; exhaustive optimum over {s['exhaustive_plans']:,} plans: the search was "
            f"{s['gap']:.2%} from it"
        )
    elif "exhaustive_front_size" in s:
        certified = (
            f"; the exact front (exhaustive) has {s['exhaustive_front_size']} plans, "
            f"the search found {s['front_found_by_search']} of them"
        )
    lines.append(
        f"Search: {s['sampler']} seed {s['seed']}, {s['trials']} trials, "
        f"{s['evaluated_plans']:,} plans scored in {s['seconds']:.2f} s{certified}."
    )
    lines.append(f"Reproduce: {b['estimate_command']}")
    if saved:
        lines.append(f"Saved: {saved}/run.json")
    return "\n".join(lines)
