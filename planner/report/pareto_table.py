"""The columns of the Pareto front's table (HTML and Markdown reports): every plan's GPU, scale,
time, cost and energy; a transformer's also its parallel degrees, attention kernel, tokens/s and MFU."""

from __future__ import annotations

TABLE = [
    ("label", "plan"),
    ("gpu", "GPU"),
    ("gpus", "GPUs"),
    ("gpus_per_node", "per node"),
    ("instance_text", "instance"),
    ("batch_per_worker", "batch/GPU"),
    ("parallel", "parallel"),
    ("scheme", "scheme"),
    ("time_text", "time to train"),
    ("cost_usd", "cost ($)"),
    ("energy_kwh", "energy (kWh)"),
    ("co2_kg", "CO2 (kg)"),
    ("iteration_ms", "iteration (ms)"),
    ("memory_gb", "memory (GB)"),
    ("binding_text", "binding constraint"),
    ("kind", "bound by"),
]


# the terminal's table of `planner pareto` (the reports show TABLE)
CLI_COLUMNS = (
    ("label", "plan"),
    ("gpu", "gpu"),
    ("gpus", "gpus"),
    ("instance_text", "instance"),
    ("batch_per_worker", "batch/GPU"),
    ("scheme", "scheme"),
    ("time_text", "time to train"),
    ("goodput_text", "goodput"),
    ("cost_usd", "cost $"),
    ("energy_kwh", "kWh"),
    ("kind", "bound by"),
)

# a transformer's parallel degrees, recomputation, TP overlap and attention kernel (the terminal's table too)
LLM_COLUMNS = [("tp", "TP"), ("pp", "PP"), ("dp", "DP"), ("zero", "ZeRO"), ("recompute", "recompute")]
LLM_COLUMNS += [("tp_overlap", "TP overlap"), ("attention", "attention")]


def table_columns(front: list[dict]) -> list[tuple[str, str]]:
    """The front table's columns; a transformer's adds its parallel degrees and tokens/s."""
    if not front or "tokens_per_s" not in front[0]:
        return TABLE
    at = [k for k, _ in TABLE].index("scheme") + 1
    return [
        *[c for c in TABLE[:at] if c[0] != "parallel"],  # TP, PP, DP say how it is split
        *LLM_COLUMNS,
        *TABLE[at:-2],
        ("tokens_per_s", "tokens/s"),
        ("mfu", "MFU"),
        *TABLE[-2:],
    ]


def cell(p: dict, key: str) -> str:
    v = p.get(key)
    if isinstance(v, float):
        return f"{v:,.2f}"
    return "" if v is None else str(v)
