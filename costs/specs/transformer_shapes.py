"""Transformer layer types: per-sample shapes and parameter counts (see :mod:`costs.specs.transformer`).

Shapes carry the sequence: tokens ``(seq,)``, hidden states ``(seq, d)``.
"""

from __future__ import annotations

from costs.errors import SpecError
from costs.specs.nodes import Layer, Shape, ShapedLayer, one_input


def _seq(layer: Layer, in_shapes) -> Shape:
    shape = one_input(layer, in_shapes)
    if len(shape) != 2:
        raise SpecError(f"{layer.type} needs a (seq, d) input, got {list(shape)}", layer=layer.name)
    return shape


def _pos(layer: Layer, key: str, default: int | None = None) -> int:
    value = layer.spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise SpecError(f"'{key}' must be a positive integer, got {value!r}", layer=layer.name)
    return value


# ---- shapes --------------------------------------------------------------------------------


def _embedding_shape(layer, in_shapes, rules) -> Shape:
    shape = one_input(layer, in_shapes)
    if len(shape) != 1:
        raise SpecError(f"Embedding needs a (seq,) token input, got {list(shape)}", layer=layer.name)
    _pos(layer, "vocab")
    positions = int(layer.spec.get("positions", 0))
    if positions and shape[0] > positions:
        raise SpecError(f"sequence {shape[0]} exceeds the {positions} learned positions", layer=layer.name)
    return (shape[0], _pos(layer, "d_model"))


def _linear_shape(layer, in_shapes, rules) -> Shape:
    return (_seq(layer, in_shapes)[0], _pos(layer, "num_outputs"))


def _same_seq_shape(layer, in_shapes, rules) -> Shape:
    return _seq(layer, in_shapes)


def _add_shape(layer, in_shapes, rules) -> Shape:
    if len(in_shapes) < 2 or any(s != in_shapes[0] for s in in_shapes[1:]):
        raise SpecError(
            f"Add needs two or more equal shapes, got {[list(s) for s in in_shapes]}", layer=layer.name
        )
    return in_shapes[0]


def _bmm_shape(layer, in_shapes, rules) -> Shape:
    if len(in_shapes) != 2 or len(in_shapes[0]) != 3 or len(in_shapes[1]) != 3:
        raise SpecError("BatchedMatMul takes two (b, m, k) and (b, k, n) parents", layer=layer.name)
    (b, m, k), (b2, k2, n) = in_shapes
    if b != b2 or k != k2:
        raise SpecError(f"cannot multiply {list(in_shapes[0])} by {list(in_shapes[1])}", layer=layer.name)
    return (b, m, n)


def _heads(layer: Layer) -> tuple[int, int, int]:
    h, hd = _pos(layer, "n_heads"), _pos(layer, "head_dim")
    kv = _pos(layer, "n_kv_heads", h)
    if h % kv:
        raise SpecError(f"n_heads {h} is not a multiple of n_kv_heads {kv}", layer=layer.name)
    return h, kv, hd


def v_head_dim(layer: Layer) -> int:
    """Width of a value head: head_dim unless set apart (MLA's v_head_dim)."""
    return _pos(layer, "v_head_dim", _heads(layer)[2])


def _attention_shape(layer, in_shapes, rules) -> Shape:
    s, width = _seq(layer, in_shapes)
    h, kv, hd = _heads(layer)
    vd = v_head_dim(layer)
    if width != (h + kv) * hd + kv * vd:
        raise SpecError(
            f"input width {width} is not (n_heads + n_kv_heads) x head_dim + n_kv_heads x v_head_dim"
            f" = {(h + kv) * hd + kv * vd}",
            layer=layer.name,
        )
    window(layer)
    return (s, h * vd)


