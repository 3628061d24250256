"""Transformer layer types: shapes, parameters and per-phase counts under ``planner`` and ``modern``.

A sample is one sequence: a token input has the per-sample shape ``(seq,)`` and a hidden state
``(seq, d)``. Every type here states its work once, as a :class:`Cost` per phase and per
sample (:func:`costs`); the ``planner`` rules read it as PALEO-style :class:`~costs.specs.conv.Work`
(fp32 tensors) and the ``modern`` rules as roofline terms (:mod:`costs.modern.roofline`), so both count
the same FLOPs. Conventions: 2 FLOPs per multiply-add; a matmul's backward is twice its forward
(data and weight gradients, each a GEMM of the forward's size).

Attention takes the fused Q, K, V projection ``(seq, (n_heads + 2 n_kv_heads) head_dim)``:
multi-head when ``n_kv_heads == n_heads``, grouped-query when smaller, multi-query at 1. Its
score FLOPs (Q K^T and P V, 4 seq^2 n_heads head_dim forward) are halved only by a fused
``flash`` kernel on a ``causal`` mask, which skips the masked tiles (Dao et al. 2022,
arXiv:2205.14135); a standard kernel computes the full seq x seq scores and writes them to
memory (read back by the softmax and P V), a flash kernel keeps them on chip. Flash's
recomputation of the scores in the backward pass is not counted: these are model FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from costs.specs.conv import F32, Work
from costs.specs.nodes import ShapedLayer, prod
from costs.specs.transformer_shapes import (
    _add_shape,
    _attention_shape,
    _bmm_shape,
    _embedding_params,
    _embedding_shape,
    _expert_params,
    _heads,
    _linear_params,
    _linear_shape,
    _lm_head_params,
    _lm_head_shape,
    _loss_shape,
    _mla_params,
    _mla_shape,
    _moe_params,
    _moe_shape,
    _norm_params,
    _qk_norm_params,
    _qk_norm_shape,
    _same_seq_shape,
    _swiglu_shape,
    _tables,
    gated,
    mla_dims,
    v_head_dim,
    window,
)
from costs.specs.transformer_shapes import (
    moe_active_params as moe_active_params,
)

PHASES = ("fwd", "bwd_data", "bwd_filter")


@dataclass(frozen=True)
class Cost:
    """One phase of one layer, per sample unless said otherwise.

    ``tc`` GEMM FLOPs, ``vec`` elementwise FLOPs, ``act`` activation elements read + written,
    ``weights`` weight elements read or written per step (batch-independent), ``fixed`` bytes
    whose size does not follow the precision (fp32 loss, 1-byte masks), ``kernels`` launched,
    ``gemm`` the GEMM shape (rows per sample, fixed rows, columns) or None.
    """

    tc: float = 0.0
    vec: float = 0.0
    act: float = 0.0
    weights: float = 0.0
    fixed: float = 0.0
    kernels: int = 0
    gemm: tuple[int, int, int] | None = None


def _gemm(rows: int, k: int, m: int, from_data: bool = False) -> dict[str, Cost]:
    """A weight GEMM X[rows, k] W[k, m] per sample: forward, data and weight gradients."""
    f = 2.0 * rows * k * m
    out = {
        "fwd": Cost(tc=f, act=rows * (k + m), weights=k * m, kernels=1, gemm=(rows, 0, m)),
        "bwd_filter": Cost(tc=f, act=rows * (k + m), weights=k * m, kernels=1, gemm=(0, m, k)),
    }
    if not from_data:
        out["bwd_data"] = Cost(tc=f, act=rows * (k + m), weights=k * m, kernels=1, gemm=(rows, 0, k))
    return out


def _merge(*parts: dict[str, Cost]) -> dict[str, Cost]:
    """The parts' costs summed per phase; the GEMM shape (which sets the tile and wave
    utilisation of the phase's GEMM FLOPs) is that of the part with the most GEMM FLOPs, so a
    mixture of experts is judged by its expert GEMMs, not by its narrow router."""
    out: dict[str, Cost] = {}
    heaviest: dict[str, float] = {}
    for part in parts:
        for phase, c in part.items():
            o = out.get(phase, Cost())
            gemm = o.gemm
            if c.gemm is not None and (gemm is None or c.tc > heaviest[phase]):
                gemm, heaviest[phase] = c.gemm, c.tc
            out[phase] = Cost(
                o.tc + c.tc,
                o.vec + c.vec,
                o.act + c.act,
                o.weights + c.weights,
                o.fixed + c.fixed,
                o.kernels + c.kernels,
                gemm,
            )
    return out


def _pointwise(elems_in: float, elems_out: float, fwd_flops: float, bwd_flops: float) -> dict[str, Cost]:
    """An elementwise op: forward reads x writes y; backward reads x (or y) and dy, writes dx."""
    return {
        "fwd": Cost(vec=fwd_flops, act=elems_in + elems_out, kernels=1),
        "bwd_data": Cost(vec=bwd_flops, act=2 * elems_in + elems_out, kernels=1),
    }


# ---- costs per phase and sample --------------------------------------------------------------


def _embedding_cost(s: ShapedLayer) -> dict[str, Cost]:
    """Gather rows (and sum the tables); backward scatter-adds dy into each table's rows."""
    seq, d = s.out_shape
    t = len(_tables(s.layer))
    return {
        "fwd": Cost(vec=seq * d * t, act=seq * d * (t + 1), fixed=8.0 * seq, kernels=t),
        "bwd_filter": Cost(vec=seq * d * t, act=seq * d * 2 * t, fixed=8.0 * seq, kernels=t),
    }


