"""`planner estimate` for transformers under the modern rules: one row per worker count (and
scheme) of a plan with tensor, sequence, context, pipeline, expert and data parallelism
(costs.llm.evaluator).

GPUs = tp x cp x pp x dp. The microbatch is ``--microbatch`` (else ``--batch``, else the spec's);
with ``--global-batch`` the microbatches per step are global batch / (dp x microbatch), as
Megatron-LM's --global-batch-size and --micro-batch-size set them; without it,
``--accumulation`` microbatches.
"""

from __future__ import annotations

import numpy as np

from costs.comm import schemes as comm
from costs.hardware import PRECISIONS
from costs.llm import context, pipeline
from costs.llm.memory import RECOMPUTE
from costs.model import evaluate, plans
from planner.errors import BadInput
from planner.estimate.records import hardware, record
from planner.request.estimate import EstimateRequest
from planner.request.parse import memory_fraction
from planner.space.llm_axes import interleavable


def check(req: EstimateRequest, m: dict, name: str) -> None:
    """The parallel degrees fit the model and the node; one line per problem."""
    kv = m["n_kv_heads"]
    if m["n_heads"] % req.tp or not (kv % req.tp == 0 or req.tp % kv == 0):
        raise BadInput(
            f"--tp {req.tp} does not divide the {m['n_heads']} attention heads ({kv} key/value heads) of {name}"
        )
    if req.tp > req.gpus_per_node:
        raise BadInput(
            f"--tp {req.tp} is wider than a node of {req.gpus_per_node} GPUs: tensor parallelism stays "
            "inside a node (set --gpus-per-node)"
        )
    if req.pp > m["n_layers"]:
        raise BadInput(f"--pp {req.pp} is deeper than the {m['n_layers']} layers of {name}")
    moe = m.get("moe")
    if req.ep > 1 and (moe is None or moe["n_experts"] % req.ep):
        what = f"the {moe['n_experts']} experts of {name}" if moe else f"{name} (not a mixture of experts)"
        raise BadInput(f"--ep {req.ep} does not divide {what}")
    if req.interleave > 1 and not interleavable(m["n_layers"], req.pp, req.interleave):
        raise BadInput(
            f"--interleave {req.interleave} needs --pp > 1 with pp x interleave dividing the {m['n_layers']} layers "
            f"(or the layers plus the embedding and the loss, {m['n_layers'] + 2}, as Megatron-Core splits them)"
        )
    _check_cp(req, m)
    if req.recompute == "selective" and m.get("attention") == "flash":
        raise BadInput(
            "--recompute selective recomputes standard attention; the flash kernel (--attention or "
            "the net spec's) keeps no scores (valid: none, full)"
        )


def _check_schedule(req: EstimateRequest, microbatches: np.ndarray) -> None:
    """A schedule other than 1F1B needs a pipeline; the DualPipes an uninterleaved one with
    two microbatches per pipeline GPU, DualPipe an even one (costs.llm.pipeline.runnable)."""
    if req.pp_schedule == "1f1b":
        return
    if req.pp < 2:
        raise BadInput(f"--pp-schedule {req.pp_schedule} schedules a pipeline: it needs --pp 2 or more")
    code = pipeline.SCHEDULES.index(req.pp_schedule)
    ok = pipeline.runnable(np.full(microbatches.shape, code), req.pp, req.interleave, microbatches)
    if not ok.all():
        m = int(microbatches[~ok][0])
        raise BadInput(
            f"--pp-schedule {req.pp_schedule} needs --interleave 1, at least 2 x pp = {2 * req.pp} microbatches "
            f"per step (got {m})" + (" and an even --pp" if req.pp_schedule == "dualpipe" else "")
        )


def _check_cp(req: EstimateRequest, m: dict) -> None:
    """Context parallelism: the sequence cut into 2 cp chunks (Megatron's load balancing), and
    the heads a2a (Ulysses) spreads over the group."""
    if req.cp == 1:
        return
    s = m["seq_len"]
    if s % (2 * req.cp):
        raise BadInput(
            f"--cp {req.cp} needs a sequence length divisible by 2 x cp = {2 * req.cp} (got {s}; "
            "each GPU holds two of the 2 cp chunks)"
        )
    if req.cp_comm == "a2a" and not bool(context.heads_split(m, req.tp, req.cp)):
        a, kv = (int(x) for x in context.local_heads(m, req.tp))
        raise BadInput(
            f"--cp-comm a2a spreads heads over the context-parallel group: --cp {req.cp} must divide the "
            f"{a} query heads and be at most the {kv} key/value heads of a --tp {req.tp} shard "
            "(valid: --cp-comm p2p or all_gather)"
        )


