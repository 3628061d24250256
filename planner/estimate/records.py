"""What every `planner estimate` path shares: the hardware tables and the output record."""

from __future__ import annotations

from costs.hardware import PRECISIONS
from planner import catalog
from planner.metrics import memory
from planner.request.estimate import EstimateRequest
from planner.request.parse import memory_fraction


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
    precision: str | None = None,
    interval: tuple[float, float] | None = None,
) -> dict:
    """One output record: plan ``i`` of the evaluator's Breakdown ``r``, times in ms.

    ``interval``: (lo, hi) multipliers of throughput that held 80% of the calibration's
    held-out runs; it adds the range of the iteration time and throughput.
    """
    rec = {
        "net": req.net,
        "device": device,
        "network": network,
        "rules": req.rules,
        "parallel": req.parallel,
        "precision": precision or req.precision,
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
    # memory per GPU, as the optimizer's memory constraint counts it (planner.metrics.memory)
    need = memory.per_gpu(
        r.local_params[i], r.activation_bytes[i], memory.bytes_per_param(rec["precision"], req.optimizer)
    )
    rec.update(_energy(req, device, r, i, workers))
    rec["memory_gb"] = float(need / 1e9)
    usable = catalog.device(device).device.memory_bytes * memory_fraction(req.memory_headroom)
    rec["fits_memory"] = bool(need <= usable)
    overhead = getattr(r, "overhead", None)
    if overhead is not None:  # the modern rules: host-bound stall and framework time
        rec["overhead_ms"] = float((overhead[i] + r.input_stall[i]) * 1e3)
    if interval is not None:
        lo, hi = interval
        rec["total_ms_range"] = [rec["total_ms"] / hi, rec["total_ms"] / lo]
        rec["throughput_range"] = [rec["throughput_samples_s"] * lo, rec["throughput_samples_s"] * hi]
    return rec


def _energy(req: EstimateRequest, device: str, r, i: int, workers: int) -> dict:
    """Energy at the meter of one optimizer step (J), and energy (kWh) and CO2 (kg) per million
    samples trained (planner.energy; NaN when the device has no board power)."""
    from planner.energy import servers, with_options

    e = with_options(catalog.energy_defaults(), req.pue, req.grid_intensity)
    nodes = servers(workers, req.gpus_per_node)
    board = catalog.device(device).raw.get("tdp_w", float("nan"))
    per_million = 1e6 / float(r.samples[i])
    m = e.metrics(board, workers, nodes, float(r.total[i]), float(r.compute[i]), per_million)
    kwh = float(m["energy_kwh"])
    return {
        "step_energy_j": kwh * 3.6e6 / per_million,
        "energy_kwh_per_million_samples": kwh,
        "co2_kg_per_million_samples": float(m["co2_kg"]),
    }


def precision_of(req: EstimateRequest, info) -> str:
    """The request's precision, with ``auto`` resolved for the device."""
    if req.precision != "auto":
        return req.precision
    from costs.hardware import auto_precision

    table = catalog.device_table([info.key])
    return PRECISIONS[int(auto_precision(table.peak, [0])[0])]


def hardware(req: EstimateRequest, info, net_info):
    """Device and link tables of one estimate, and the plan fields every row shares."""
    devices = catalog.device_table([info.key])
    links = catalog.link_table([net_info.key, info.device.intra_link or net_info.key])
    common = dict(
        device=0,
        network=0,
        intra_link=1,
        gpus_per_node=req.gpus_per_node,
        precision=PRECISIONS.index(precision_of(req, info)),
        ppp_comp=req.ppp_comp,
        ppp_comm=req.ppp_comm,
        pipeline=req.pipeline,
        accumulation=req.accumulation,
    )
    return devices, links, common
