"""Why one GPU type holds a whole Pareto front, in a sentence computed from the numbers."""

from __future__ import annotations

from planner.units import duration


def _pct(x: float) -> str:
    return f"{x:.0%}" if abs(x) >= 0.095 else f"{x:.1%}"


def dominance(front: list[dict], rivals: list[dict]) -> str:
    """When one GPU type holds the whole front, why, from the numbers: how its fastest and cheapest
    plans compare with those of the runner-up type. ``rivals``: per other GPU type its fastest
    feasible plan's (time_s, cost_usd) and its cheapest's, as dicts with keys gpu, fast_s,
    fast_usd, cheap_s, cheap_usd. Empty when the front has several types or no rival was scored."""
    types = {p["gpu"] for p in front}
    if len(types) != 1 or not rivals:
        return ""
    gpu = types.pop()
    fast, cheap = front[0], min(front, key=lambda p: p["cost_usd"])
    # the runner-up: the type whose fastest plan is closest in time
    r = min(rivals, key=lambda x: x["fast_s"])
    return (
        f"{gpu} dominates: its fastest plan takes {duration(fast['time_to_train_s'])} for "
        f"${fast['cost_usd']:,.2f} and its cheapest costs ${cheap['cost_usd']:,.2f}, while the next type, "
        f"{r['gpu']}, takes at best {duration(r['fast_s'])} "
        f"({_pct(r['fast_s'] / fast['time_to_train_s'] - 1)} longer, for ${r['fast_usd']:,.2f}) and costs "
        f"at least ${r['cheap_usd']:,.2f} ({_pct(r['cheap_usd'] / cheap['cost_usd'] - 1)} more per sample "
        f"trained); so every {r['gpu']} plan is matched or beaten on both time and cost by one on {gpu}."
    )
