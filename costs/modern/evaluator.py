"""The ``modern`` rule set's evaluator: roofline layers, overheads, overlapped collectives.

Per plan (one optimizer step of ``accumulation`` microbatches):

  GPU time      sum over layers and phases of max(FLOPs / achievable compute rate,
                bytes / achievable bandwidth, kernels x shortest kernel) (:mod:`costs.modern.roofline`)
                + the optimizer step (:mod:`costs.comm.overlap`)
  host time     kernels x host dispatch time per kernel (PyTorch eager launches each kernel
                from Python; the GPU runs ahead only while the host keeps up)
  compute       max(GPU time, host time) + framework time per microbatch; the part above the
                GPU time is reported as ``overhead``
  sync          the gradient AllReduce in fp32 (alpha-beta, hierarchical;
                :mod:`costs.comm.collectives`), overlapped in buckets with the last microbatch's
                backward; ``sync`` is the exposed part (the last bucket at least), ``sync_total``
                the whole; the backward loses ``overlap_slowdown`` of the hidden part to the
                NCCL kernels beside it (``interference``, in ``backward``)
  straggler     the wait for the slowest of the data-parallel GPUs at the AllReduce:
                (GPU + host time) x ``straggler_cv`` x E[max of n standard normals]
                (:func:`costs.comm.overlap.straggler_wait`), in ``overhead``
  input         a node's samples per step over its data loader's rate; the step never beats it

PALEO's PPP_comp, PPP_comm and pipelining columns are ignored here: the efficiencies
(:class:`~costs.modern.efficiency.Efficiency`) replace them. Everything is vectorised: each distinct
(device, precision, batch) is costed once, then plans gather their row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from costs.comm import collectives, overlap
from costs.comm.fabric import Fabric
from costs.comm.ranks import MEGATRON
from costs.hardware import (
    BF16,
    ELEMENT_SIZE,
    FP8,
    FP16,
    PRECISIONS,
    TENSOR_FP16_RATIO,
    DeviceTable,
    LinkTable,
)
from costs.modern import roofline
from costs.modern.efficiency import Efficiency
from costs.plans import Breakdown, Plans, _unique

GRAD_BYTES = 4.0  # DDP AllReduces .grad, which AMP keeps in fp32 (parameters stay fp32)


@dataclass(frozen=True)
class Options:
    """Evaluator options of the modern rule set."""

    optimizer: str = "sgd"  # sgd | momentum | adam
    bucket_bytes: float = 25e6  # DDP bucket_cap_mb = 25 (Li et al. 2020); <= 0: no overlap
    nics_per_node: float | None = None  # None: one NIC per GPU (networks.toml's convention)
    fabric: Fabric | None = None  # the network's tiers (costs.comm.fabric); None: one non-blocking network
    # the engine accumulates gradients in fp32 buffers under mixed precision (Megatron-Core's
    # DDP; costs.llm.memory): a transformer's memory, not its traffic (GRAD_BYTES already fp32)
    fp32_grads: bool = False
    rank_order: str = MEGATRON  # the parallel groups' rank order (costs.comm.ranks.ORDERS)


@dataclass(frozen=True)
class ModernBreakdown(Breakdown):
    """:class:`~costs.model.Breakdown` plus what the modern model adds (seconds)."""

    sync_total: np.ndarray  # the whole gradient AllReduce, before overlap
    overhead: np.ndarray  # host-bound launch stall + framework time + straggler wait + SM decoding per step
    input_stall: np.ndarray  # time waiting for the data loader
    # keyword-only, so subclasses (costs.llm's breakdown) keep their positional fields; None
    # where an evaluator does not model them
    straggler: np.ndarray | None = field(default=None, kw_only=True)  # wait for the slowest GPU (in overhead)
    interference: np.ndarray | None = field(default=None, kw_only=True)  # backward slowed by overlap

    @property
    def total(self) -> np.ndarray:
        return self.compute + self.comm + self.overhead + self.input_stall


@dataclass(frozen=True)
class _Combos:
    """Per-layer GPU seconds and kernels of unique (device, precision, batch) combinations."""

    fwd: np.ndarray  # (L - first + 1, U) cumulative forward seconds
    bwd: np.ndarray  # (L - first + 1, U) cumulative backward seconds
    kf: np.ndarray  # cumulative forward kernels
    kb: np.ndarray  # cumulative backward kernels
    inverse: np.ndarray  # combination of each selected plan


def _winograd_applies(peak: np.ndarray, precision: np.ndarray) -> np.ndarray:
    """cuDNN runs Winograd on the CUDA cores: in fp32, and in fp16 on devices without fp16
    tensor cores (P100's packed fp16); tf32/bf16 and tensor-core fp16 run implicit GEMM."""
    no_tc16 = ~(peak[:, FP16] >= TENSOR_FP16_RATIO * peak[:, 0])
    return (precision == 0) | ((precision == FP16) & no_tc16)


def layer_times(t, devices: DeviceTable, eff: Efficiency, device, precision, batch, first=0):
    """GPU seconds (L - first, 3, U) and kernels per layer and phase of the unique (device,
    precision, batch) combinations of the plans, and each plan's combination (its inverse)."""
    ub, ib = _unique(batch)
    keys, inverse = _unique((device * len(PRECISIONS) + precision) * len(ub) + ib)
    kd, ki = np.divmod(keys, len(ub))
    udev, uprec = np.divmod(kd, len(PRECISIONS))
    elem = ELEMENT_SIZE[uprec]
    gemm = devices.peak[udev, uprec] * eff.gemm[udev, uprec]
    fp8 = uprec == FP8
    other = np.where(fp8, devices.peak[udev, BF16] * eff.gemm[udev, BF16], gemm) if fp8.any() else None
    times, kernels = roofline.phase_times(
        t,
        first,
        ub[ki].astype(float),
        gemm,
        devices.peak[udev, 0] * eff.vector[udev],
        devices.mem_bandwidth[udev] * eff.memory[udev],
        elem,
        (elem < 4).astype(float),
        eff.kernel_min_s,
        devices.sm_count[udev],
        np.where(_winograd_applies(devices.peak[udev], uprec), eff.winograd[udev], 1.0),
        peak_tc_other=other,
        attention=eff.attention[udev],
    )
    times = times * eff.multiplier[udev, uprec]
    return times, np.broadcast_to(kernels, times.shape), inverse


def _combos(t, devices: DeviceTable, eff: Efficiency, device, precision, batch, first=0) -> _Combos:
    times, kernels, inverse = layer_times(t, devices, eff, device, precision, batch, first)

    def cum(x):
        return np.concatenate([np.zeros((1, x.shape[-1])), np.cumsum(x, axis=0)])

    return _Combos(
        cum(times[:, 0]),
        cum(times[:, 1] + times[:, 2]),
        cum(kernels[:, 0]),
        cum(kernels[:, 1] + kernels[:, 2]),
        inverse,
    )


def _hybrid(costs, t, plans: Plans, devices, links, eff, out: dict) -> None:
    """Add the model-parallel part of hybrid plans (Krizhevsky 2014), as costs.model does:
    each of K workers holds 1/K of every layer from the split on and runs K x n samples."""
    L = costs.n_layers
    h = np.flatnonzero(plans.split < L)
    s = plans.split[h]
    kh = plans.workers[h].astype(float)
    first = int(s.min())
    c = _combos(
        t, devices, eff, plans.device[h], plans.precision[h], plans.batch[h] * plans.workers[h], first
    )
    u = c.inverse
    top_f, top_b = c.fwd[-1, u], c.bwd[-1, u]
    out["forward"][h] += (top_f - c.fwd[s - first, u]) / kh
    out["backward"][h] += (top_b - c.bwd[s - first, u]) / kh
    out["kernels"][h] += (c.kf[-1, u] - c.kf[s - first, u]) + (c.kb[-1, u] - c.kb[s - first, u])
    out["params"][h] += (costs.total_params - costs.params_before[s]) / kh
    tb = np.concatenate([[0.0], np.cumsum(t.param_tensors)])
    out["tensors"][h] += tb[L] - tb[s]  # every worker holds a slice of each tensor
    nodes = np.ceil(kh / np.minimum(plans.gpus_per_node[h], kh))
    link = np.where(nodes > 1, plans.network[h], plans.intra_link[h])
    elem = ELEMENT_SIZE[plans.precision[h]]
    nbytes = 2.0 * (kh - 1) * plans.batch[h] * elem * costs.gather_from[s]
    steps = 2.0 * (kh - 1) * costs.weighted_from[s]
    act = nbytes / (links.bandwidth[link] * eff.link[link]) + steps * links.latency[link]
    out["act_comm"][h] = np.where(kh > 1, act, 0.0)


def _exposed(costs, c: _Combos, plans: Plans, split, sync_total, backward, grad_bytes, bucket_bytes):
    """Exposed gradient AllReduce. Data-parallel plans: DDP's buckets filled from the last
    layer down, each ready when its layers' backward is done (per-layer times); hybrid plans:
    the closed form with equal buckets spread evenly over the backward."""
    sync = overlap.exposed(sync_total, backward, grad_bytes, bucket_bytes)
    L = costs.n_layers
    dp = np.flatnonzero(split >= L)
    if dp.size == 0 or not np.isfinite(bucket_bytes) or bucket_bytes <= 0:
        return sync
    first, share = overlap.buckets(costs.params * GRAD_BYTES, bucket_bytes)
    if first.size == 0:
        return sync
    u = c.inverse[dp]
    t_bwd = c.bwd[L, u]
    ready = t_bwd[None, :] - c.bwd[first][:, u]
    end = overlap.exposed_layerwise(sync_total[dp], ready, share)
    sync[dp] = np.clip(end - t_bwd, 0.0, sync_total[dp])
    return sync


def evaluate(
    costs,
    plans: Plans,
    devices: DeviceTable,
    links: LinkTable,
    efficiency: Efficiency | None = None,
    options: Options | None = None,
    loader_rate=None,
    nics_per_node=None,
    decode_s=None,
) -> ModernBreakdown:
    """Score every plan with the modern model (see the module docstring).

    ``efficiency`` defaults to the pure roofline (:meth:`Efficiency.ideal`); the catalog's
    ``efficiency()`` gives the cited defaults. ``loader_rate`` is samples/s per node, one per
    plan or a scalar; ``inf`` (the default) means no input-pipeline bound. ``nics_per_node``
    (per plan) replaces ``options.nics_per_node``; ``decode_s`` is GPU seconds per sample spent
    decoding input on the SMs (DALI without a hardware JPEG decoder), added to each step.
    """
    eff = efficiency if efficiency is not None else Efficiency.ideal(devices, links)
    opt = options if options is not None else Options()
    t = roofline.terms(costs)
    L = costs.n_layers
    split = np.clip(plans.split, 0, L)
    c = _combos(t, devices, eff, plans.device, plans.precision, plans.batch)
    u = c.inverse
    tensors_before = np.concatenate([[0.0], np.cumsum(t.param_tensors)])
    out = {
        "forward": c.fwd[split, u],
        "backward": c.bwd[split, u],
        "kernels": c.kf[split, u] + c.kb[split, u],
        "params": costs.params_before[split].astype(float),
        "tensors": tensors_before[split],
        "act_comm": np.zeros(len(plans)),
    }
    data_params = out["params"].copy()
    if bool((split < L).any()):
        _hybrid(costs, t, plans, devices, links, eff, out)

    dev, prec = plans.device, plans.precision
    bw = devices.mem_bandwidth[dev] * eff.memory[dev]
    upd_kernels = overlap.step_kernels(out["tensors"], opt.optimizer, prec)
    update = np.maximum(
        overlap.step_bytes(out["params"], opt.optimizer, prec) / bw, upd_kernels * eff.kernel_min_s
    )
    update = np.where(out["params"] > 0, update * eff.multiplier[dev, prec], 0.0)

    intra, net = plans.intra_link, plans.network
    grad_bytes = data_params * GRAD_BYTES
    sync_total = collectives.allreduce(
        plans.scheme,
        grad_bytes,
        plans.workers,
        plans.gpus_per_node,
        links.bandwidth[intra] * eff.link[intra],
        links.latency[intra],
        links.bandwidth[net] * eff.link[net],
        links.latency[net],
        opt.nics_per_node if nics_per_node is None else nics_per_node,
        opt.fabric,
    )
    sync = _exposed(costs, c, plans, split, sync_total, out["backward"], grad_bytes, opt.bucket_bytes)

    acc = plans.accumulation.astype(float)
    interference = overlap.overlap_slowdown(sync_total, sync, eff.overlap_slowdown)
    forward, act_comm = out["forward"] * acc, out["act_comm"] * acc
    backward = out["backward"] * acc + interference
    # decoding input on the SMs (DALI without a hardware JPEG decoder) is GPU time of the step,
    # reported in the overhead as the straggler wait is
    decode = np.zeros(len(plans)) if decode_s is None else plans.batch * acc * decode_s
    gpu = forward + backward + update + decode
    host = (out["kernels"] * acc + upd_kernels) * eff.host_per_kernel_s
    overhead = np.maximum(host - gpu, 0.0) + eff.iteration_s * acc
    straggler = overlap.straggler_wait(gpu + overhead, plans.workers, eff.straggler_cv)
    overhead = overhead + straggler + decode

    per_node = np.minimum(plans.gpus_per_node, plans.workers)
    samples = plans.batch * plans.workers * plans.accumulation
    rate = np.inf if loader_rate is None else loader_rate
    floor = overlap.loader_floor(plans.batch * per_node * acc, np.broadcast_to(rate, acc.shape))
    input_stall = np.maximum(floor - (gpu + sync + act_comm + overhead), 0.0)
    elem = ELEMENT_SIZE[prec]
    return ModernBreakdown(
        forward,
        backward,
        update,
        sync,
        act_comm,
        out["params"],
        data_params,
        elem * plans.batch * costs.act_stored,
        samples,
        sync_total,
        overhead,
        input_stall,
        straggler=straggler,
        interference=interference,
    )


def layer_seconds(
    costs, devices: DeviceTable, efficiency: Efficiency, device: int, precision: int, batch: int
):
    """GPU seconds per layer of one (device, precision, batch): forward and backward (data and
    weight gradients), (L,) each, as :func:`evaluate` sums them."""
    one = lambda v: np.array([v], dtype=np.int64)  # noqa: E731
    c = _combos(roofline.terms(costs), devices, efficiency, one(device), one(precision), one(batch))
    return np.diff(c.fwd[:, 0]), np.diff(c.bwd[:, 0])
