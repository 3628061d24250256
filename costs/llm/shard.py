"""One tensor-parallel shard of a transformer: the per-GPU layers the LLM evaluator sums.

Megatron-LM's tensor parallelism (Shoeybi et al. 2019, arXiv:1909.08053, §3) splits the QKV
and MLP-up projections by columns and the attention-output and MLP-down projections by rows,
so each of ``t`` GPUs holds ``n_heads / t`` attention heads, ``d_ff / t`` of the feed-forward
and ``vocab / t`` of the embedding and LM head (vocabulary-parallel). Key/value heads fewer
than ``t`` are replicated (one per GPU). Norms, residual adds and dropout are not split: every
GPU of the group computes them on the whole hidden state, unless sequence parallelism splits
them along the sequence (Korthikanti et al. 2022, arXiv:2205.05198, §4.2.2).

All ``n_layers`` blocks of a transformer are the same, so the shard is built as a spec with
one block (:mod:`costs.specs.transformer_spec`), shaped and costed by the same code as any net
(:mod:`costs.specs.graph`, :mod:`costs.specs.coefficients`, :mod:`costs.modern.roofline`); the evaluator
multiplies the block by the layers of a pipeline stage. A mixture of experts after dense layers
(DeepSeek-V3's ``first_dense``) is a dense and a sparse block, each weighted by its share of
the layers (:func:`block_weights`): the weighted block is the average layer. Experts of a mixture of experts stay
whole in the shard's compute (the tokens a GPU sends its experts equal, on average, the tokens
it holds, whatever the expert-parallel degree); expert parallelism divides their parameters, and
a GPU reads and writes the weights of its ``ceil(n_experts / ep)`` experts only.
Multi-token-prediction modules (``mtp_layers``, DeepSeek-V3) sit after the last block, on the
last pipeline stage: the shard counts them with the head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from costs.modern import roofline
from costs.specs import coefficients, layers
from costs.specs.graph import build_net
from costs.specs.transformer_spec import build_layers

EMBED, BLOCK, HEAD = 0, 1, 2  # the part of the net a shard layer belongs to
_REPLICATED = ("LayerNorm", "RMSNorm", "Add", "Dropout")  # not split by tensor parallelism


def block_weights(model: dict) -> tuple[float, ...]:
    """The share of the transformer layers each block of the shard stands for: one block for
    all of them, or a dense and a sparse block (a mixture of experts after dense layers)."""
    moe = model.get("moe") or {}
    dense = moe.get("first_dense", 0)
    if not dense:
        return (1.0,)
    return (dense / model["n_layers"], 1.0 - dense / model["n_layers"])


def dims(model: dict) -> dict:
    """The model description with the derived sizes filled in (head_dim, n_kv_heads)."""
    m = dict(model)
    m.setdefault("n_kv_heads", m["n_heads"])
    m.setdefault("head_dim", m["d_model"] // m["n_heads"])
    return m


def shard_model(model: dict, tp: int) -> dict:
    """The description of one GPU's shard under ``tp``-way tensor parallelism, one block."""
    m = dims(model)
    kv = m["n_kv_heads"]
    if m.get("moe") and "d_ff" in m["moe"]:  # fine-grained experts: each expert split like an MLP
        m["moe"] = {**m["moe"], "d_ff": -(-m["moe"]["d_ff"] // tp)}
    if m.get("window") is not None:  # the one block stands for the local and the global layers
        local = m.pop("local_layers", None)
        m["window_share"] = 1.0 if local is None else len(set(local)) / m["n_layers"]
    layers = 1
    if m.get("moe") and m["moe"].get("first_dense", 0):  # a dense block, then a sparse one
        m["moe"] = {**m["moe"], "first_dense": 1}
        layers = 2
    m.update(
        n_layers=layers,
        batch=1,
        n_heads=max(m["n_heads"] // tp, 1),
        n_kv_heads=kv // tp if kv % tp == 0 else 1,
        d_ff=-(-m["d_ff"] // tp),
        vocab=-(-m["vocab"] // tp),
    )
    return m


@dataclass(frozen=True)
class Shard:
    """Per-GPU layers of one tensor-parallel degree (one block, embedding and head)."""

    tp: int
    terms: roofline.ModernTerms  # (L, 3) of the one-block shard
    part: np.ndarray  # (L,) EMBED, BLOCK or HEAD
    replicated: np.ndarray  # (L,) bool: a block layer tensor parallelism does not split
    core_attention: np.ndarray  # (L,) bool: standard (non-flash) attention: selective recompute
    attention: np.ndarray  # (L,) bool: a core attention layer, flash or not (context parallelism)
    weight: np.ndarray  # (L,) share of the transformer layers a block layer stands for (1 outside)
    params: np.ndarray  # (3,) parameters per GPU of the embedding side, one block, the head side
    expert_params: float  # parameters of one block's experts (all of them), per GPU at EP 1
    flops: np.ndarray  # (3,) training FLOPs per sample of each part (tc + vec), per GPU
    fwd_flops: np.ndarray  # (3,) forward FLOPs per sample of each part (full recomputation)
    attention_fwd_flops: float  # forward FLOPs per sample of the core attention (selective)


def _part(name: str) -> int:
    if name.startswith(("layer0/", "layer1/")):
        return BLOCK
    return EMBED if name in ("data", "embed", "embed_norm", "embed_drop") else HEAD


# A calibration scores a hundred (net, sequence length) groups at a few TP degrees each, every
# trial: the cache must hold them all (a shard is one block's layers, a few kB).
@lru_cache(maxsize=2048)
def _build(model_json: str, tp: int, rules, ep: int = 1) -> Shard:
    model = json.loads(model_json)
    m = shard_model(model, tp)
    if ep > 1 and m.get("moe"):  # the experts whose weights this GPU holds
        m["moe"] = {**m["moe"], "local_experts": -(-m["moe"]["n_experts"] // ep)}
    net = build_net({"name": f"shard-tp{tp}", "layers": build_layers(m)}, f"shard-tp{tp}", rules)
    costs = coefficients.build(net, rules)
    t = roofline.build(net, costs.params)
    part = np.array([_part(s.name) for s in net.layers])
    block = part == BLOCK
    shares = block_weights(model)
    index = [
        int(s.name.split("/")[0].removeprefix("layer")) if p == BLOCK else 0 for s, p in zip(net.layers, part)
    ]
    w = np.where(block, np.array(shares)[index], 1.0)  # a block layer stands for its share
    replicated = block & np.array([s.type in _REPLICATED for s in net.layers])
    attention = np.array([s.type == "Attention" for s in net.layers])
    core = attention & np.array([not s.layer.spec.get("flash") for s in net.layers])
    params = np.array([float((w * costs.params)[part == k].sum()) for k in (EMBED, BLOCK, HEAD)])
    experts, head_experts = _experts(net, part, w)
    params[HEAD] -= head_experts * (1.0 - 1.0 / ep)  # an MTP layer's experts spread over EP as well
    flops = w * (t.tc + t.vec).sum(axis=1)
    fwd = w * (t.tc + t.vec)[:, 0]
    return Shard(
        tp,
        t,
        part,
        replicated,
        core,
        attention,
        w,
        params,
        float(experts),
        np.array([flops[part == k].sum() for k in (EMBED, BLOCK, HEAD)]),
        np.array([fwd[part == k].sum() for k in (EMBED, BLOCK, HEAD)]),
        float(fwd[core].sum()),
    )


def _experts(net, part: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Expert parameters (routers excluded) of the blocks, weighted by their shares, and of the
    head side (DeepSeek-V3's multi-token-prediction layer)."""
    moe = [(s, p, wi) for s, p, wi in zip(net.layers, part, w, strict=True) if s.type == "MoE"]
    blocks = sum(wi * (layers.params(s) - _router(s)) for s, p, wi in moe if p == BLOCK)
    return float(blocks), float(sum(layers.params(s) - _router(s) for s, p, _ in moe if p == HEAD))


def _router(s) -> int:
    """The router's parameters (d_model x n_experts), the part of a MoE layer EP replicates."""
    return s.in_shapes[0][1] * int(s.layer.spec["n_experts"])


def shard(model: dict, tp: int, rules, ep: int = 1) -> Shard:
    """The (cached) shard of a transformer description at tensor-parallel degree ``tp`` and
    expert-parallel degree ``ep``."""
    return _build(json.dumps(model, sort_keys=True), int(tp), rules, int(ep) if model.get("moe") else 1)
