"""The LLM evaluator's part tables: what one GPU's shard spends on each part of the model,
costed once per distinct (tensor, expert, context) degree and (device, precision, microbatch)
of a batch of plans, as a small table whose rows the plans read (:mod:`costs.llm.evaluator`).

Columns: ``_f`` / ``_b`` forward and backward seconds per microbatch of the embedding side
(``emb``), the head side (``head``), a block's layers split by tensor parallelism (``blk``) and
those every GPU of the group runs whole (``rep``), the core attention (``attn_f``: what
selective recomputation repeats) and all of the attention (``att_``: what context parallelism
overlaps); ``k_`` their kernels; ``_w`` the weight-gradient seconds; ``p_`` the parameters and
``t_`` the parameter tensors of one GPU's shard.
"""

from __future__ import annotations

import numpy as np

from costs.hardware import PRECISIONS
from costs.llm.shard import BLOCK, EMBED, HEAD, Shard, shard
from costs.modern.evaluator import layer_times
from costs.plans import Plans, _unique

PARTS = ("emb_f", "emb_b", "head_f", "head_b", "blk_f", "blk_b", "rep_f", "rep_b")
PARTS += ("attn_f", "att_f", "att_b")  # standard attention (selective), any attention (context)
KERNELS = ("k_emb", "k_head", "k_blk")
WEIGHTS = ("blk_w", "head_w")  # weight-gradient seconds: built for zero-bubble and DualPipe plans only
PER_SHARD = ("p_emb", "p_blk", "p_head", "t_emb", "t_blk", "t_head")  # p_blk: 1 / ep of the experts


def part_times(
    sh: Shard, devices, eff, combos, weights: bool, full: Shard | None = None, cp=1, ep=1
) -> np.ndarray:
    """The seconds and kernels of each part of the shard (:data:`PARTS`, :data:`KERNELS`, then
    :data:`WEIGHTS` with ``weights``) and its per-shard values (:data:`PER_SHARD`) for each
    of the distinct (device, precision, microbatch) ``combos`` (three arrays; rows).
    With context parallelism ``sh`` is built at ``s / cp`` tokens and ``full`` at the whole
    sequence, whose core attention each of the ``cp`` GPUs does ``1 / cp`` of; each of ``ep``
    GPUs holds ``1 / ep`` of a block's experts."""
    args = (devices, eff, *combos)
    times, kernels, inv = layer_times(sh.terms, *args)
    if full is not None:
        whole = layer_times(full.terms, *args)[0]
        times = np.where(sh.attention[:, None, None], whole / cp, times)
    w = sh.weight[:, None]  # a block layer counts for its share of the layers
    f, b = w * times[:, 0], w * (times[:, 1] + times[:, 2])
    k = w * kernels.sum(axis=1)
    split = (sh.part == BLOCK) & ~sh.replicated
    emb, head = sh.part == EMBED, sh.part == HEAD
    parts = (  # in the order of PARTS + KERNELS (+ WEIGHTS); a block's kernels: both kinds of layer
        (f, emb), (b, emb), (f, head), (b, head), (f, split), (b, split), (f, sh.replicated),
        (b, sh.replicated), (f, sh.core_attention), (f, sh.attention), (b, sh.attention), (k, emb),
        (k, head), (k, split, sh.replicated),
    )  # fmt: skip
    if weights:
        parts += ((w * times[:, 2], sh.part == BLOCK), (w * times[:, 2], head))
    tensors = [float((sh.weight * sh.terms.param_tensors)[sh.part == k].sum()) for k in (EMBED, BLOCK, HEAD)]
    p_emb, p_blk, p_head = sh.params
    shard_values = np.array([p_emb, p_blk - sh.expert_params * (1.0 - 1.0 / ep), p_head, *tensors])
    table = np.stack([sum(x[mask].sum(axis=0) for mask in masks) for x, *masks in parts], axis=1)
    return np.hstack([table, np.broadcast_to(shard_values, (len(table), len(shard_values)))])[inv]


def build(costs, plans: Plans, devices, eff) -> tuple[tuple, np.ndarray, np.ndarray]:
    """(names, columns, row): the part tables of every (tp, ep, cp) group of ``plans``
    (:func:`part_times`; :data:`WEIGHTS` only where a plan's schedule needs them) as one
    (names, rows) array, and each plan's row. Each (group, device, precision, microbatch) is
    one row, found from keys alone (no plan column gathered per group)."""
    weights = bool(plans.schedule.any())
    names = PARTS + KERNELS + (WEIGHTS if weights else ()) + PER_SHARD
    model = costs.net.meta["model"]
    ep = plans.ep if model.get("moe") else np.ones_like(plans.ep)
    span_c, span_e = int(plans.cp.max(initial=1)) + 1, int(ep.max(initial=1)) + 1
    keys, group = _unique((plans.tp * span_e + ep) * span_c + plans.cp)  # each (tp, ep, cp) once, O(n)
    span_b = int(plans.batch.max(initial=0)) + 1
    combos, combo = _unique((plans.device * len(PRECISIONS) + plans.precision) * span_b + plans.batch)
    rows, row = _unique(group * len(combos) + combo)
    of_group, of_combo = np.divmod(rows, len(combos))
    kd, batch = np.divmod(combos[of_combo], span_b)
    device, precision = np.divmod(kd, len(PRECISIONS))
    ends, tables = np.cumsum(np.bincount(of_group, minlength=len(keys))), []
    for key, lo, hi in zip(keys, np.r_[0, ends[:-1]], ends, strict=True):
        te, cp = divmod(int(key), span_c)
        tp, e = divmod(te, span_e)
        whole = shard(model, tp, costs.rules, e)
        part = shard({**model, "seq_len": model["seq_len"] // cp}, tp, costs.rules, e) if cp > 1 else whole
        at = (device[lo:hi], precision[lo:hi], batch[lo:hi])
        tables.append(part_times(part, devices, eff, at, weights, whole if cp > 1 else None, cp, e))
    columns = np.vstack(tables).T.copy() if tables else np.zeros((len(names), 0))
    return names, columns, row
