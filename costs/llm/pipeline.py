"""Pipeline schedules: how a plan's blocks spread over its ``p`` pipeline GPUs, the bubble, and
what each GPU holds.

Schedules (``SCHEDULES``), with the bubble per optimizer step in the times of the binding GPU
per microbatch: ``F`` forward, ``B`` the whole backward, ``W`` its weight-gradient part, ``c``
the communication a microbatch exposes; ``v`` virtual stages per GPU (interleaving):

  1f1b       PipeDream-Flush / Megatron's 1F1B, interleaved when v > 1 (Narayanan et al. 2021,
             arXiv:2104.04473, §2.2): ``(p - 1) / v (F + B + c)``; rank ``r`` keeps ``p - r``
             microbatches' activations, ``p + (p - 1 - 2r) / v`` when interleaved (every rank
             about ``p``: :func:`in_flight`)
  zb1p       zero-bubble ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR,
             arXiv:2401.10241, §3): weight gradients fill the bubble, ``(p - 1) / v (F + B + c - 2W)``;
             1F1B's memory (torch.distributed.pipelining's ScheduleInterleavedZeroBubble)
  dualpipe   DeepSeek-V3's bidirectional DualPipe (arXiv:2412.19437, §3.2.1): each GPU holds
             stage ``d`` of one direction and stage ``p - 1 - d`` of the other, a forward and a
             backward chunk overlap (F&B = F + B, their communication hidden):
             ``(p / 2 - 1)(F&B + B - 3W)``; two copies of the parameters; ``p + 1`` stages'
             activations; even ``p``
  dualpipev  DualPipe cut in half (a V: GPU ``d`` holds chunks ``d`` and ``2p - 1 - d`` of ``2p``):
             the same bubble over ``2p`` chunks of half a GPU's work, ``(p - 1)(F&B + B - 3W) / 2``;
             one copy of the parameters, ``2p + 1`` chunks' activations

The DualPipe figures are its repository's table (github.com/deepseek-ai/DualPipe at
3da1bbea53606543d7f5f232338fc58096db30e3, README "Pipeline Bubbles and Memory Usage
Comparison", read 2026-11-25), which also lists ZB1P as ``(PP - 1)(F + B - 2W)``.

Balance: under 1F1B and ZB1P the first GPU carries the embedding and the last the LM head (and
the multi-token-prediction modules): blocks spread so that their loads in block-equivalents
match the others'. Under DualPipe the GPUs holding the first and the last stage carry half the
embedding and half the head each per microbatch (each direction's microbatches pass one of
them), in half-block steps; under DualPipeV GPU 0 carries both, in whole blocks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

SCHEDULES = ("1f1b", "zb1p", "dualpipe", "dualpipev")
ONE_F_ONE_B, ZB1P, DUALPIPE, DUALPIPEV = range(4)


@dataclass(frozen=True)
class Kinds:
    """Per kind of pipeline GPU (one tuple entry each: an array over plans, or a number for
    all): per microbatch, the blocks it runs and its share of the embedding's and the head's
    work; what it holds: the blocks whose parameters it keeps, whether it keeps the
    embedding's and the head's, the microbatches of activations of its blocks (``flight``),
    and whether it keeps a microbatch's logits. Rows stay unmaterialised numbers where they
    are constant: a batch of 1F1B plans builds no kind-by-plan array."""

    blocks: tuple
    emb: tuple
    head: tuple
    param_blocks: tuple
    param_emb: tuple
    param_head: tuple
    flight: tuple
    logits: tuple


def _stages(L: int, p, unit, emb, head):
    """1F1B: blocks on the first, last and a middle stage, balanced in block-equivalents."""
    unit = np.maximum(unit, 1e-30)
    w = (L + (emb + head) / unit) / p
    n1 = np.clip(np.rint(w - emb / unit), 0, L)
    nl = np.where(p == 2, L - n1, np.clip(np.rint(w - head / unit), 0, L - n1))
    mid = np.where(p > 2, np.ceil((L - n1 - nl) / np.maximum(p - 2, 1)), 0.0)
    one = p == 1
    # Where the middle stages do not all fill to ``mid`` (126 layers on 16 stages: 8 first, 7
    # last, 111 on 14 middle stages of at most 8), the first stage, which keeps the most
    # microbatches in flight, takes the short count, down to one block fewer than a full middle
    # stage: 7 + 14 x 8 + 7, Llama 3 405B's split ("we reduce one Transformer layer each from the
    # first and the last stages", Dubey et al. 2024, arXiv:2407.21783, §3.3.2; Megatron-Core's
    # --account-for-embedding-in-pipeline-split). No stage's time grows.
    surplus = np.where(p > 2, np.maximum(n1 + nl + (p - 2) * mid - L, 0), 0)
    n1 = np.minimum(n1, np.maximum(n1 - surplus, mid - 1))
    return np.where(one, L, n1), np.where(one, L, nl), mid


def in_flight(p, v, m) -> tuple:
    """Microbatches of a stage's activations held at the peak by pipeline ranks 0, 1 and
    ``p - 1`` under 1F1B: rank ``r`` runs ``p - 1 - r`` warm-up forwards, then one more forward
    before its first backward, so it holds ``min(p - r, m)``. Interleaved over ``v`` model
    chunks, Megatron-Core's warm-up is ``2 (p - 1 - r) + (v - 1) G`` chunk forwards with
    microbatch groups of ``G = p`` (megatron/core/pipeline_parallel/schedules.py,
    ``get_pp_rank_microbatches``, microbatch_group_size_per_vp_stage defaulting to the pipeline
    size), each chunk ``1 / v`` of the stage: ``p + (p - 1 - 2 r) / v`` microbatches of the
    stage, or all ``m`` when ``m <= p`` (every forward of the step before any backward); on rank 0
    that is ``1 + (p - 1) / (p v)`` times plain 1F1B's ``p`` (Korthikanti et al. 2022,
    arXiv:2205.05198, §4)."""
    p = np.asarray(p, dtype=float)
    m = np.asarray(m, dtype=float)
    inter = np.asarray(v) > 1
    vv = np.maximum(np.asarray(v, dtype=float), 1.0)

    def rank(r):
        # interleaved with m <= p, Megatron-Core runs every forward before any backward
        mixed = np.where(m <= p, m, np.minimum(p + (p - 1 - 2 * r) / vv, m))
        return np.where(inter, mixed, np.minimum(p - r, m))

    return rank(0.0), rank(1.0), rank(p - 1)


def _linear(L: int, p, v, m, unit, emb, head) -> Kinds:
    """1F1B and ZB1P: the first, the last and a middle GPU."""
    n1, nl, mid = _stages(L, p, unit, emb, head)
    one = (p == 1).astype(float)
    first, middle, last = in_flight(p, v, m)
    return Kinds(
        blocks=(n1, nl, mid),
        emb=(1.0, one, 0.0),
        head=(one, 1.0, 0.0),
        param_blocks=(n1, nl, mid),
        param_emb=(1.0, one, 0.0),
        param_head=(one, 1.0, 0.0),
        # a middle stage (rank 1) exists from p = 3; with p = 1 the last GPU is the first
        flight=(first, np.where(one > 0, first, last), np.where(p > 2, middle, 0.0)),
        logits=(one, 1.0, 0.0),
    )


def _paired(L: int, p, m, unit, emb, head, dual: bool) -> Kinds:
    """DualPipe (``dual``: two end GPUs, each with half the embedding and head per microbatch,
    half-block steps, two copies of the weights) or DualPipeV (GPU 0 with both, whole blocks);
    the third kind (a 1F1B middle stage) is empty."""
    k = 2.0 if dual else 1.0  # end GPUs, each with 1 / k of the ends' work, in 1 / k-block steps
    burden = (emb + head) / k
    w = (L + (emb + head) / unit) / p
    n_end = np.clip(np.rint((w - burden / unit) * k) / k, 0, L / k)
    n_mid = np.where(p > k, np.ceil((L - k * n_end) / np.maximum(p - k, 1.0) * k) / k, 0.0)
    n_end = np.where(p > k, n_end, L / k)
    flight = np.minimum(p + 1.0, m) if dual else np.minimum(p + 0.5, m)
    return Kinds(
        blocks=(n_end, n_mid, 0.0),
        emb=(1.0 / k, 0.0, 0.0),
        head=(1.0 / k, 0.0, 0.0),
        param_blocks=(k * n_end, k * n_mid, 0.0),
        param_emb=(1.0, 0.0, 0.0),
        param_head=(1.0, 0.0, 0.0),
        flight=(flight, np.where(p > k, flight, 0.0), 0.0),
        logits=(1.0, 0.0, 0.0),
    )


def kinds(schedule, L: int, p, v, m, unit, emb, head) -> Kinds:
    """Each plan's pipeline GPUs by kind (see :class:`Kinds`); ``unit``, ``emb`` and ``head``
    are a block's, the embedding side's and the head side's seconds per microbatch."""
    unit = np.maximum(unit, 1e-30)
    out = _linear(L, p, v, m, unit, emb, head)
    for code, dual in ((DUALPIPE, True), (DUALPIPEV, False)):
        on = schedule == code
        if not on.any():
            continue
        pair = _paired(L, p, m, unit, emb, head, dual)
        out = Kinds(
            *(
                tuple(np.where(on, a, b) for a, b in zip(getattr(pair, f), getattr(out, f), strict=True))
                for f in Kinds.__dataclass_fields__
            )
        )
    return out


