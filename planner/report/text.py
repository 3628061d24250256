"""The terminal report of `planner optimize`: the Result's plain data laid out as text."""

from __future__ import annotations

from planner.report.render import table
from planner.result.stacks import lines as stack_lines
from planner.space.axes import HEADERS, OPTIONS
from planner.units import duration

# record keys the plan's description already puts in words (_parallel, the transformer line)
_WORDED = set("tp pp cp cp_comm zero sp ep interleave pp_schedule tp_overlap ep_overlap".split())


def _set_axes(result) -> list[str]:
    """Record keys of the declared axes whose option the request set (e.g. accumulation), but
    those the description words already (a target's search pins them: ep 1, cp 1, ...)."""
    keys = [f.key for a in OPTIONS if a.name in result.request for f in a.fields]
    return [k for k in keys if k not in _WORDED]


def _parallel(b: dict) -> str:
    """How the plan is parallel, in words."""
    cp = b.get("cp", 1)
    if "tp" in b and b["tp"] * b["pp"] * cp > 1 or b.get("zero"):
        ctx = f" x CP {cp}" if cp > 1 else ""
        parts = [f"TP {b['tp']}{ctx} x PP {b['pp']} x DP {b['dp']}"]
        parts += [f"context parallel over {cp} GPUs ({b.get('cp_comm', 'p2p')})"] if cp > 1 else []
        parts += [f"ZeRO-{b['zero']}"] if b.get("zero") else []
        parts += ["sequence parallel"] if b.get("sp") == "on" else []
        parts += [f"EP {b['ep']}"] if b.get("ep", 1) > 1 else []
        parts += [f"{b['interleave']} virtual stages"] if b.get("interleave", 1) > 1 else []
        parts += ["TP communication overlapped"] if b.get("tp_overlap") == "on" else []
        parts += ["expert all-to-alls overlapped"] if b.get("ep_overlap") == "on" else []
        names = {"zb1p": "zero-bubble ZB1P", "dualpipe": "DualPipe", "dualpipev": "DualPipeV"}
        parts += [f"{names[b['pp_schedule']]} schedule"] if b.get("pp_schedule", "1f1b") != "1f1b" else []
        return ", ".join(parts)
    return "data parallel" if b["parallel"] == "data" else f"hybrid (model parallel from {b['split']})"


def _transformer_lines(b: dict) -> list[str]:
    """Tokens, MFU, the pipeline and the recomputation of a transformer plan."""
    if "tokens_per_s" not in b:
        return []
    per_gpu = b.get("tokens_per_s_per_gpu", b["tokens_per_s"] / b["gpus"])
    line = (
        f"  {per_gpu:,.0f} tokens/s per GPU ({b['tokens_per_s']:,.0f} in all, {b['seq_len']:,} per sequence)"
    )
    if "mfu" in b:
        peak = f"the {b['precision']} peak" if b.get("precision") in ("fp8", "fp32", "tf32") else "peak"
        line += f"   MFU {b['mfu']:.1%} of {peak} (hardware FLOPs {b['hfu']:.1%}, with recomputation)"
    line += f"   recomputation {b['recompute']}, microbatch {b['batch_per_worker']} x {b['accumulation']} per step"
    if b.get("pp", 1) > 1:
        line += f", pipeline bubble {b['bubble_ms']:,.1f} ms"
    return [line + attention_words(b)]


def attention_words(b: dict) -> str:
    """', flash attention (the net spec's)': the attention kernel a transformer's record is costed
    with and whose choice it is (``--attention; not the net spec's``); '' for other nets."""
    if "attention" not in b:
        return ""
    override = b.get("attention_source") == "--attention"
    whose = "--attention; not the net spec's" if override else "the net spec's"
    return f", {b['attention']} attention ({whose})"


def tokens(n: float) -> str:
    """1.5e13 -> '15T', 4194304 -> '4.19M': a token count in the units people write."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


def _batch_words(b: dict) -> str:
    """The plan's batch: per GPU and global, in sequences and tokens for a transformer."""
    if "global_batch_tokens" not in b:
        return f"{b['batch_per_worker']} samples per GPU (global batch {b['global_batch']:,})"
    source = f" ({b['global_batch_source']})" if b.get("global_batch_source") else ""
    return (
        f"global batch {b['global_batch']:,} sequences = {tokens(b['global_batch_tokens'])} tokens per step"
        f"{source}"
    )