def _linear_cost(s: ShapedLayer) -> dict[str, Cost]:
    seq, d = s.in_shapes[0]
    out = _gemm(seq, d, s.out_shape[1], "data" in s.layer.parents)
    if s.layer.spec.get("bias", False):  # the bias gradient: a column reduction of dy
        m = s.out_shape[1]
        out = _merge(out, {"bwd_filter": Cost(vec=seq * m, act=seq * m, kernels=1)})
    return out


def _bmm_cost(s: ShapedLayer) -> dict[str, Cost]:
    (b, m, k), (_, _, n) = s.in_shapes
    f = 2.0 * b * m * k * n
    elems = b * (m * k + k * n + m * n)
    return {
        "fwd": Cost(tc=f, act=elems, kernels=1, gemm=(b * m, 0, n)),
        "bwd_data": Cost(tc=2 * f, act=2 * elems, kernels=2, gemm=(b * m, 0, k)),
    }


def _norm_cost(s: ShapedLayer) -> dict[str, Cost]:
    """LayerNorm: mean, variance, normalise, scale and shift; RMSNorm drops the mean and shift."""
    x = prod(s.out_shape)
    ln = s.type == "LayerNorm"
    return {
        "fwd": Cost(vec=(8 if ln else 5) * x, act=3 * x, kernels=1),
        "bwd_data": Cost(vec=(10 if ln else 7) * x, act=3 * x, kernels=1),
        "bwd_filter": Cost(vec=(4 if ln else 2) * x, act=2 * x, kernels=1),
    }


def score_share(seq: int, spec: dict, w: int, local: float) -> float:
    """Share of the seq x seq scores a kernel computes. A standard kernel computes them all; a
    flash kernel on a causal mask skips the masked tiles, about half, and with a sliding window
    of ``w`` keys (Mistral, Beltagy et al. 2020, arXiv:2004.05150) also those beyond the window:
    query i attends min(i + 1, w) keys, about ``seq w - w^2 / 2`` pairs, on the ``local``
    share of the layers."""
    if not (spec.get("flash", False) and spec.get("causal", False)):
        return 1.0
    keys = min(w, seq) if w else seq
    windowed = (seq * keys - keys * keys / 2.0) / (seq * seq)
    return local * windowed + (1.0 - local) * 0.5


def _attention_cost(s: ShapedLayer) -> dict[str, Cost]:
    seq, width = s.in_shapes[0]
    h, _, hd = _heads(s.layer)
    vd = v_head_dim(s.layer)
    y = seq * h * vd
    flash = bool(s.layer.spec.get("flash", False))
    part = score_share(seq, s.layer.spec, *window(s.layer))
    scores = h * seq * seq  # elements of the seq x seq score matrices
    mm = part * 2.0 * seq * seq * h * (hd + vd)  # Q K^T and P V
    soft = part * 5.0 * scores  # max, subtract, exp, sum, divide
    if flash:  # scores stay on chip; the row log-sum-exp is saved for the backward
        return {
            "fwd": Cost(tc=mm, vec=soft, act=width + y + h * seq, kernels=1),
            "bwd_data": Cost(tc=2 * mm, vec=part * 3.0 * scores, act=2 * width + 2 * y + h * seq, kernels=2),
        }
    return {
        "fwd": Cost(tc=mm, vec=soft, act=width + 4 * scores + y, kernels=3),
        "bwd_data": Cost(tc=2 * mm, vec=3.0 * scores, act=2 * width + 2 * y + 8 * scores, kernels=5),
    }