def mla_dims(layer: Layer) -> tuple[int, int, int, int, int, int]:
    """(heads, q_lora_rank or 0, kv_lora_rank, qk_nope, qk_rope, v_head_dim) of an MLA projection."""
    q = layer.spec.get("q_lora_rank") or 0
    if q:
        _pos(layer, "q_lora_rank")
    keys = ("n_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    h, kv, nope, rope, v = (_pos(layer, k) for k in keys)
    return h, q, kv, nope, rope, v


def _mla_shape(layer, in_shapes, rules) -> Shape:
    s, _ = _seq(layer, in_shapes)
    h, _, _, nope, rope, v = mla_dims(layer)
    return (s, h * (2 * (nope + rope) + v))  # Q and K of nope + rope per head, then V


def _qk_norm_shape(layer, in_shapes, rules) -> Shape:
    s, width = _seq(layer, in_shapes)
    h, kv, hd = _heads(layer)
    if width != (h + 2 * kv) * hd:
        raise SpecError(
            f"input width {width} is not (n_heads + 2 n_kv_heads) x head_dim = {(h + 2 * kv) * hd}",
            layer=layer.name,
        )
    return (s, width)


def window(layer: Layer) -> tuple[int, float]:
    """(keys a local query attends, share of the layer that is local); (0, 0) without a window."""
    w = layer.spec.get("window")
    if w is None:
        return 0, 0.0
    _pos(layer, "window")
    share = layer.spec.get("window_share", 1.0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
        raise SpecError(f"'window_share' must be a number from 0 to 1, got {share!r}", layer=layer.name)
    return int(w), float(share)


def _swiglu_shape(layer, in_shapes, rules) -> Shape:
    s, width = _seq(layer, in_shapes)
    if width % 2:
        raise SpecError(f"SwiGLU needs an even width (gate and up halves), got {width}", layer=layer.name)
    return (s, width // 2)


def _moe_shape(layer, in_shapes, rules) -> Shape:
    shape = _seq(layer, in_shapes)
    e, k = _pos(layer, "n_experts"), _pos(layer, "top_k")
    _pos(layer, "d_ff")
    if k > e:
        raise SpecError(f"top_k {k} exceeds n_experts {e}", layer=layer.name)
    return shape


def _lm_head_shape(layer, in_shapes, rules) -> Shape:
    return (_seq(layer, in_shapes)[0], _pos(layer, "vocab"))


def _loss_shape(layer, in_shapes, rules) -> Shape:
    _seq(layer, in_shapes)
    return (1,)


# ---- parameters ----------------------------------------------------------------------------


def _tables(layer: Layer) -> list[int]:
    """Rows of each embedding table: tokens, learned positions, token types (BERT)."""
    return [int(layer.spec[k]) for k in ("vocab", "positions", "types") if int(layer.spec.get(k, 0)) > 0]


def _embedding_params(s: ShapedLayer) -> int:
    """The tables' rows x d_model; none for a lookup into another layer's table (``shared``:
    DeepSeek-V3's multi-token-prediction modules read the main embedding)."""
    return 0 if s.layer.spec.get("shared", False) else sum(_tables(s.layer)) * s.out_shape[1]


def _linear_params(s: ShapedLayer) -> int:
    d, m = s.in_shapes[0][1], s.out_shape[1]
    return d * m + (m if s.layer.spec.get("bias", False) else 0)


def _norm_params(s: ShapedLayer) -> int:
    return (2 if s.type == "LayerNorm" else 1) * s.out_shape[-1]


def _mla_params(s: ShapedLayer) -> int:
    """DeepSeek-V2/V3's multi-head latent attention projections (arXiv:2405.04434, §2.1.2):
    queries through a ``q_lora_rank`` latent (down, RMSNorm, up) or directly; keys and values
    through a ``kv_lora_rank`` latent (down with the shared RoPE key, RMSNorm, up to each head's
    no-RoPE key and value). The output projection is a separate Linear."""
    d = s.in_shapes[0][1]
    h, q, kv, nope, rope, v = mla_dims(s.layer)
    queries = d * q + q + q * h * (nope + rope) if q else d * h * (nope + rope)
    return queries + d * (kv + rope) + kv + kv * h * (nope + v)


def _qk_norm_params(s: ShapedLayer) -> int:
    """One RMSNorm gain over head_dim for the queries, one for the keys, shared by every head
    (Qwen3's and Gemma 3's q_norm and k_norm)."""
    return 2 * _heads(s.layer)[2]


def _expert_params(s: ShapedLayer) -> int:
    """One expert's feed-forward: SwiGLU has gate, up and down matrices; GELU up and down."""
    d, f = s.in_shapes[0][1], int(s.layer.spec["d_ff"])
    bias = f + d if s.layer.spec.get("bias", False) else 0
    return (3 if gated(s.layer.spec) else 2) * d * f + bias


def gated(spec: dict) -> bool:
    """Whether a feed-forward is gated (SwiGLU, GeGLU: gate, up and down matrices)."""
    return spec.get("activation", "swiglu") in ("swiglu", "geglu")


def _moe_params(s: ShapedLayer) -> int:
    d, e = s.in_shapes[0][1], int(s.layer.spec["n_experts"])
    return d * e + e * _expert_params(s)  # the router, then every expert


def moe_active_params(s: ShapedLayer) -> int:
    """Parameters one token uses: the router and its top-k experts."""
    d, e, k = s.in_shapes[0][1], int(s.layer.spec["n_experts"]), int(s.layer.spec["top_k"])
    return d * e + k * _expert_params(s)


def _lm_head_params(s: ShapedLayer) -> int:
    d, v = s.in_shapes[0][1], s.out_shape[1]
    own = 0 if s.layer.spec.get("tied", False) else d * v  # tied: the embedding's matrix
    return own + (v if s.layer.spec.get("bias", False) else 0)
