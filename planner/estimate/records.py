"""What every `planner estimate` path shares: the hardware tables and the output record."""

from __future__ import annotations

from costs.hardware import PRECISIONS
from planner import catalog
from planner.request.estimate import EstimateRequest


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
        "accumulation": req.accumulation,
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
        accumulation=req.accumulation,
    )
    return devices, links, common
