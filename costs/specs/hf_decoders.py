"""Decoder-only ``config.json`` families: RoPE, RMSNorm, gated feed-forward (:mod:`costs.specs.hf_config`).

Each reader follows its ``transformers`` configuration class (field names and defaults as in
transformers 5.x, ``src/transformers/models/<family>/configuration_<family>.py``) and the
modelling file's parameters, which set what a description must say:

- ``llama``: ``attention_bias`` on the Q, K, V and output projections, ``mlp_bias`` on the MLP.
- ``mistral``, ``mixtral``: no biases; ``sliding_window`` on every layer (Jiang et al. 2023,
  arXiv:2310.06825, §2); Mixtral's ``num_local_experts`` experts of ``intermediate_size``.
- ``qwen2``: biases on Q, K and V only; a window only with ``use_sliding_window``, on the
  layers from ``max_window_layers`` on.
- ``qwen3``: no biases (``attention_bias`` on Q, K, V, O), an RMSNorm over head_dim of each
  query and key head (``q_norm``, ``k_norm``); ``qwen3_moe`` adds ``num_experts`` experts of
  ``moe_intermediate_size``, top ``num_experts_per_tok``, no shared expert, on every layer.
- ``gemma``: GeGLU (gelu_pytorch_tanh), ``head_dim`` apart from hidden / heads, tied
  embeddings; ``gemma2`` adds norms of the attention and MLP outputs and alternates
  sliding-window (even) and global layers; ``gemma3_text`` adds Q/K norms and five local
  layers per global one (``sliding_window_pattern``); ``gemma3`` (the multimodal checkpoint)
  is read as its ``text_config``: the language model only, without the SigLIP vision tower.
- ``deepseek_v3``: multi-head latent attention and a mixture of routed and shared experts after
  dense layers (:func:`_deepseek_v3`).
- ``phi3``: Llama's layout (fused QKV and gate/up projections: the same parameters), no
  biases, ``sliding_window`` on every layer when set.

A newer config's ``layer_types`` (``sliding_attention`` / ``full_attention`` per layer) wins
over the family's rule.
"""

from __future__ import annotations

from typing import Any

from costs.errors import SpecError
from costs.specs.hf_fields import as_bool, as_int, choice, optional_int
from costs.specs.transformer_spec import MAX_MTP

_GELU = ("gelu_pytorch_tanh", "gelu", "gelu_new")
_LAYER_TYPES = ("sliding_attention", "full_attention")


def _heads(cfg: dict, head_dim: int | None) -> dict[str, int]:
    """Hidden size, heads, key/value heads and head_dim; ``head_dim`` is the family's default."""
    d = as_int(cfg, "hidden_size")
    heads = as_int(cfg, "num_attention_heads")
    kv = as_int(cfg, "num_key_value_heads", heads)
    if heads % kv:
        raise SpecError(
            f"config field 'num_key_value_heads' ({kv}) must divide 'num_attention_heads' ({heads})"
        )
    if cfg.get("head_dim", head_dim) is None:
        if d % heads:
            raise SpecError(
                f"config field 'num_attention_heads' ({heads}) must divide 'hidden_size' ({d}) "
                "when 'head_dim' is not given"
            )
        hd = d // heads
    else:
        hd = as_int(cfg, "head_dim", head_dim)
    return {"d_model": d, "n_heads": heads, "n_kv_heads": kv, "head_dim": hd}


def _decoder(cfg: dict, *, head_dim: int | None = None, tied: bool = False, gelu: bool = False) -> dict:
    """The fields every decoder family shares."""
    if gelu:
        act_key = "hidden_activation" if cfg.get("hidden_activation") is not None else "hidden_act"
        choice(cfg, act_key, _GELU, "gelu_pytorch_tanh")
    else:
        choice(cfg, "hidden_act", ("silu",), "silu")
    return {
        **_heads(cfg, head_dim),
        "n_layers": as_int(cfg, "num_hidden_layers"),
        "d_ff": as_int(cfg, "intermediate_size"),
        "vocab": as_int(cfg, "vocab_size"),
        "seq_len": as_int(cfg, "max_position_embeddings"),
        "activation": "geglu" if gelu else "swiglu",
        "norm": "rmsnorm",
        "positional": "rope",
        "tied": as_bool(cfg, "tie_word_embeddings", tied),
        "attention": "flash",
    }


