"""The LLM evaluator: transformer plans with tensor, sequence, pipeline, expert and data
parallelism, ZeRO and activation recomputation, under the ``modern`` rule set.

Per plan: ``t`` = tp, ``p`` = pp, ``v`` = interleave, ``c`` = cp, ``m`` microbatches per step
(accumulation), ``b`` the microbatch, ``d = workers / (t c p)`` data-parallel replicas.

  layer       the roofline of every layer of one GPU's shard (:mod:`costs.llm.shard`,
              :func:`costs.modern.evaluator.layer_times`): forward, backward, and the recomputation
              (full: the layer's forward again; selective: the core attention's forward);
              norms, adds and dropout run whole on each GPU, split by ``t`` with sequence
              parallelism (Korthikanti et al. 2022, arXiv:2205.05198, §4.2.2)
  tensor par. two all-reduces of the hidden state (b s h) per layer forward and two backward,
              two more with full recomputation (Shoeybi et al. 2019, arXiv:1909.08053, §3;
              Narayanan et al. 2021, arXiv:2104.04473, §3.3); sequence parallelism moves the
              same bytes as reduce-scatters and all-gathers; one each for the
              vocabulary-parallel embedding and LM head; ring inside the node, exposed, or,
              with ``tp_overlap``, hidden behind the block's split compute as far as it lasts
  stages      blocks spread over ``p`` stages so that the first (with the embedding) and the
              last (with the LM head and loss) carry their share in block-equivalents; the
              stage with the most work binds
  pipeline    ``m`` microbatch times of the binding stage and the schedule's bubble
              (:mod:`costs.llm.pipeline`: 1F1B's ``(p - 1) / v`` of them, Narayanan et al. 2021,
              §2.2; zero-bubble ZB1P; DualPipe and DualPipeV); each microbatch sends its
              activation forward and its gradient back, ``b s h / t`` per GPU (their
              scatter/gather optimisation, §4.1), ``v`` times as often when interleaved
  context     ``s / c`` tokens per GPU (:mod:`costs.llm.context`): layers costed at that length,
              the core attention at ``1 / c`` of the whole sequence's, hidden states ``1 / c`` as
              large; gradients and ZeRO's shards span the ``d c`` GPUs with the same weights
  experts     two all-to-alls (dispatch, combine) of ``b s k h`` per MoE layer forward and two
              backward over the ``ep`` GPUs, inside the node and across it, exposed or, with
              ``ep_overlap``, behind another microbatch's compute (:mod:`costs.llm.experts`)
  data par.   fp32 gradients all-reduced over ``d`` (ZeRO 1: reduce-scatter plus a parameter
              all-gather, once per step; ZeRO 2: the reduce-scatter every microbatch; ZeRO 3:
              also two parameter all-gathers per microbatch, forward and backward: 1.5x the
              all-reduce volume, Rajbhandari et al. 2020, arXiv:1910.02054, §7), in buckets
              (:func:`costs.comm.overlap.exposed`): the reductions behind a backward pass, the
              gathers ahead of a forward (ZeRO 1, 2: the next step's first, as Megatron-Core's
              --overlap-param-gather runs them) or of both passes (ZeRO 3); which GPUs DP
              and pipeline ranks share follows the rank order (:mod:`costs.comm.ranks`)
  optimizer   the step over the GPU's parameters, 1/d of them under ZeRO >= 1
  host        as :mod:`costs.modern.evaluator`: max(GPU time, kernels x dispatch time) + framework time
              per microbatch

Memory per GPU is :mod:`costs.llm.memory` on the pipeline GPU that needs the most: under 1F1B
the first keeps ``min(p, m)`` microbatches in flight (``1 + (p - 1) / (p v)`` times that when
interleaved, where the middle and last ranks keep about as many: :func:`costs.llm.pipeline.in_flight`;
other schedules: :mod:`costs.llm.pipeline`).
Model FLOPs are the unsharded net's training FLOPs (6N plus attention; PaLM's MFU); hardware
FLOPs add the recomputation.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from costs.comm import collectives, fabric, overlap, ranks
from costs.hardware import ELEMENT_SIZE, FP8, FP16, DeviceTable, LinkTable
from costs.llm import context, experts, pipeline, tables
from costs.llm import memory as llm_memory
from costs.llm.memory import FULL, SELECTIVE
from costs.llm.shard import BLOCK, EMBED, HEAD, block_weights, dims, shard
from costs.modern.efficiency import Efficiency
from costs.modern.evaluator import GRAD_BYTES, ModernBreakdown, Options
from costs.plans import Plans

# Plans scored at a time: each column of a chunk (512 KiB) stays in cache, and the next chunk
# reuses the memory its temporaries freed instead of new pages from the OS (one pass over the
# 737,280 plans of benchmarks/bench_llm.py: about 15% slower)
CHUNK = 1 << 16


@dataclasses.dataclass(frozen=True)
class LLMBreakdown(ModernBreakdown):
    """:class:`~costs.modern.evaluator.ModernBreakdown` plus the pipeline and memory of LLM plans."""

    bubble: np.ndarray  # pipeline fill and drain (s)
    tp_comm: np.ndarray  # tensor-parallel collectives per step (s), part of act_comm
    pp_comm: np.ndarray  # pipeline sends per step (s), part of act_comm
    ep_comm: np.ndarray  # expert all-to-alls per step (s), part of act_comm
    cp_comm: np.ndarray  # exposed context-parallel key/value exchange per step (s), part of act_comm
    memory_bytes: np.ndarray  # bytes on the GPU that needs the most
    model_flops: np.ndarray  # training FLOPs of one step, all GPUs (no recomputation)
    hardware_flops: np.ndarray  # the same with the recomputation
    stage_blocks: np.ndarray  # transformer layers on the binding stage

    @property
    def total(self) -> np.ndarray:
        return super().total + self.bubble

    @property
    def memory(self) -> np.ndarray:
        return self.memory_bytes


def applies(costs) -> bool:
    """True for a net built from a transformer description (a zoo transformer, a config.json)."""
    return isinstance(costs.net.meta.get("model"), dict)


def description(costs) -> dict | None:
    """The transformer description this evaluator reads (``dims`` filled in), or None: not a
    transformer, or not the modern rules, which alone model tensor and pipeline parallelism."""
    return dims(costs.net.meta["model"]) if costs.rules.modern and applies(costs) else None


class _Ctx:
    """Per-plan columns every part of the evaluation reads."""

    def __init__(self, costs, plans: Plans, devices: DeviceTable, links: LinkTable, eff: Efficiency):
        self.m = dims(costs.net.meta["model"])
        self.L = int(self.m["n_layers"])
        self.t = plans.tp.astype(float)
        self.p = plans.pp.astype(float)
        self.v = plans.interleave.astype(float)
        self.schedule = plans.schedule
        self.mb = plans.accumulation.astype(float)
        self.b = plans.batch.astype(float)
        self.cp = plans.cp.astype(float)
        self.cp_comm = plans.cp_comm
        group = np.maximum(plans.tp * plans.pp * plans.cp, 1)
        self.dp = np.maximum(plans.workers // group, 1).astype(float)
        self.dpc = self.dp * self.cp  # GPUs holding the same weights: gradients and ZeRO shards
        self.e = plans.ep.astype(float)
        self.elem = ELEMENT_SIZE[plans.precision]
        self.sp_div = np.where(plans.sp, self.t, 1.0)
        self.tp_overlap = plans.tp_overlap
        self.ep_overlap, self.fp8 = plans.ep_overlap, plans.precision == FP8
        intra, net = plans.intra_link, plans.network
        achieved = links.bandwidth * eff.link  # per link: one product, then one gather per plan
        self.intra_bw, self.intra_lat = achieved[intra], links.latency[intra]
        self.net_bw, self.net_lat = achieved[net], links.latency[net]
        self.per_node = np.minimum(plans.gpus_per_node, plans.workers).astype(float)
        # one hidden state of the GPU's s / cp tokens
        self.hidden = self.b * self.m["seq_len"] / self.cp * self.m["d_model"] * self.elem


def _link(c: _Ctx, crosses, members=1.0, span=0.0, spread=False):
    bw, lat = fabric.path(c.fabric, c.net_bw, c.net_lat, members, span, spread, c.per_node)
    return np.where(crosses, bw, c.intra_bw), np.where(crosses, lat, c.intra_lat)


def _microbatch(c: _Ctx, x: dict, recompute, nics=None) -> dict:
    """Seconds per microbatch of a block, the embedding side and the head side."""
    blk_f = x["blk_f"] + x["rep_f"] / c.sp_div
    blk_b = x["blk_b"] + x["rep_b"] / c.sp_div
    rec = np.where(recompute == FULL, blk_f, np.where(recompute == SELECTIVE, x["attn_f"], 0.0))
    ar = collectives.ring(c.hidden, c.t, c.intra_bw, c.intra_lat)
    tp_blk = (4.0 + 2.0 * (recompute == FULL)) * ar
    # Overlapped (Megatron-Core's --tp-comm-overlap: the all-gathers and reduce-scatters run in
    # chunks beside the GEMMs that consume or produce them): only what the block's split compute
    # cannot cover is exposed.
    tp_blk = np.where(c.tp_overlap, np.maximum(tp_blk - (x["blk_f"] + x["blk_b"]), 0.0), tp_blk)
    moe, compute = c.m.get("moe"), blk_f + blk_b + rec
    a2a = np.zeros_like(ar)
    if moe:  # exposed all-to-all seconds (costs.llm.experts); dense layers send nothing
        a2a = experts.all_to_all_s(c, moe, recompute == FULL, compute, nics)
        a2a = a2a * block_weights(c.m)[-1]
    cp = np.zeros_like(ar)
    if (c.cp > 1).any():  # most searches have no context parallelism: no columns to build
        crosses = context.crosses_nodes(c.t, c.cp, c.per_node)
        bw, lat = _link(c, crosses, c.cp, c.t * c.cp, c.cp_comm == context.A2A)  # a2a spreads, others ring
        cp = context.times(c.m, c.b, c.elem, c.t, c.cp, c.cp_comm, recompute, bw, lat, x["att_f"], x["att_b"])
    return dict(
        blk_f=blk_f,
        blk_b=blk_b + rec,
        tp_blk=tp_blk,
        ep_blk=a2a,
        cp_blk=cp,
        tp_end=ar,
        unit=compute + tp_blk + a2a + cp,
        emb=x["emb_f"] + x["emb_b"] + ar,
        head=x["head_f"] + x["head_b"] + ar,
    )


def _pipeline(c: _Ctx, x: dict, u: dict, workers) -> dict:
    """The binding GPU's forward, backward, weight gradients and communication per microbatch,
    and every kind of pipeline GPU (:mod:`costs.llm.pipeline`)."""
    k = pipeline.kinds(c.schedule, c.L, c.p, c.v, c.mb, u["unit"], u["emb"], u["head"])
    loads = [b * u["unit"] + e * u["emb"] + h * u["head"] for b, e, h in zip(k.blocks, k.emb, k.head)]
    which = pipeline.binding(loads)
    n = len(which)
    flat = which * n + np.arange(n)  # each plan's binding kind in the kinds' rows laid end to end

    def pick(rows):  # a gather: np.choose copies one element at a time, several times slower
        return np.concatenate(np.broadcast_arrays(*rows))[flat]

    blocks, e, h = pick(k.blocks), pick(k.emb), pick(k.head)
    span = ranks.pipeline_span(c.order, c.t, c.cp, c.p, workers)  # a chain of p stages over these GPUs
    bw, lat = _link(c, span > c.per_node, c.p, span)
    # a microbatch's activation forward and its gradient back per (virtual) stage; DualPipe
    # hides them behind the paired chunk, DualPipeV sends at each of its two chunks
    dual, vee = c.schedule == pipeline.DUALPIPE, c.schedule == pipeline.DUALPIPEV
    sends = np.select([dual, vee], [0.0, 2.0], c.v) if c.schedule.any() else c.v  # most: 1F1B alone
    p2p = np.where(c.p > 1, 2.0 * sends * (c.hidden / c.t / bw + lat), 0.0)
    return dict(
        blocks=blocks,
        kinds=k,
        f=blocks * u["blk_f"] + e * x["emb_f"] + h * x["head_f"],
        b=blocks * u["blk_b"] + e * x["emb_b"] + h * x["head_b"],
        w=blocks * x["blk_w"] + h * x["head_w"] if "blk_w" in x else 0.0,
        tp=blocks * u["tp_blk"] + (e + h) * u["tp_end"],
        ep=(blocks + h * c.m.get("mtp_layers", 0)) * u["ep_blk"],  # MTP layers: one MoE each
        cp=blocks * u["cp_blk"],
        pp=p2p,
        kernels=blocks * x["k_blk"] + e * x["k_emb"] + h * x["k_head"],
    )


def _params(c: _Ctx, x: dict, k: pipeline.Kinds) -> tuple[np.ndarray, np.ndarray]:
    """Parameters per GPU of each kind of pipeline GPU (rows), and of one block."""
    blk = x["p_blk"]
    # Megatron's copy of the tied word embedding (vocabulary-parallel) where the head sits
    # without the embedding, not the position table
    word = np.ceil(c.m["vocab"] / c.t) * c.m["d_model"] if c.m.get("tied") else 0.0
    held = zip(k.param_blocks, k.param_emb, k.param_head, strict=True)
    return [n * blk + e * x["p_emb"] + h * (x["p_head"] + (1.0 - e) * word) for n, e, h in held], blk


def _memory(c: _Ctx, plans: Plans, k: pipeline.Kinds, params, opt: Options) -> np.ndarray:
    """Bytes on the GPU that needs the most (see costs.llm.memory)."""
    per_gpu, blk = params
    rc = plans.recompute
    layer, whole_layer = llm_memory.activations(c.m, c.b, c.elem, c.t, plans.sp, rc, c.cp, c.fp8)
    work = np.where(rc == FULL, whole_layer, 0.0)
    work = work + np.where(plans.zero >= 3, 2.0 * blk * c.elem, 0.0)  # a gathered block + prefetch
    emb_act = c.hidden / c.sp_div
    logits = llm_memory.logits_bytes(c.m, c.b, c.t, c.cp)
    fp16 = plans.precision == FP16
    per_param = llm_memory.state_bytes(1.0, c.elem, opt.optimizer, plans.zero, c.dpc, opt.fp32_grads, fp16)
    held = zip(per_gpu, k.flight, k.blocks, k.param_emb, k.logits, strict=True)
    need = [q * per_param + f * (n * layer + e * emb_act) + g * logits for q, f, n, e, g in held]
    return functools.reduce(np.maximum, need) + work  # pairwise: no copy of the rows into one array


def _sync(c: _Ctx, plans: Plans, params, stage: dict, bucket_bytes: float, nics):
    """(exposed, total) data-parallel communication per step."""
    p = functools.reduce(np.maximum, params[0])
    g = ranks.data_per_node(c.order, c.t, c.cp, c.p, c.dpc, c.per_node)
    span = ranks.data_span(c.order, c.t, c.cp, c.p, c.dpc)
    net = (c.net_bw, c.net_lat, nics, c.fabric, span, plans.zero == 0)  # SHARP: all-reduce
    a, b = collectives.affine(plans.scheme, c.dpc, g, c.intra_bw, c.intra_lat, *net)
    grads, gather = a + b * (GRAD_BYTES * p), (a + b * (c.elem * p)) / 2.0
    z, half = plans.zero, grads / 2.0
    # Gradients are reduced behind a backward pass: once per step (all-reduce, ZeRO 0;
    # reduce-scatter, ZeRO 1) or every microbatch (ZeRO 2, 3). Parameters are all-gathered ahead
    # of a forward pass: the updated shards once per step behind the next step's first forward
    # (ZeRO 1, 2: Megatron-Core's --overlap-param-gather), or every microbatch, forward and
    # backward (ZeRO 3: FSDP's prefetch). Each window hides one plan's collectives (ZeRO 3's
    # backward: two), costed once and then counted per step or per microbatch by stage.
    behind = np.select([z == 0, z == 3], [grads, half + gather], half)
    ahead = np.where(z == 0, 0.0, gather)
    nbytes = GRAD_BYTES * p
    hb = overlap.exposed(behind, stage["b"], nbytes, bucket_bytes)
    hf = overlap.exposed(ahead, stage["f"], nbytes, bucket_bytes)
    exposed = np.select([z <= 1, z == 2], [hb + hf, hf + c.mb * hb], c.mb * (hb + hf))
    total = np.select(
        [z == 0, z == 1, z == 2], [grads, half + gather, gather + c.mb * half], c.mb * (half + 2.0 * gather)
    )
    return exposed, total, p


def _flops(costs, plans: Plans, c: _Ctx, samples):
    """(model, hardware) training FLOPs of one step over all GPUs."""
    whole = shard(costs.net.meta["model"], 1, costs.rules)
    model = whole.flops[EMBED] + c.L * whole.flops[BLOCK] + whole.flops[HEAD]
    extra = np.zeros(3)  # FLOPs recomputed per block, by recomputation (none, selective, full)
    extra[[SELECTIVE, FULL]] = whole.attention_fwd_flops, whole.fwd_flops[BLOCK]
    return samples * model, samples * (model + c.L * extra.take(plans.recompute))


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
) -> LLMBreakdown:
    """Score transformer plans with every parallelism (see the module docstring). ``nics_per_node``
    (per plan) replaces ``options.nics_per_node`` for the data-parallel traffic; ``loader_rate`` and
    ``decode_s`` (image input) do not apply to token streams."""
    eff = efficiency if efficiency is not None else Efficiency.ideal(devices, links)
    opt = options if options is not None else Options()
    names, columns, row = tables.build(costs, plans, devices, eff)
    nics = opt.nics_per_node if nics_per_node is None else nics_per_node
    scored = []
    for lo in range(0, max(len(plans), 1), CHUNK):
        at = slice(lo, lo + CHUNK)
        x = {name: columns[j].take(row[at]) for j, name in enumerate(names)}  # take: faster than [row]
        scored.append(
            _score(costs, plans.take(at), x, devices, links, eff, opt, nics[at] if np.ndim(nics) else nics)
        )
    if len(scored) == 1:
        return scored[0]
    kept = [f.name for f in dataclasses.fields(LLMBreakdown) if getattr(scored[0], f.name) is not None]
    return LLMBreakdown(**{k: np.concatenate([getattr(b, k) for b in scored]) for k in kept})


def _score(costs, plans: Plans, x: dict, devices, links, eff: Efficiency, opt: Options, nics) -> LLMBreakdown:
    """:func:`evaluate` on plans whose table columns ``x`` are read."""
    n = len(plans)
    c = _Ctx(costs, plans, devices, links, eff)
    c.fabric = opt.fabric  # the network's tiers (costs.comm.fabric); None: one non-blocking network
    c.order = opt.rank_order  # which GPUs each group occupies (costs.comm.ranks)
    u = _microbatch(c, x, plans.recompute, nics)
    stage = _pipeline(c, x, u, plans.workers)
    params = _params(c, x, stage["kinds"])
    per_mb = stage["f"] + stage["b"] + stage["tp"] + stage["pp"] + stage["ep"] + stage["cp"]
    bubble = pipeline.bubble(c.schedule, c.p, c.v, per_mb, stage["b"], stage["w"])
    sync, sync_total, p_sync = _sync(c, plans, params, stage, opt.bucket_bytes, nics)

    dev, prec = plans.device, plans.precision
    own = p_sync / np.where(plans.zero >= 1, c.dpc, 1.0)
    tensors = stage["blocks"] * x["t_blk"] + x["t_emb"] + x["t_head"]
    upd_kernels = overlap.step_kernels(tensors, opt.optimizer, prec)
    update = (
        np.maximum(
            overlap.step_bytes(own, opt.optimizer, prec) / (devices.mem_bandwidth[dev] * eff.memory[dev]),
            upd_kernels * eff.kernel_min_s,
        )
        * eff.multiplier[dev, prec]
    )
    forward, backward = c.mb * stage["f"], c.mb * stage["b"]
    tp_comm, pp_comm, ep_comm = c.mb * stage["tp"], c.mb * stage["pp"], c.mb * stage["ep"]
    cp_comm = c.mb * stage["cp"]
    act_comm = tp_comm + pp_comm + ep_comm + cp_comm
    gpu = c.mb * per_mb + bubble + update
    host = (c.mb * stage["kernels"] + upd_kernels) * eff.host_per_kernel_s
    overhead = np.maximum(host - gpu, 0.0) + eff.iteration_s * c.mb
    samples = plans.batch * c.dp * plans.accumulation
    model_flops, hw_flops = _flops(costs, plans, c, samples)
    return LLMBreakdown(
        forward,
        backward,
        update,
        sync,
        act_comm,
        p_sync,
        p_sync,
        np.zeros(n),  # activations are in memory_bytes
        samples,
        sync_total,
        overhead,
        np.zeros(n),  # token batches load in microseconds: no input-pipeline bound
        bubble,
        tp_comm,
        pp_comm,
        ep_comm,
        cp_comm,
        _memory(c, plans, stage["kinds"], params, opt),
        model_flops,
        hw_flops,
        stage["blocks"],
    )
