"""What a faster stack buys: with several stacks searched (``--stack any`` or a list), the best
plan of each stack, and how much slower and dearer each is than the winner's."""

from __future__ import annotations

from planner.result.records import plan_record
from planner.search.scored import ranked


def by_stack(scorer, pool, objectives) -> list[dict]:
    """The best feasible plan of each searched stack in ``pool``, best first ([] when one stack
    was searched): stack, GPUs, time to train, cost, and the ratios to the first."""
    names = scorer.space.choices("stack")
    if len(names) < 2:
        return []
    order = ranked(pool)
    seen: dict[int, int] = {}
    for j in order:
        s = int(pool.cols["stack"][j])
        seen.setdefault(s, int(j))
        if len(seen) == len(names):
            break
    out = []
    for s, j in seen.items():
        rec = plan_record(scorer, pool.cols, j, objectives)
        out.append(
            {
                "stack": names[s],
                "gpu": rec["gpu"],
                "gpus": rec["gpus"],
                "time_to_train_s": rec["time_to_train_s"],
                "cost_usd": rec["cost_usd"],
                "objective": rec["objective"],
            }
        )
    first = out[0] if out else None
    for r in out:
        r["slower"] = float(r["time_to_train_s"] / first["time_to_train_s"])
        both = r["cost_usd"] is not None and first["cost_usd"] is not None
        r["extra_usd"] = float(r["cost_usd"] - first["cost_usd"]) if both else None
    missing = [n for i, n in enumerate(names) if i not in seen]
    return out + [{"stack": n, "feasible": False} for n in missing if n not in {r["stack"] for r in out}]


def lines(stacks: list[dict]) -> list[str]:
    """The comparison in words ("megatron instead of pytorch: 1.8x faster, $41,000 less")."""
    if not stacks:
        return []
    from planner.units import duration

    best = stacks[0]
    out = ["", f"What the stack buys (best plan of each stack searched; {best['stack']} wins):"]
    for r in stacks:
        if not r.get("feasible", True):
            out.append(f"  - {r['stack']}: no feasible plan among those the search kept")
            continue
        cost = "" if r["cost_usd"] is None else f", ${r['cost_usd']:,.0f}"
        line = f"  - {r['stack']}: {r['gpus']} x {r['gpu']}, {duration(r['time_to_train_s'])}{cost}"
        if r is not best:
            line += f"; {best['stack']} instead: {r['slower']:.2f}x faster"
            line += (
                ""
                if r["extra_usd"] is None
                else f", ${abs(r['extra_usd']):,.0f} {'less' if r['extra_usd'] > 0 else 'more'}"
            )
        out.append(line)
    return out
