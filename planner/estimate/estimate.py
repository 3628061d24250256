"""`planner estimate`: PALEO's estimate for a set of configurations (a scaling table).

Builds one plan per (workers, scheme), scores them in one call of the vectorised evaluator,
and returns records with times in milliseconds. A spec with ModelParallel blocks under
``--parallel model`` goes to :mod:`planner.estimate.modelparallel`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from costs.comm import schemes as comm
from costs.comm.ranks import MEGATRON
from costs.llm.evaluator import description
from costs.model import evaluate, plans
from costs.specs.transformer_spec import attention_fields
from planner import catalog, resizing
from planner.epochs import resolve
from planner.errors import BadInput, UnsupportedError
from planner.estimate.llm import estimate_llm
from planner.estimate.modelparallel import estimate_model_parallel
from planner.estimate.records import hardware, precision_of, record
from planner.metrics.model import CostModel, loader_for
from planner.request import defaults
from planner.request.estimate import EstimateRequest, validate


def _split_index(costs, req: EstimateRequest) -> int:
    if req.parallel == "data":
        return costs.n_layers
    if req.parallel == "model":
        return 0
    if req.split is None:
        return costs.default_split()
    names = [s.name for s in costs.net.layers]
    if req.split not in names:
        raise BadInput(f"unknown split layer '{req.split}' (valid: {', '.join(costs.split_names())})")
    return names.index(req.split)


def _precision(req: EstimateRequest, info, transformer: bool) -> str:
    """The precision the estimate runs in (``auto`` resolved); the device must have it, and fp8
    applies to transformers only."""
    precision = precision_of(req, info)
    if precision == "fp8" and not transformer:
        raise BadInput(defaults.FP8_CNN)
    if precision not in info.device.peak_flops:
        raise UnsupportedError(
            f"device {info.key} has no {precision} peak in the catalog (has: {', '.join(info.device.peak_flops)})"
        )
    return precision


def _model_parallel(req: EstimateRequest, costs, info, net_info, model: CostModel) -> list[dict]:
    """Explicit ModelParallel blocks: PALEO's critical-path model (PALEO's rule sets only)."""
    if model.modern:
        raise UnsupportedError(
            "explicit ModelParallel blocks are scored by PALEO's rule sets only: add --rules paleo-2018"
        )
    return estimate_model_parallel(req, costs, info, net_info)


def estimate(req: EstimateRequest) -> list[dict]:
    """One record per (workers, scheme), in that order; times in ms (see module docstring)."""
    validate(req)
    req = replace(req, image_size=resizing.normal(req.image_size))
    info = catalog.device(req.device)
    net_info = catalog.network(req.network)
    size = resizing.largest(req.image_size)  # a schedule's largest: memory must fit it
    costs = catalog.net_costs(req.net, req.rules, req.conv_algorithm, req.seq_len, size, req.attention)
    resize = resizing.phase_costs(req.image_size, req.net, req.rules, req.conv_algorithm, req.seq_len)
    llm = description(costs)
    precision = _precision(req, info, llm is not None)
    published = str(costs.net.meta.get("training", {}).get("optimizer", ""))
    req = replace(req, optimizer=defaults.optimizer(req.optimizer, llm is not None, published))
    host = estimate_host(req, net_info)
    loader = loader_for(costs.net.meta, req.data_loader)
    model = CostModel.of(
        req.rules, req.calibration, req.optimizer, loader, req.stack, req.fabric, req.rank_order
    )
    model = model.for_net(costs.net.meta, host, resizing.mean_scale(resize))
    if llm is not None or not req.model_parallel:  # a CNN with --tp: the error below says why
        check_stack(req, model)
    rule = resolve(req.convergence, req.net, req.optimizer)  # one-line refusals before costing
    records = _estimate(req, costs, model, info, net_info, precision, llm, resize)
    if req.convergence != "auto":  # a named rule: the epochs it gives at each plan's global batch
        _epochs_fields(records, rule)
    vision = costs.net.meta.get("vision")
    for rec in records:  # every answer names its stack (None under PALEO's rules)
        rec["stack"] = model.stack
        if model.fabric != "nonblocking":  # and a network other than the flat default its fabric
            rec["fabric"] = model.fabric
        if model.rank_order != MEGATRON:  # and a rank order other than Megatron-Core's its order
            rec["rank_order"] = model.rank_order
        rec.update(model.host_record(0, req.gpus_per_node) if model.modern else {})
        rec.update(attention_fields(costs.net.meta))  # and a transformer its attention kernel
        if vision:  # and a vision net the input size it is costed at (or its resizing schedule)
            rec["image_size"] = resize.schedule.text if resize else int(vision["image_size"])
        if "total_ms_range" in rec:
            rec["interval_kind"] = model.interval_kind
            rec["interval_basis"] = model.interval_basis
    return records


def _evaluate(costs, p, devices, links, model: CostModel, resize) -> tuple:
    """(breakdown, step times per phase) of plans ``p``: one evaluator call, or under a resizing
    schedule one per phase, blended by the phases' shares of the steps (planner.resizing)."""
    kw = model.kwargs(devices, links)
    if resize is None:
        return evaluate(costs, p, devices, links, **kw, **model.plan_kwargs(p)), []
    parts = [
        evaluate(c, p, devices, links, **kw, **m.plan_kwargs(p))
        for c, m in zip(resize.costs, resize.models(model))
    ]
    return resizing.blend(parts, resize.weights), [r.total for r in parts]


