"""`planner estimate`: PALEO's estimate for a set of configurations (a scaling table).

Builds one plan per (workers, scheme), scores them in one call of the vectorised evaluator,
and returns records with times in milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from costs import comm
from costs.hardware import PRECISIONS
from costs.model import evaluate, plans
from planner import catalog
from planner.errors import BadInput, UnsupportedError

PARALLEL = ("data", "model", "hybrid")
SCALING = ("strong", "weak")


@dataclass(frozen=True)
class EstimateRequest:
    """What `planner estimate` was asked. ``batch`` None means the spec's default batch."""

    net: str
    device: str = "TITAN_X"
    network: str = "ethernet"
    batch: int | None = None
    workers: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    scaling: str = "weak"
    schemes: tuple[str, ...] = comm.PALEO_SCHEMES
    ppp_comp: float = 1.0
    ppp_comm: float = 1.0
    pipeline: bool = False
    parallel: str = "data"
    rules: str = "paleo-2018"
    conv_algorithm: str = "gemm"
    precision: str = "fp32"
    gpus_per_node: int = 1
    split: str | None = None  # hybrid: first model-parallel layer; None derives it


def _validate(req: EstimateRequest) -> None:
    if req.batch is not None and req.batch < 1:
        raise BadInput(f"--batch must be a positive integer, got {req.batch}")
    if not req.workers or min(req.workers) < 1:
        raise BadInput(f"--workers must be positive integers, got {','.join(map(str, req.workers))}")
    for name, value in (("--ppp-comp", req.ppp_comp), ("--ppp-comm", req.ppp_comm)):
        if not 0 < value <= 1:
            raise BadInput(f"{name} must be in (0, 1], got {value}")
    if req.gpus_per_node < 1:
        raise BadInput(f"--gpus-per-node must be positive, got {req.gpus_per_node}")
    if req.precision not in PRECISIONS:
        raise BadInput(f"unknown precision '{req.precision}' (valid: {', '.join(PRECISIONS)})")
    if req.parallel not in PARALLEL:
        raise BadInput(f"unknown parallelism '{req.parallel}' (valid: {', '.join(PARALLEL)})")
    if req.scaling not in SCALING:
        raise BadInput(f"unknown scaling '{req.scaling}' (valid: {', '.join(SCALING)})")
    for s in req.schemes:
        if s not in comm.SCHEMES:
            raise BadInput(f"unknown scheme '{s}' (valid: {', '.join(comm.SCHEMES)}, all)")


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


def record(
    req: EstimateRequest,
    device: str,
    network: str,
    r,
    i: int,
    *,
    workers: int,
    batch_per_worker: int,
    scheme: str,
    speedup: float,
) -> dict:
    """One output record: plan ``i`` of the evaluator's Breakdown ``r``, times in ms."""
    return {
        "net": req.net,
        "device": device,
        "network": network,
        "rules": req.rules,
        "parallel": req.parallel,
        "precision": req.precision,
        "scaling": req.scaling,
        "workers": workers,
        "gpus_per_node": int(min(req.gpus_per_node, workers)),
        "batch_per_worker": batch_per_worker,
        "effective_batch": int(r.samples[i]),
        "scheme": scheme,
        "forward_ms": float(r.forward[i] * 1e3),
        "backward_ms": float(r.backward[i] * 1e3),
        "update_ms": float(r.update[i] * 1e3),
        "compute_ms": float(r.compute[i] * 1e3),
        "comm_ms": float(r.comm[i] * 1e3),
        "total_ms": float(r.total[i] * 1e3),
        "speedup": speedup,
        "throughput_samples_s": float(r.throughput[i]),
    }


def hardware(req: EstimateRequest, info, net_info):
    """Device and link tables of one estimate, and the plan fields every row shares."""
    devices = catalog.device_table([info.key])
    links = catalog.link_table([net_info.key, info.device.intra_link or net_info.key])
    common = dict(
        device=0,
        network=0,
        intra_link=1,
        gpus_per_node=req.gpus_per_node,
        precision=PRECISIONS.index(req.precision),
        ppp_comp=req.ppp_comp,
        ppp_comm=req.ppp_comm,
        pipeline=req.pipeline,
    )
    return devices, links, common


def estimate(req: EstimateRequest) -> list[dict]:
    """One record per (workers, scheme), in that order; times in ms (see module docstring)."""
    _validate(req)
    info = catalog.device(req.device)
    net_info = catalog.network(req.network)
    if req.precision not in info.device.peak_flops:
        raise UnsupportedError(
            f"device {info.key} has no {req.precision} peak in the catalog "
            f"(has: {', '.join(info.device.peak_flops)})"
        )
    costs = catalog.net_costs(req.net, req.rules, req.conv_algorithm)
    if costs.net.has_model_parallel and req.parallel == "model":
        from planner.estimate.modelparallel import estimate_model_parallel

        return estimate_model_parallel(req, costs, info, net_info)
    batch = req.batch or costs.net.default_batch
    split = _split_index(costs, req)
    workers = np.array(req.workers, dtype=np.int64)
    schemes = np.array([comm.SCHEME_NAMES.index(s) for s in req.schemes])
    k, sch = (a.ravel() for a in np.meshgrid(workers, schemes, indexing="ij"))
    # Strong scaling divides a fixed batch, rounding up as PALEO does (paleo-model.md §B.1).
    per_worker = np.ceil(batch / k).astype(np.int64) if req.scaling == "strong" else np.full_like(k, batch)
    devices, links, common = hardware(req, info, net_info)
    # T(1) per scheme: the baseline of the speedup, one worker with the whole batch.
    kk = np.concatenate([k, np.ones_like(schemes)])
    nn = np.concatenate([per_worker, np.full_like(schemes, batch)])
    ss = np.concatenate([sch, schemes])
    sp = np.concatenate([np.full_like(k, split), np.full_like(schemes, costs.n_layers)])
    p = plans(costs.n_layers, workers=kk, batch=nn, scheme=ss, split=sp, **common)
    r = evaluate(costs, p, devices, links)
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
        )
        for i in range(m)
    ]
    if any(math.isnan(rec["total_ms"]) for rec in records):
        raise UnsupportedError("the estimate is undefined for this configuration")
    return records


_PLAN_KEYS = (
    "net",
    "device",
    "network",
    "workers",
    "gpus_per_node",
    "batch_per_worker",
    "parallel",
    "split",
    "scheme",
    "precision",
    "pipeline",
    "ppp_comp",
    "ppp_comm",
    "rules",
    "conv_algorithm",
)


def request_from_plan(path: str, net: str | None = None) -> EstimateRequest:
    """The request that re-evaluates a saved plan file exactly (one worker count, one scheme)."""
    import json

    try:
        data = json.loads(open(path).read())
    except OSError as exc:
        raise BadInput(f"--plan {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"--plan {path}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
    missing = [k for k in _PLAN_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise BadInput(
            f"--plan {path} lacks {', '.join(missing)} (a plan_<k>.json of `planner pareto` has them)"
        )
    return EstimateRequest(
        net=net or data["net"],
        device=data["device"],
        network=data["network"],
        batch=int(data["batch_per_worker"]),
        workers=(int(data["workers"]),),
        scaling="weak",
        schemes=(data["scheme"],),
        ppp_comp=float(data["ppp_comp"]),
        ppp_comm=float(data["ppp_comm"]),
        pipeline=bool(data["pipeline"]),
        parallel=data["parallel"],
        rules=data["rules"],
        conv_algorithm=data["conv_algorithm"],
        precision=data["precision"],
        gpus_per_node=int(data["gpus_per_node"]),
        split=data["split"],
    )