def _softmax_cost(s: ShapedLayer) -> dict[str, Cost]:
    x = prod(s.out_shape)
    return _pointwise(x, x, 5 * x, 3 * x)


def _gelu_cost(s: ShapedLayer) -> dict[str, Cost]:
    x = prod(s.out_shape)  # the tanh approximation: about 8 FLOPs forward
    return _pointwise(x, x, 8 * x, 12 * x)


def _swiglu_cost(s: ShapedLayer) -> dict[str, Cost]:
    y = prod(s.out_shape)  # silu(gate) * up: sigmoid, two products
    return _pointwise(2 * y, y, 6 * y, 10 * y)


def _geglu_cost(s: ShapedLayer) -> dict[str, Cost]:
    y = prod(s.out_shape)  # gelu(gate) * up: the tanh GELU (about 8 FLOPs) and one product
    return _pointwise(2 * y, y, 9 * y, 14 * y)


def _mla_cost(s: ShapedLayer) -> dict[str, Cost]:
    """The MLA projections' GEMMs (see ``_mla_params``) and the two latent RMSNorms."""
    seq, d = s.in_shapes[0]
    h, q, kv, nope, rope, v = mla_dims(s.layer)
    gemms = [_gemm(seq, d, kv + rope), _gemm(seq, kv, h * (nope + v))]
    gemms += [_gemm(seq, d, q), _gemm(seq, q, h * (nope + rope))] if q else [_gemm(seq, d, h * (nope + rope))]
    x = seq * (q + kv)  # the latents the norms read
    norms = {
        "fwd": Cost(vec=5 * x, act=3 * x, kernels=2),
        "bwd_data": Cost(vec=7 * x, act=3 * x, kernels=2),
        "bwd_filter": Cost(vec=2 * x, act=2 * x, kernels=2),
    }
    return _merge(*gemms, norms)


def _qk_norm_cost(s: ShapedLayer) -> dict[str, Cost]:
    """RMSNorm of each query and key head over head_dim; values pass through untouched."""
    h, kv, hd = _heads(s.layer)
    x = s.out_shape[0] * (h + kv) * hd
    return {
        "fwd": Cost(vec=5 * x, act=3 * x, kernels=1),
        "bwd_data": Cost(vec=7 * x, act=3 * x, kernels=1),
        "bwd_filter": Cost(vec=2 * x, act=2 * x, kernels=1),
    }


def _add_cost(s: ShapedLayer) -> dict[str, Cost]:
    y, k = prod(s.out_shape), len(s.in_shapes)
    return {
        "fwd": Cost(vec=(k - 1) * y, act=(k + 1) * y, kernels=1),
        "bwd_data": Cost(vec=y, act=3 * y, kernels=1),  # the gradient sum where the stream forks
    }


def _moe_cost(s: ShapedLayer) -> dict[str, Cost]:
    """Router GEMM and softmax/top-k, then each token through top_k experts (k x its GEMMs)."""
    seq, d = s.in_shapes[0]
    e, k, f = int(s.layer.spec["n_experts"]), int(s.layer.spec["top_k"]), int(s.layer.spec["d_ff"])
    swiglu = gated(s.layer.spec)
    up = _gemm(seq * k, d, (2 if swiglu else 1) * f)
    down = _gemm(seq * k, f, d)
    act = _pointwise(2 * seq * k * f, seq * k * f, 6 * seq * k * f, 10 * seq * k * f)
    if not swiglu:
        act = _pointwise(seq * k * f, seq * k * f, 8 * seq * k * f, 12 * seq * k * f)
    route = _pointwise(seq * e, seq * e, 6 * seq * e, 3 * seq * e)  # softmax, top-k
    combine = _pointwise(seq * k * d, seq * d, 2 * seq * k * d, 2 * seq * k * d)  # gate-weighted sum
    # The weights of every expert on the GPU (all e, or its share under expert parallelism) are
    # read (forward, data gradient) and written (gradients).
    local = int(s.layer.spec.get("local_experts", e))
    moved = {p: Cost(weights=(local - 1) * _expert_params(s)) for p in PHASES}  # the GEMMs count one
    return _merge(_gemm(seq, d, e), up, down, act, route, combine, moved)


