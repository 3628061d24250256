"""The "Inputs" table of a Pareto report: the command's inputs, the stack, prices and energy
parameters used, how the front was found and what was merged, and the versions."""

from __future__ import annotations


def _price_text(front: list[dict]) -> str:
    """The price per GPU-hour of each GPU type and node size on the front and where it comes from
    (a node size is priced by the instance that rents it: planner.hosts)."""
    seen = {}
    for p in front:
        key = (p["gpu"], p.get("price_source"))
        if p.get("usd_per_gpu_hour") is not None and key not in seen:
            seen[key] = f"{p['gpu']} ${p['usd_per_gpu_hour']:,.2f}/GPU-h ({p.get('price_source') or 'given'})"
    return "; ".join(seen.values())


def inputs_lines(data: dict) -> list[tuple[str, str]]:
    s = data["search"]
    req = {k: v for k, v in data["inputs"].items() if v not in (None, [], ())}
    rows = [("command inputs", ", ".join(f"{k}={v}" for k, v in req.items()))]
    stacks = sorted({p["stack"] for p in data["front"] if p.get("stack")})
    if stacks:
        from planner.stacks.listing import summary_line

        rows += [("stack", summary_line(n)) for n in stacks]
    prices = _price_text(data["front"])
    if prices:
        rows.append(("prices", prices))
    if data.get("energy"):
        rows.append(("energy", data["energy"]))
    rows += _search_rows(s, data)
    rows.append(("versions", ", ".join(f"{k} {v}" for k, v in data["versions"].items())))
    return rows


def _search_rows(s: dict, data: dict) -> list[tuple[str, str]]:
    """How the front was found, whether it is exact, and what was merged."""
    rows = []
    if s.get("method") == "enumeration":
        rows.append(
            (
                "search",
                f"exhaustive: every one of the {s['valid_plans']:,} valid plans (of {s['space_size']:,} "
                f"combinations) scored in {s['seconds']:.2f} s; no sampler (a space this small is "
                "enumerated outright)",
            )
        )
    else:
        rows.append(
            (
                "search",
                f"{s['sampler']}, seed {s['seed']}, {s['trials']} trials, "
                f"{s['evaluated_plans']:,} plans scored in {s['seconds']:.2f} s",
            )
        )
    if "exhaustive_front_size" in s and s.get("method") == "enumeration":
        rows.append(("certified", f"the exact front has {s['exhaustive_front_size']} plans"))
    elif "exhaustive_front_size" in s:
        rows.append(
            (
                "certified",
                f"the whole space was enumerated ({data['evaluated']:,} plans); the exact "
                f"front has {s['exhaustive_front_size']} plans, the search found "
                f"{s['front_found_by_search']} of them",
            )
        )
    if s.get("front_merged"):
        rows.append(
            (
                "merged",
                f"{s['front_merged']} plans within {s['front_tolerance']:.0%} of a listed plan on every "
                "objective are merged into it (its equivalents in run.json; trials.csv lists every plan)",
            )
        )
    return rows