def _time_words(b: dict) -> str:
    """Time to train, stating the tokens it covers (or the unit it is per) for a transformer."""
    span = f"{duration(b['time_to_train_s'])}{_range(b, 'time_to_train_s')}"
    if "training_tokens" not in b:
        epochs = f" for {b['epochs']:g} epochs ({b['epochs_basis']})" if "epochs" in b else ""
        return f"time to train {span}{epochs}"
    if b.get("per_token_unit"):
        return (
            f"time per {tokens(b['training_tokens'])} tokens {span} (no training length known: set --tokens)"
        )
    return f"time to train {span} for {tokens(b['training_tokens'])} tokens ({b['tokens_basis']})"


def _best_lines(result) -> list[str]:
    b = result.best
    inside = f"{b['nodes']} node{'s' if b['nodes'] > 1 else ''} x {b['gpus_per_node']}"
    split = _parallel(b)
    cost = "n/a (no price)" if b["cost_usd"] is None else f"${b['cost_usd']:,.2f}"
    return [
        f"Best plan for {result.net} (minimising {', '.join(result.objectives)}):",
        f"  {b['gpus']} x {b['gpu']}  ({inside}; {b['intra_node_link']} inside a node, "
        f"{b['network']} between nodes)",
        f"  {split}, {_batch_words(b)}, "
        f"{b['scheme']} AllReduce, {b['precision']}" + "".join(f", {k} {b[k]}" for k in _set_axes(result)),
        f"  {_time_words(b)}   {_gpu_hours(b)}cost {cost}   "
        f"iteration {b['iteration_ms']:,.2f} ms{_range(b, 'iteration_ms')}   {b['throughput_samples_s']:,.0f} samples/s   "
        f"memory {b['memory_gb']:.1f} of {b['device_memory_gb']:.1f} GB ({b['device_memory_gb'] * 1e9 / 2**30:.0f} GiB)"
        + (f", {b['usable_memory_gb']:.1f} usable (--memory-headroom)" if "usable_memory_gb" in b else ""),
        *_goodput_lines(b),
        *_transformer_lines(b),
        *_stack_line(b),
        *_price_line(b),
        *_host_line(b),
        *_energy_line(b, result),
        f"  per iteration: forward {b['forward_ms']:,.2f} ms, backward {b['backward_ms']:,.2f} ms, "
        f"update {b['update_ms']:,.2f} ms, communication {b['comm_ms']:,.2f} ms"
        + (f", overhead {b['overhead_ms']:,.2f} ms" if b.get("overhead_ms") else ""),
        "",
        "Why it wins:",
        *[f"  - {w}" for w in b["why"]],
        *_deadline_risk(b, result),
        *_confidence_lines(b),
        *(
            [""] + ["Its parallel degrees, each against its neighbours (same GPUs):"]
            if b.get("degrees")
            else []
        ),
        *[f"  - {w}" for w in b.get("degrees") or []],
        *_sensitivity_lines(b),
        *stack_lines(b.get("stacks") or []),
    ]


def _goodput_lines(b: dict) -> list[str]:
    """What the time to train includes: goodput, the expected loss and the checkpoint interval."""
    if "goodput" not in b:
        return []
    if not b["goodput_on"]:
        return [f"  {b['goodput_basis']}"]
    every = duration(b["ckpt_interval_s"]) if b.get("ckpt_interval_s") else "never"
    if b["lost_hours"] * 3600 < 1e-3 * b["useful_time_s"]:  # a small run: say so in a few words
        return [
            f"  goodput {b['goodput']:.1%}: failures, checkpoints and restarts cost under 0.1% of this run "
            f"({b['failures']:.2g} failures expected)",
            f"  goodput basis: {b['goodput_basis']}",
        ]
    return [
        f"  goodput {b['goodput']:.1%}: time, GPU-hours, cost and energy include an expected "
        f"{duration(b['lost_hours'] * 3600)} lost to {b['failures']:,.1f} failures, checkpoints and restarts "
        f"(failure-free: {duration(b['useful_time_s'])}, {b['useful_gpu_hours']:,.0f} GPU-hours); "
        f"a checkpoint every {every} of training (Daly 2006), each written in {b['ckpt_write_s']:,.1f} s",
        f"  goodput basis: {b['goodput_basis']}",
    ]


def _deadline_risk(b: dict, result) -> list[str]:
    """A deadline the prediction meets but its 80% interval does not: say so, with the upper end."""
    deadline = (getattr(result, "constraints", None) or {}).get("deadline_s")
    r = b.get("time_to_train_s_range")
    if not deadline or not r or r[1] <= deadline:
        return []
    return [
        f"  - Risk: it meets the deadline ({duration(deadline)}) at the prediction, but its 80% interval "
        f"reaches {duration(r[1])}; a plan that meets it at the interval's upper end needs a tighter --deadline."
    ]


def _gpu_hours(b: dict) -> str:
    """GPU-hours of a transformer plan (what model cards and budgets count), else nothing."""
    return f"{b['gpu_hours']:,.0f} GPU-hours   " if "training_tokens" in b and "gpu_hours" in b else ""