def _window(cfg: dict, n_layers: int, window: int | None, local) -> dict[str, Any]:
    """``window`` and ``local_layers`` of a description; ``local(i)`` is the family's rule."""
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers or set(types) - set(_LAYER_TYPES):
            raise SpecError(f"config field 'layer_types' must list {n_layers} of {', '.join(_LAYER_TYPES)}")
        chosen = [i for i, t in enumerate(types) if t == "sliding_attention"]
    else:
        chosen = [i for i in range(n_layers) if local(i)]
    if window is None or not chosen:
        return {}
    return {"window": window} if len(chosen) == n_layers else {"window": window, "local_layers": chosen}


def _every(i: int) -> bool:
    return True


def _biases(qkv: bool, out: bool, mlp: bool) -> dict[str, bool]:
    return {"bias": False, "qkv_bias": qkv, "out_bias": out, "mlp_bias": mlp}


def _top_k(cfg: dict, experts_key: str) -> dict[str, int]:
    e, k = as_int(cfg, experts_key), as_int(cfg, "num_experts_per_tok")
    if k > e:
        raise SpecError(f"config field 'num_experts_per_tok' ({k}) must not exceed '{experts_key}' ({e})")
    return {"n_experts": e, "top_k": k}


def _llama(cfg: dict) -> dict:
    attn = as_bool(cfg, "attention_bias", False)
    return {**_decoder(cfg), **_biases(attn, attn, as_bool(cfg, "mlp_bias", False))}


def _mistral(cfg: dict, window: int | None = 4096) -> dict:
    desc = {**_decoder(cfg), **_biases(False, False, False)}
    return {**desc, **_window(cfg, desc["n_layers"], optional_int(cfg, "sliding_window", window), _every)}


def _mixtral(cfg: dict) -> dict:
    return {**_mistral(cfg, None), "moe": _top_k(cfg, "num_local_experts")}


def _qwen_window(cfg: dict, n_layers: int) -> dict:
    """Qwen2/3: the window when ``use_sliding_window``, from layer ``max_window_layers`` on."""
    first = as_int(cfg, "max_window_layers", 28)
    used = as_bool(cfg, "use_sliding_window", False)
    window = optional_int(cfg, "sliding_window", 4096) if used else None
    return _window(cfg, n_layers, window, lambda i: i >= first)


def _qwen2(cfg: dict) -> dict:
    desc = {**_decoder(cfg), **_biases(True, False, False)}
    return {**desc, **_qwen_window(cfg, desc["n_layers"])}


def _qwen3(cfg: dict, head_dim: int | None = 128) -> dict:
    attn = as_bool(cfg, "attention_bias", False)
    desc = {**_decoder(cfg, head_dim=head_dim), **_biases(attn, attn, False), "qk_norm": True}
    return {**desc, **_qwen_window(cfg, desc["n_layers"])}


def _qwen3_moe(cfg: dict) -> dict:
    step = as_int(cfg, "decoder_sparse_step", 1)
    if step != 1:
        raise SpecError(f"config field 'decoder_sparse_step' must be 1 (every layer sparse), got {step}")
    dense = cfg.get("mlp_only_layers", [])
    if dense:
        raise SpecError(f"config field 'mlp_only_layers' must be empty (every layer sparse), got {dense!r}")
    moe = {**_top_k(cfg, "num_experts"), "d_ff": as_int(cfg, "moe_intermediate_size")}
    return {**_qwen3(cfg, head_dim=None), "moe": moe}


def _gemma(cfg: dict) -> dict:
    attn = as_bool(cfg, "attention_bias", False)
    return {**_decoder(cfg, head_dim=256, tied=True, gelu=True), **_biases(attn, attn, False)}