def _lm_head_cost(s: ShapedLayer) -> dict[str, Cost]:
    seq, d = s.in_shapes[0]
    return _gemm(seq, d, s.out_shape[1])


def _loss_cost(s: ShapedLayer) -> dict[str, Cost]:
    """Softmax cross-entropy over the vocabulary in fp32 (autocast keeps the loss in fp32)."""
    x = prod(s.in_shapes[0])
    return {
        "fwd": Cost(vec=5.0 * x, fixed=8.0 * x, kernels=2),
        "bwd_data": Cost(vec=2.0 * x, fixed=8.0 * x, kernels=1),
    }


@dataclass(frozen=True)
class Kind:
    shape: object
    params: object
    cost: object


_NONE = lambda s: 0  # noqa: E731

KINDS: dict[str, Kind] = {
    "Embedding": Kind(_embedding_shape, _embedding_params, _embedding_cost),
    "Linear": Kind(_linear_shape, _linear_params, _linear_cost),
    "BatchedMatMul": Kind(_bmm_shape, _NONE, _bmm_cost),
    "LayerNorm": Kind(_same_seq_shape, _norm_params, _norm_cost),
    "RMSNorm": Kind(_same_seq_shape, _norm_params, _norm_cost),
    "Attention": Kind(_attention_shape, _NONE, _attention_cost),
    "SeqSoftmax": Kind(_same_seq_shape, _NONE, _softmax_cost),
    "GELU": Kind(_same_seq_shape, _NONE, _gelu_cost),
    "SwiGLU": Kind(_swiglu_shape, _NONE, _swiglu_cost),
    "GeGLU": Kind(_swiglu_shape, _NONE, _geglu_cost),
    "QKNorm": Kind(_qk_norm_shape, _qk_norm_params, _qk_norm_cost),
    "MLA": Kind(_mla_shape, _mla_params, _mla_cost),
    "Add": Kind(_add_shape, _NONE, _add_cost),
    "MoE": Kind(_moe_shape, _moe_params, _moe_cost),
    "LMHead": Kind(_lm_head_shape, _lm_head_params, _lm_head_cost),
    "CrossEntropy": Kind(_loss_shape, _NONE, _loss_cost),
}
TYPES = frozenset(KINDS)
# Layers whose GEMMs Transformer Engine runs in FP8 (te.Linear and its fused forms, the experts'
# grouped GEMMs); attention's batched matmuls and the LM head stay bf16 (see costs.hardware).
FP8_TYPES = frozenset(("Linear", "MoE", "MLA"))


def fused_attention(s: ShapedLayer) -> bool:
    """Whether the layer is attention in one fused (flash) kernel, whose rate differs from a
    GEMM's (Dao 2023, arXiv:2307.08691; Shah et al. 2024, arXiv:2407.08608)."""
    return s.type == "Attention" and bool(s.layer.spec.get("flash", False))


def param_tensors(s: ShapedLayer) -> int:
    """Parameter tensors of a layer (the optimizer launches work per tensor)."""
    bias = 1 if s.layer.spec.get("bias", False) else 0
    if s.type == "MoE":
        per_expert = (3 if gated(s.layer.spec) else 2) + 2 * bias
        return 1 + int(s.layer.spec["n_experts"]) * per_expert
    if s.type == "Embedding":
        return len(_tables(s.layer))
    if s.type == "LMHead":
        return (0 if s.layer.spec.get("tied", False) else 1) + bias
    if s.type == "MLA":
        return 7 if s.layer.spec.get("q_lora_rank") else 4  # projections and latent norms
    return {"Linear": 1 + bias, "LayerNorm": 2, "RMSNorm": 1, "QKNorm": 2}.get(s.type, 0)


def costs(s: ShapedLayer) -> dict[str, Cost]:
    """Per-sample :class:`Cost` of each phase the layer runs."""
    return KINDS[s.type].cost(s)


def work(s: ShapedLayer, n: int, rules, algorithm: str) -> dict[str, Work]:
    """PALEO-style work at batch ``n`` under the ``planner`` rules: every tensor in fp32."""
    return {
        phase: Work([n * (c.tc + c.vec)], [F32 * (n * c.act + c.weights) + n * c.fixed])
        for phase, c in costs(s).items()
    }
