"""Why a plan wins, how it scales, and why nothing is feasible: sentences for the Result."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search.scored import INVALID, Scored
from planner.units import duration


def explain(best: dict, baseline: dict) -> list[str]:
    """Sentences saying where the time goes, what binds, and how it scales."""
    it = best["iteration_ms"]
    comp, comm = best["compute_ms"] / it, best["comm_ms"] / it
    inp = best.get("input_ms", 0.0) / it
    other = best.get("overhead_ms", 0.0) / it - inp
    kind = "input-bound" if inp >= 0.25 else "compute-bound" if comp >= 0.5 else "communication-bound"
    link = best["network"] if best["nodes"] > 1 else best["intra_node_link"]
    lines = [
        f"{kind}: {comp:.0%} of each {it:,.1f} ms iteration is compute "
        f"(forward {best['forward_ms'] / it:.0%}, backward {best['backward_ms'] / it:.0%}, "
        f"update {best['update_ms'] / it:.0%}), {comm:.0%} is communication "
        f"({best['scheme']} AllReduce over {link})"
        + (f", {other:.0%} waits on the host (kernel launches, framework)" if other >= 0.005 else "")
        + (f", {inp:.0%} waits on the data loader" if inp >= 0.005 else "")
        + "."
    ]
    if inp >= 0.005:
        lines.append(
            f"the data loader binds: {best['global_batch'] / (it / 1e3) / best['gpus']:,.0f} samples/s per GPU "
            f"({best.get('loader', 'the data loader')}; --cpu-cores-per-gpu or --instance change the host, "
            "--data-loader dali decodes on the GPUs, --data-loader none assumes data already decoded)."
        )
    reasons = {
        "budget_gpus": f"the GPU budget binds: it uses {best['gpus']} GPUs",
        "owned_gpus": f"the GPUs you own bind: it uses all {best['gpus']} {best['gpu']}",
        "budget_usd": "the money budget binds",
        "deadline": "the deadline binds",
        "memory": f"memory binds: {best['memory_gb']:.1f} of {best['device_memory_gb']:.1f} GB ({best['device_memory_gb'] * 1e9 / 2**30:.0f} GiB) per GPU"
        + (
            f" ({best['usable_memory_gb']:.1f} GB usable: --memory-headroom)"
            if "usable_memory_gb" in best
            else ""
        ),
        "gpu_cap": f"the search's GPU cap binds: it uses {best['gpus']} GPUs, the most a search bounded only "
        "by money or a deadline tries (add a GPU budget, e.g. --budget 256gpus, to search more)",
        "max_global_batch": f"the maximum global batch binds ({best['global_batch']:,} samples)",
        "min_global_batch": f"the minimum global batch binds ({best['global_batch']:,} samples)",
    }
    binding = [reasons[b] for b in best["binding"] if b in reasons]
    lines.append(
        "; ".join(binding) + "."
        if binding
        else "no constraint binds: more GPUs or a larger batch would not make it better."
    )
    if best.get("tp", 1) * best.get("pp", 1) == 1 and not best.get("zero"):  # one GPU holds the model
        lines.append(
            f"{baseline['speedup']:.1f}x the throughput of one {best['gpu']} at the same batch per GPU "
            f"(scaling efficiency {baseline['efficiency']:.0%})."
        )
    return lines


def baseline(scorer: Scorer, cols, i) -> dict:
    """The same plan on one GPU, data parallel, same batch per GPU: speedup and efficiency."""
    sp = scorer.space
    one = {a: c[i : i + 1].copy() for a, c in cols.items()}
    m_best = scorer.metrics(one)
    one["gpus"][:] = sp.choices("gpus").index(1)
    one["per_node"][:] = sp.choices("per_node").index(1)
    one["split"][:] = sp.choices("split").index(sp.n_layers)
    for axis, plain in (
        ("tp", 1),
        ("pp", 1),
        ("ep", 1),
        ("cp", 1),
        ("interleave", 1),
        ("pp_schedule", "1f1b"),
        ("sp", "off"),
        ("zero", 0),
    ):
        if axis in one and plain in sp.choices(axis):
            one[axis][:] = sp.choices(axis).index(plain)
    m1 = scorer.metrics(one)
    speedup = float(m_best["throughput_samples_s"][0] / m1["throughput_samples_s"][0])
    return {
        "gpu": sp.choices("gpu")[int(one["gpu"][0])],
        "iteration_ms": float(m1["iteration_s"][0] * 1e3),
        "throughput_samples_s": float(m1["throughput_samples_s"][0]),
        "speedup": speedup,
        "efficiency": speedup / float(m_best["gpus"][0]),
    }


def _states(scorer: Scorer) -> str:
    """Transformers: the model states against the memory of the most GPUs allowed (bf16 mixed
    precision: 2 + 2 + 4 master, or 2 + 4 + 4 where the stack keeps fp32 gradients, plus the
    optimizer's states; costs.llm.memory)."""
    if scorer.space.llm is None:
        return ""
    from costs.llm.memory import state_bytes

    info = scorer.model.stack_info if scorer.model is not None else None
    fp32_grads = info is not None and info.gradients == "fp32"
    per = float(state_bytes(1.0, 2.0, scorer.optimizer, np.array(0), 1, fp32_grads))
    params = scorer.costs.total_params
    gpus = int(max(scorer.space.choices("gpus")))
    mem = float(scorer.devices.memory_bytes.max())
    return (
        f"{params / 1e9:,.1f} B parameters x {per:.0f} bytes ({scorer.optimizer}: weights, gradients, "
        f"optimizer states) = {params * per / 1e12:,.2f} TB against {gpus} x {mem / 2**30:,.0f} GiB = "
        f"{gpus * mem / 1e12:,.2f} TB; "
    )


def _why_none(name: str, lim, sel: dict, scorer: Scorer) -> str:
    """The message when constraint ``name`` rules out every plan (``sel``: the plans meeting
    every other constraint, their metrics)."""
    messages = {
        "memory": lambda: (
            f"no plan fits: {_states(scorer)}the smallest plan needs "
            f"{sel['memory_bytes'].min() / 1e9:.1f} GB per GPU, the "
            f"largest GPU allowed has {scorer.devices.memory_bytes.max() / 2**30:.0f} GiB "
            f"({lim.memory_fraction:.0%} usable)"
        ),
        "budget_usd": lambda: (
            f"no plan costs ${lim.max_usd:,.2f} or less: the cheapest costs ${np.nanmin(sel['cost_usd']):,.2f}"
        ),
        "deadline": lambda: (
            f"no plan finishes within {duration(lim.deadline_s)}: the fastest takes "
            f"{duration(float(np.nanmin(sel['time_to_train_s'])))}"
        ),
        "max_global_batch": lambda: (
            f"no plan keeps the global batch at or below {lim.max_global_batch:,}: "
            f"the smallest is {sel['global_batch'].min():,}"
        ),
        "min_global_batch": lambda: (
            f"no plan reaches a global batch of {lim.min_global_batch:,}: "
            f"the largest is {sel['global_batch'].max():,}"
        ),
        "supported": lambda: "no allowed GPU has a peak for the requested precision in the catalog",
        "budget_gpus": lambda: f"no plan uses {lim.max_gpus} GPUs or fewer",
        "owned_gpus": lambda: "no plan uses at most the GPUs you own (--owned)",
    }
    return messages[name]()


def _extremes(old: dict | None, m: dict) -> dict:
    """Lowest and highest value of every numeric metric (NaN-propagating and NaN-ignoring),
    merged with ``old``: what the messages of :func:`_why_none` read, in four values a metric."""
    out = {}
    for k, v in m.items():
        v = np.asarray(v)
        if v.dtype.kind not in "biuf" or v.size == 0:
            continue
        v = v if old is None or k not in old else np.concatenate([old[k], v])
        out[k] = np.array([v.min(), v.max(), np.fmin.reduce(v), np.fmax.reduce(v)])
    return out


def diagnose(scorer: Scorer, parts: Iterable[Scored]) -> str:
    """Why nothing is feasible: the constraint that rules out every plan the others allow.

    For each constraint, the plans meeting all the *other* constraints are examined; if there
    are some and every one breaks this constraint, it is the one that rules everything out, and
    the message says by how much its best plan misses. ``parts``: the plans, in one or more
    parts (a streamed space), reduced as they come.
    """
    names = scorer.limits.names()
    sel: list[dict | None] = [None] * len(names)  # per constraint: extremes over plans meeting the others
    closest: tuple[float, np.ndarray] | None = None  # the plan missing least: worst value, constraints
    for s in parts:
        valid = np.isfinite(s.constraints).all(axis=0) & (s.objectives[0] < INVALID / 10)
        if not valid.any():
            continue
        m = scorer.metrics({a: c[valid] for a, c in s.cols.items()})
        con = s.constraints[:, valid]
        ok = con <= 0
        for r in range(len(names)):
            others = np.delete(ok, r, axis=0).all(axis=0)
            if others.any():
                sel[r] = _extremes(sel[r], {k: v[others] for k, v in m.items()})
        worst = np.max(con, axis=0)
        j = int(np.argmin(worst))
        if closest is None or worst[j] < closest[0]:
            closest = (float(worst[j]), con[:, j])
    if closest is None:
        return _no_valid(scorer)
    for r, name in enumerate(names):
        if sel[r] is not None:
            return _why_none(name, scorer.limits, sel[r], scorer)
    con = closest[1]
    broken = [f"'{names[r]}' by {con[r]:.1%}" for r in range(len(names)) if con[r] > 0]
    return f"no plan meets every constraint at once: the closest misses {' and '.join(broken)}"


def _no_valid(scorer: Scorer) -> str:
    """Why a space holds no plan; when node sizes are what is missing, the sizes rented."""
    table = getattr(scorer.space, "node_offered", ())
    if not table:
        return "no valid plan exists in the search space"
    sizes_of = scorer.space.choices("per_node")
    sizes = "; ".join(
        f"{g} in nodes of {', '.join(str(n) for n, ok in zip(sizes_of, row, strict=True) if ok) or 'none'}"
        for g, row in zip(scorer.space.choices("gpu"), table, strict=True)
    )
    return (
        f"no valid plan exists: no GPU count searched (up to {max(scorer.space.choices('gpus'))}) fills whole "
        f"nodes of a size the kept providers rent ({sizes}); --provider, --instance or a larger --budget widen it"
    )