def _stack_line(b: dict) -> list[str]:
    """The stack the plan is for: what it is fitted on, its error, and what it lacks."""
    if not b.get("stack"):
        return []
    from planner.stacks.listing import summary_line

    return [f"  {summary_line(b['stack'], transformer='tokens_per_s' in b)}"]


def _price_line(b: dict) -> list[str]:
    """Which price per GPU-hour the cost uses, and where it comes from."""
    if b.get("usd_per_gpu_hour") is None or not b.get("price_source"):
        return []
    return [f"  price ${b['usd_per_gpu_hour']:,.2f} per GPU-hour ({b['price_source']})"]


def _host_line(b: dict) -> list[str]:
    """The host the plan runs on (its instance, or the assumed one) and its data loader."""
    out = [f"  host: {b['host']}"] if b.get("host") else []
    if b.get("fabric") or b.get("gpus", 1) > b.get("gpus_per_node", 1):  # the network between nodes
        from planner.fabrics import network_lines

        out += [
            f"  {line}" for line in network_lines(b.get("fabric"), b.get("rank_order"), b.get("pp", 1) > 1)
        ]
    if b.get("loader_samples_s_per_gpu") is not None:
        out.append(f"  data loader: {b['loader']}: {b['loader_samples_s_per_gpu']:,.0f} images/s per GPU")
    if b.get("image_phases"):  # a resizing schedule (planner.resizing)
        phases = ", ".join(
            f"{p['image_size']} px for {p['fraction']:.1%} of the epochs at {p['iteration_ms']:,.2f} ms"
            for p in b["image_phases"]
        )
        out.append(f"  progressive resizing {b['image_size']}: {phases}; the iteration is their mean")
    return out


def _energy_line(b: dict, result) -> list[str]:
    """Energy at the meter and CO2 of the plan, and the parameters they use."""
    if b.get("energy_kwh") is None:
        return []
    return [
        f"  energy {b['energy_kwh']:,.2f} kWh, {b['co2_kg']:,.2f} kg CO2"
        + (f" ({result.energy})" if getattr(result, "energy", "") else "")
    ]


def _sensitivity_lines(b: dict, top: int = 4) -> list[str]:
    """The parameters the iteration time hangs on most, as a small text tornado."""
    rows = [r for r in b.get("sensitivity") or [] if abs(r["plus_ms"] - r["minus_ms"]) > 1e-3 * r["base_ms"]]
    if not rows:
        return []
    width = max(len(r["parameter"]) for r in rows[:top])
    span = max(abs(r["plus_ms"] - r["minus_ms"]) for r in rows[:top])
    out = ["", "What it hangs on (iteration time with each rate or overhead 20% lower / higher):"]
    for r in rows[:top]:
        bar = "#" * max(1, round(20 * abs(r["plus_ms"] - r["minus_ms"]) / span))
        out.append(f"  {r['parameter']:<{width}}  {r['minus_ms']:>9,.2f} / {r['plus_ms']:<9,.2f} ms  {bar}")
    return out


def _range(b: dict, key: str) -> str:
    """' (lo-hi, 80%)' from the calibration's interval, when the model has one."""
    r = b.get(f"{key}_range")
    if not r:
        return ""
    label = "80%" + (" in-sample" if b.get("interval_kind") == "in-sample" else "")
    if "no --stack" in b.get("interval_basis", ""):
        label += ", any stack"
    if key == "iteration_ms":
        return f" ({r[0]:,.1f}-{r[1]:,.1f} ms, {label})"
    return f" ({duration(r[0])} to {duration(r[1])}, {label})"


def _hw(b: dict) -> str:
    return f"{b['gpus']} x {b['gpu']}"


def _error_kind(b: dict) -> str:
    """'in-sample ' where the profile was fitted without leave-one-source-out, else ''."""
    return "in-sample " if b.get("interval_kind") == "in-sample" else ""