def binding(loads) -> np.ndarray:
    """Each plan's binding kind of pipeline GPU: the first of the most ``loads`` (one array per
    kind), NaN counting as most: np.argmax over the stacked rows, without its transposing copy."""
    top = functools.reduce(np.maximum, loads)  # NaN wherever a load is NaN
    which = np.full(len(top), len(loads) - 1)
    for i in range(len(loads) - 2, -1, -1):
        which = np.where((loads[i] == top) | np.isnan(loads[i]), i, which)
    return which


def bubble(schedule, p, v, per_mb, b, w) -> np.ndarray:
    """Seconds per step the binding GPU idles: ``per_mb`` its time per microbatch (forward,
    backward, exposed communication), ``b`` its backward and ``w`` its weight-gradient part."""
    p = np.asarray(p, dtype=float)
    one_f = (p - 1.0) / v * per_mb
    if not np.any(schedule):  # every plan 1F1B: the common case, no other column built
        return one_f
    zb = (p - 1.0) / v * np.maximum(per_mb - 2.0 * w, 0.0)
    pair = np.maximum(per_mb + b - 3.0 * w, 0.0)
    dual = np.maximum(p / 2.0 - 1.0, 0.0) * pair
    vee = (p - 1.0) * pair / 2.0
    return np.select([schedule == ZB1P, schedule == DUALPIPE, schedule == DUALPIPEV], [zb, dual, vee], one_f)


def runnable(schedule, p, v, m) -> np.ndarray:
    """Whether each plan's schedule can run its pipeline: DualPipe needs an even ``p`` and at
    least ``2p`` microbatches, DualPipeV ``2p`` microbatches (one per chunk of its V: torch's
    ScheduleDualPipeV), neither interleaves; 1F1B and ZB1P run any pipeline."""
    paired = (schedule == DUALPIPE) | (schedule == DUALPIPEV)
    even = (schedule != DUALPIPE) | (p % 2 == 0)
    return ~paired | ((v == 1) & (p > 1) & (m >= 2 * p) & even)