def _epochs_fields(records: list[dict], rule) -> None:
    """Each record's epochs to the target under the named ``--convergence`` rule (planner.epochs)
    at its global batch; ``fixed`` (no rule) says the count is the net's or --epochs'."""
    for rec in records:
        batch = int(rec["effective_batch"])
        if rule is None:
            rec["epochs_basis"] = "fixed (--convergence fixed): --epochs or the net's own count"
            continue
        rec.update(
            epochs=float(rule.epochs(batch)), epochs_basis=rule.describe(batch), epochs_source=rule.source
        )


def _phase_fields(records: list[dict], resize, phases: list) -> None:
    """Under a resizing schedule each record lists its phases' sizes, shares and step times."""
    for i, rec in enumerate(records if phases else []):
        rec["image_phases"] = [
            {"image_size": ph.size, "fraction": float(ph.fraction), "total_ms": float(t[i] * 1e3)}
            for ph, t in zip(resize.schedule.phases, phases, strict=True)
        ]


def estimate_host(req: EstimateRequest, net_info):
    """The host of the estimate's plans (planner.hosts): --instance's, or the assumed one."""
    from planner import host_table, hosts

    over = hosts.parse_overrides(req.instance, req.cpu_cores_per_gpu, req.nics)
    return host_table.for_estimate(req.device, req.gpus_per_node, net_info.link.bandwidth * 8 / 1e9, over)


def check_stack(req: EstimateRequest, model: CostModel) -> None:
    """One stack, and one that can run the plan asked for (else a one-line refusal)."""
    from planner.stacks.plans import refusal

    if len(model.stacks) > 1:
        raise BadInput(
            f"--stack '{req.stack}': estimate scores one stack (optimize and pareto search several)"
        )
    stack = model.stack_info
    if stack is None:
        return
    plan = {
        "tp": req.tp,
        "pp": req.pp,
        "sp": req.sp,
        "ep": req.ep,
        "interleave": req.interleave,
        "tp_overlap": req.tp_overlap,
        "cp": req.cp,
        "ep_overlap": req.ep_overlap,
        "zero": req.zero,
        "pp_schedule": req.pp_schedule,
        "hybrid": req.parallel != "data",
    }
    why = refusal(stack, plan)
    if why:
        raise BadInput(why)


def _estimate(req, costs, model, info, net_info, precision, llm, resize=None) -> list[dict]:
    """The records of :func:`estimate` (see its docstring)."""
    if llm is not None:
        return estimate_llm(req, costs, model, info, net_info, precision, llm)
    if req.model_parallel:
        raise BadInput(
            "--tp, --pp, --zero, --recompute, --sp, --ep, --interleave, --cp, --microbatch and --global-batch "
            "need a transformer net under the modern rules"
        )
    if costs.net.has_model_parallel and req.parallel == "model":
        return _model_parallel(req, costs, info, net_info, model)
    batch = req.batch or costs.net.default_batch
    split = _split_index(costs, req)
    workers = np.array(req.workers, dtype=np.int64)
    schemes = np.array([comm.SCHEME_NAMES.index(s) for s in req.schemes])
    k, sch = (a.ravel() for a in np.meshgrid(workers, schemes, indexing="ij"))
    # Strong scaling divides a fixed batch, rounding up as PALEO does (paleo-model.md §B.1).
    # With gradient accumulation a strong-scaling batch is split into GPUs x microbatches.
    strong = req.scaling == "strong"
    acc = req.accumulation
    per_worker = np.ceil(batch / (k * acc)).astype(np.int64) if strong else np.full_like(k, batch)
    devices, links, common = hardware(req, info, net_info)
    # T(1) per scheme: the baseline of the speedup, one worker with the whole batch.
    kk = np.concatenate([k, np.ones_like(schemes)])
    nn = np.concatenate([per_worker, np.full_like(schemes, -(-batch // acc) if strong else batch)])
    ss = np.concatenate([sch, schemes])
    sp = np.concatenate([np.full_like(k, split), np.full_like(schemes, costs.n_layers)])
    p = plans(costs.n_layers, workers=kk, batch=nn, scheme=ss, split=sp, **common)
    r, phases = _evaluate(costs, p, devices, links, model, resize)
    m = len(k)
    one = r.total[m:]  # T(1) per scheme, in scheme order
    t1 = np.tile(one, len(workers))
    total = r.total[:m]
    speedup = t1 / total if req.scaling == "strong" else k * t1 / total
    records = [
        record(
            req,
            info.key,
            net_info.key,
            r,
            i,
            workers=int(k[i]),
            batch_per_worker=int(per_worker[i]),
            scheme=comm.SCHEME_NAMES[sch[i]],
            speedup=float(speedup[i]),
            precision=precision,
            interval=model.interval_for(str(info.raw.get("generation", ""))),
        )
        for i in range(m)
    ]
    _phase_fields(records, resize, phases)
    if any(math.isnan(rec["total_ms"]) for rec in records):
        raise UnsupportedError("the estimate is undefined for this configuration")
    return records