def _batches(
    req: EstimateRequest, workers: np.ndarray, default: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Data-parallel replicas, microbatch and microbatches per step per worker count."""
    group = req.tp * req.pp * req.cp
    bad = workers[workers % group != 0]
    if bad.size:
        what = "tp x pp x cp" if req.cp > 1 else "tp x pp"
        raise BadInput(f"--workers {bad[0]} is not a multiple of {what} = {group}")
    dp = workers // group
    mb = req.microbatch or req.batch or default
    if req.ep > 1 and np.any(dp % req.ep):
        raise BadInput(f"--ep {req.ep} does not divide the data-parallel size {int(dp[dp % req.ep != 0][0])}")
    if req.global_batch is None:
        return dp, np.full_like(dp, mb), np.full_like(dp, req.accumulation)
    if np.any(req.global_batch % (dp * mb)):
        d = int(dp[req.global_batch % (dp * mb) != 0][0])
        raise BadInput(f"--global-batch {req.global_batch} is not a multiple of dp x microbatch = {d} x {mb}")
    return dp, np.full_like(dp, mb), req.global_batch // (dp * mb)


def estimate_llm(req: EstimateRequest, costs, model, info, net_info, precision: str, m: dict) -> list[dict]:
    """Records of a transformer plan per (workers, scheme); see the module docstring."""
    check(req, m, req.net)
    workers = np.array(req.workers, dtype=np.int64)
    schemes = np.array([comm.SCHEME_NAMES.index(s) for s in req.schemes])
    k, sch = (a.ravel() for a in np.meshgrid(workers, schemes, indexing="ij"))
    dp, mb, acc = _batches(req, k, costs.net.default_batch)
    _check_schedule(req, acc)
    devices, links, common = hardware(req, info, net_info)
    common.update(accumulation=acc)
    p = plans(
        costs.n_layers,
        workers=k,
        batch=mb,
        scheme=sch,
        tp=req.tp,
        pp=req.pp,
        zero=req.zero,
        recompute=RECOMPUTE.index(req.recompute),
        sp=req.sp,
        tp_overlap=req.tp_overlap,
        ep=req.ep,
        ep_overlap=req.ep_overlap,
        interleave=req.interleave,
        cp=req.cp,
        cp_comm=context.CP_COMM.index(req.cp_comm),
        schedule=pipeline.SCHEDULES.index(req.pp_schedule),
        **common,
    )
    r = evaluate(costs, p, devices, links, **model.kwargs(devices, links), **model.plan_kwargs(p))
    peak = devices.peak[0, PRECISIONS.index(precision)]
    usable = info.device.memory_bytes * memory_fraction(req.memory_headroom)
    out = []
    for i in range(len(k)):
        rec = record(
            req,
            info.key,
            net_info.key,
            r,
            i,
            workers=int(k[i]),
            batch_per_worker=int(mb[i]),
            scheme=comm.SCHEME_NAMES[sch[i]],
            speedup=1.0,
            precision=precision,
            interval=model.interval_for(str(info.raw.get("generation", ""))),
        )
        total = r.total[i]
        del rec["speedup"]  # a scaling ratio over one GPU means little for a model-parallel plan
        rec.update(
            parallel="tp/pp/dp" if req.tp * req.pp * req.cp > 1 else "data",
            accumulation=int(acc[i]),
            tp=req.tp,
            pp=req.pp,
            dp=int(dp[i]),
            zero=req.zero,
            microbatch=int(mb[i]),
            recompute=req.recompute,
            sp="on" if req.sp else "off",
            tp_overlap="on" if req.tp_overlap else "off",
            ep=req.ep,
            ep_overlap="on" if req.ep_overlap else "off",
            interleave=req.interleave,
            cp=req.cp,
            cp_comm=req.cp_comm,
            pp_schedule=req.pp_schedule,
            seq_len=m["seq_len"],
            tokens_per_s=float(r.samples[i] * m["seq_len"] / total),
            mfu=float(r.model_flops[i] / total / (peak * k[i])),
            hfu=float(r.hardware_flops[i] / total / (peak * k[i])),
            model_tflops_per_gpu=float(r.model_flops[i] / total / k[i] / 1e12),
            hardware_tflops_per_gpu=float(r.hardware_flops[i] / total / k[i] / 1e12),
            bubble_ms=float(r.bubble[i] * 1e3),
            tp_comm_ms=float(r.tp_comm[i] * 1e3),
            pp_comm_ms=float(r.pp_comm[i] * 1e3),
            ep_comm_ms=float(r.ep_comm[i] * 1e3),
            cp_comm_ms=float(r.cp_comm[i] * 1e3),
            memory_gb_per_gpu=float(r.memory[i] / 1e9),
            memory_gb=float(r.memory[i] / 1e9),
            fits_memory=bool(r.memory[i] <= usable),
        )
        out.append(rec)
    return out