def _confidence_lines(b: dict) -> list[str]:
    c = b.get("confidence")
    if not c:
        return []
    head = (
        f"How sure: {_hw(b)} stays the best choice in {c['best_win']:.0%} of {c['draws']} draws of the efficiencies "
        f"within the calibration's {_error_kind(b)}error (each GPU type's compute off by a factor, sd {c['sd_log']:.2f} in log"
        + (
            f"; {c['sd_log_unseen']:.2f} for a GPU generation the fit has no run of"
            if c.get("sd_log_unseen")
            else ""
        )
        + (
            f"; the data loader's rate off by a factor, sd {c['sd_log_loader']:.2f}"
            if c.get("sd_log_loader")
            else ""
        )
        + ")"
    )
    rival = c["rival"]
    if rival and rival["win"] > 0:
        head += f"; the strongest rival, {rival['gpus']} x {rival['gpu']}, wins {rival['win']:.0%}"
    lines = [f"  - {head}."]
    if c.get("uncalibrated"):
        lines.append(
            f"  - No published run of a {c['uncalibrated']} GPU is in the calibration: its prediction rests on the "
            "cited datasheet efficiencies alone, and carries the error measured on generations a fit had not "
            "seen (its interval and the draws above)."
        )
        alt = c.get("calibrated_alternative")
        if alt:
            lines.append(
                f"  - The best choice on a GPU the calibration has runs of: {alt['gpus']} x {alt['gpu']}, "
                f"at {alt['ratio']:.2f}x the answer's {c.get('objective', 'objective')}."
            )
    if not c["clear"]:
        lines.append(
            "  - The top plans cannot be told apart within the model's error: compare the next best below, "
            "or calibrate on your own runs (planner calibrate)."
        )
    return lines


def _alternatives_lines(result) -> list[str]:
    """The next best plans (one objective) or the Pareto front, as a table: the declared axes'
    compact columns, then time, cost and iteration time."""
    if not result.alternatives:
        return []
    plans = [result.best] + result.alternatives if result.pareto else result.alternatives
    alts = [
        dict(
            a,
            time_to_train=duration(a["time_to_train_s"]),
            cost="-" if a["cost_usd"] is None else f"${a['cost_usd']:,.2f}",
            energy="-" if a.get("energy_kwh") is None else f"{a['energy_kwh']:,.1f}",
        )
        for a in plans
    ]
    cols = [
        *_shown_headers(plans),
        ("time_to_train", "time to train"),
        ("cost", "cost"),
        ("energy", "kWh"),
        ("iteration_ms", "iter ms"),
    ]
    head = ["", "Pareto front:" if result.pareto else "Next best:"]
    return head + ["  " + x for x in table(alts, cols, 2).splitlines()]


def _shown_headers(plans: list[dict]) -> list[tuple[str, str]]:
    """The axes' compact columns, without the model-parallel ones when every plan is plain data
    parallel (a CNN's)."""
    neutral = {"tp": 1, "pp": 1, "zero": 0, "recompute": "none", "tp_overlap": "off"}
    split = any(a.get("tp", 1) * a.get("pp", 1) > 1 for a in plans)
    # a column every plan holds at its neutral value says nothing
    hidden = {k for k, v in neutral.items() if all(a.get(k, v) == v for a in plans)}
    # a transformer's plans are split by their TP, PP and DP columns: the CNN "parallel" column
    # (data or hybrid) would read "data" for every one of them
    llm = any("tokens_per_s" in a for a in plans)
    hidden |= set() if split or llm else {"dp"}
    hidden |= {"parallel"} if llm else set()
    hidden |= set() if len({a.get("stack") for a in plans}) > 1 else {"stack"}
    return [(k, h) for k, h in HEADERS if k not in hidden]


def _search_line(s: dict) -> str:
    if s.get("method") == "enumeration":
        exact = (
            "the answer is the exact optimum"
            if "exhaustive_optimum" in s
            else f"the exact front has {s['exhaustive_front_size']} plans"
            if "exhaustive_front_size" in s
            else "exact"
        )
        return (
            f"Search: exhaustive: every one of the {s['valid_plans']:,} valid plans "
            f"(of {s['space_size']:,} combinations) scored in {s['seconds']:.2f} s; {exact} "
            "(no sampler: a space this small is enumerated outright)."
        )
    certified = ""
    if s.get("gap") is not None:
        certified = (
            f"; exhaustive optimum over {s['exhaustive_plans']:,} plans: the search was "
            f"{s['gap']:.2%} from it"
        )
    elif "exhaustive_optimum" in s:
        certified = (
            f"; the search found no feasible plan, the enumeration of {s['exhaustive_plans']:,} "
            "plans did (the answer is its optimum)"
        )
    elif "exhaustive_front_size" in s:
        certified = (
            f"; the exact front (exhaustive) has {s['exhaustive_front_size']} plans, "
            f"the search found {s['front_found_by_search']} of them"
        )
    return (
        f"Search: {s['sampler']} seed {s['seed']}, {s['trials']} trials, "
        f"{s['evaluated_plans']:,} plans scored in {s['seconds']:.2f} s{certified}."
    )


def optimize_text(result, saved) -> str:
    """The terminal report of `planner optimize`."""
    lines = _best_lines(result) + _alternatives_lines(result)
    lines += ["", _search_line(result.search), f"Reproduce: {result.best['estimate_command']}"]
    if saved:
        lines.append(f"Saved: {saved}/run.json")
    return "\n".join(lines)
