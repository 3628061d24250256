"""Why one GPU type holds a whole Pareto front, in a sentence computed from the numbers."""

from __future__ import annotations

from planner.units import duration


def _pct(x: float) -> str:
    return f"{x:.0%}" if abs(x) >= 0.095 else f"{x:.1%}"


def _more(x: float, base: float) -> str:
    """'25% more' than ``base``, or that ``base`` costs nothing (owned GPUs at no marginal price)."""
    return f"{_pct(x / base - 1)} more" if base > 0 else "more than the front's $0"


def _signed(x: float) -> str:
    return f"{x:+.0%}" if abs(x) >= 0.095 else f"{x:+.1%}"


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
        f"at least ${r['cheap_usd']:,.2f} ({_more(r['cheap_usd'], cheap['cost_usd'])} per sample "
        f"trained); so every {r['gpu']} plan is matched or beaten on both time and cost by one on {gpu}."
    )


def off_front(front: list[dict], rivals: list[dict]) -> list[str]:
    """Per GPU type with no plan on the front, one sentence: its fastest plan (GPUs, instance),
    against the front's plan nearest in time, and whether the data loader sets its pace."""
    out = []
    for r in sorted(rivals, key=lambda x: x["fast_s"]):
        q = min(front, key=lambda p: abs(p["time_to_train_s"] - r["fast_s"]))
        where = f" on {r['fast_instance']}" if r.get("fast_instance") else " on an assumed host"
        share = r.get("fast_input_share", 0.0)
        loader = (
            f"; its data loader binds ({_pct(share)} of its iteration waits on it)" if share >= 0.005 else ""
        )
        dt = r["fast_s"] / q["time_to_train_s"] - 1
        money = (
            f"{_signed(r['fast_usd'] / q['cost_usd'] - 1)} money" if q.get("cost_usd") else "money against $0"
        )
        out.append(
            f"{r['gpu']} is off the front: its fastest plan, {r.get('fast_gpus', '?')} GPUs{where}, takes "
            f"{duration(r['fast_s'])} for ${r['fast_usd']:,.2f}, against {q.get('label', 'the front')}'s "
            f"{duration(q['time_to_train_s'])} for ${q['cost_usd']:,.2f} ({_signed(dt)} time, {money})"
            f"{loader}."
        )
    return out