def _gemma2(cfg: dict) -> dict:
    desc = {**_gemma(cfg), "post_norms": True}
    window = optional_int(cfg, "sliding_window", 4096)
    return {**desc, **_window(cfg, desc["n_layers"], window, lambda i: i % 2 == 0)}


def _gemma3_text(cfg: dict) -> dict:
    desc = {**_gemma(cfg), "post_norms": True, "qk_norm": True}
    every = as_int(cfg, "sliding_window_pattern", 6)
    window = optional_int(cfg, "sliding_window", 4096)
    return {**desc, **_window(cfg, desc["n_layers"], window, lambda i: (i + 1) % every != 0)}


def _gemma3(cfg: dict) -> dict:
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        raise SpecError("config field 'text_config' must be an object (Gemma 3's language model)")
    return _gemma3_text(text)


def _phi3(cfg: dict) -> dict:
    desc = {**_decoder(cfg), **_biases(False, False, False)}
    return {**desc, **_window(cfg, desc["n_layers"], optional_int(cfg, "sliding_window"), _every)}


def _deepseek_v3(cfg: dict) -> dict:
    """DeepSeek-V3 (arXiv:2412.19437, §2.1): MLA, and a mixture of ``n_routed_experts`` fine-grained
    experts plus ``n_shared_experts`` shared ones after ``first_k_dense_replace`` dense layers.
    Its ``num_nextn_predict_layers`` multi-token-prediction modules (§2.2) are trained with it:
    they are costed (``mtp_layers``, :mod:`costs.specs.transformer_spec`), although transformers
    does not build them and the published 671B leaves them out (README_WEIGHTS.md: 11.5B more)."""
    freq = as_int(cfg, "moe_layer_freq", 1)
    if freq != 1:
        raise SpecError(
            f"config field 'moe_layer_freq' must be 1 (every layer after the dense ones), got {freq}"
        )
    heads = as_int(cfg, "num_attention_heads")
    mla = {
        "q_lora_rank": optional_int(cfg, "q_lora_rank", 1536),
        "kv_lora_rank": as_int(cfg, "kv_lora_rank", 512),
        "qk_nope_head_dim": as_int(cfg, "qk_nope_head_dim", 128),
        "qk_rope_head_dim": as_int(cfg, "qk_rope_head_dim", 64),
        "v_head_dim": as_int(cfg, "v_head_dim", 128),
    }
    cfg = {**cfg, "num_key_value_heads": heads, "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]}
    desc = {**_decoder(cfg), **_biases(False, False, False), "mla": mla}
    dense = cfg.get("first_k_dense_replace", 3)
    if not isinstance(dense, int) or isinstance(dense, bool) or not 0 <= dense < desc["n_layers"]:
        raise SpecError(
            f"config field 'first_k_dense_replace' must be an integer from 0 to {desc['n_layers'] - 1}, got {dense!r}"
        )
    moe = {
        **_top_k(cfg, "n_routed_experts"),
        "d_ff": as_int(cfg, "moe_intermediate_size"),
        "n_shared": cfg.get("n_shared_experts") and as_int(cfg, "n_shared_experts"),
        "first_dense": dense,
    }
    if cfg.get("n_group") and cfg.get("topk_group"):  # group-limited routing (§2.1.2; costs.llm.experts)
        moe.update(groups=as_int(cfg, "n_group"), group_top_k=as_int(cfg, "topk_group"))
    mtp = cfg.get("num_nextn_predict_layers", 0)
    if not isinstance(mtp, int) or isinstance(mtp, bool) or not 0 <= mtp <= MAX_MTP:
        raise SpecError(
            f"config field 'num_nextn_predict_layers' must be an integer from 0 to {MAX_MTP}, got {mtp!r}"
        )
    return {**desc, "moe": moe, "mtp_layers": mtp}


READERS = {
    "llama": _llama,
    "mistral": _mistral,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3_text": _gemma3_text,
    "gemma3": _gemma3,
    "phi3": _phi3,
    "deepseek_v3": _deepseek_v3,
}
