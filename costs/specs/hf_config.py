"""Hugging Face ``config.json`` files as model descriptions (:mod:`costs.specs.transformer_spec`).

Families read: GPT-2 (``model_type`` ``gpt2``), BERT (``bert``), Llama and Mistral (``llama``,
``mistral``) and Mixtral (``mixtral``), by the field names of the ``transformers`` library's
configuration classes. Only the architecture is read: no weights, no tokenizer, no network.
A missing or malformed field is a one-line :class:`~costs.errors.SpecError` naming it.
"""

from __future__ import annotations

from typing import Any

from costs.errors import SpecError

FAMILIES = ("gpt2", "bert", "llama", "mistral", "mixtral")


def is_hf_config(spec: Any) -> bool:
    """A parsed JSON object that is a Hugging Face config rather than a layer spec."""
    return isinstance(spec, dict) and "layers" not in spec and "model_type" in spec


def _int(cfg: dict, key: str, default: Any = None) -> int:
    if key not in cfg and default is None:
        raise SpecError(f"config field '{key}' is missing")
    value = cfg.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise SpecError(f"config field '{key}' must be a positive integer, got {value!r}")
    return value


def _bool(cfg: dict, key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"config field '{key}' must be true or false, got {value!r}")
    return value


def _gpt2(cfg: dict) -> dict[str, Any]:
    d = _int(cfg, "n_embd")
    inner = cfg.get("n_inner")
    return {
        "d_model": d,
        "n_layers": _int(cfg, "n_layer"),
        "n_heads": _int(cfg, "n_head"),
        "d_ff": 4 * d if inner is None else _int(cfg, "n_inner"),
        "vocab": _int(cfg, "vocab_size"),
        "seq_len": _int(cfg, "n_positions"),
        "activation": "gelu",
        "norm": "layernorm",
        "positional": "learned",
        "tied": _bool(cfg, "tie_word_embeddings", True),
        "bias": True,
        "dropout": True,
    }


def _bert(cfg: dict) -> dict[str, Any]:
    return {
        "d_model": _int(cfg, "hidden_size"),
        "n_layers": _int(cfg, "num_hidden_layers"),
        "n_heads": _int(cfg, "num_attention_heads"),
        "d_ff": _int(cfg, "intermediate_size"),
        "vocab": _int(cfg, "vocab_size"),
        "seq_len": _int(cfg, "max_position_embeddings"),
        "type_vocab": _int(cfg, "type_vocab_size", 2),
        "activation": "gelu",
        "norm": "layernorm",
        "norm_position": "post",
        "positional": "learned",
        "tied": _bool(cfg, "tie_word_embeddings", True),
        "bias": True,
        "dropout": True,
        "causal": False,
        "mlm_head": True,
    }


def _llama(cfg: dict) -> dict[str, Any]:
    heads = _int(cfg, "num_attention_heads")
    d = _int(cfg, "hidden_size")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise SpecError(f"config field 'hidden_act' must be silu (SwiGLU), got {act!r}")
    desc = {
        "d_model": d,
        "n_layers": _int(cfg, "num_hidden_layers"),
        "n_heads": heads,
        "n_kv_heads": _int(cfg, "num_key_value_heads", heads),
        "head_dim": d // heads if cfg.get("head_dim") is None else _int(cfg, "head_dim"),
        "d_ff": _int(cfg, "intermediate_size"),
        "vocab": _int(cfg, "vocab_size"),
        "seq_len": _int(cfg, "max_position_embeddings"),
        "activation": "swiglu",
        "norm": "rmsnorm",
        "positional": "rope",
        "tied": _bool(cfg, "tie_word_embeddings", False),
        "bias": _bool(cfg, "attention_bias", False),
        "attention": "flash",
    }
    if cfg["model_type"] == "mixtral":
        desc["moe"] = {"n_experts": _int(cfg, "num_local_experts"), "top_k": _int(cfg, "num_experts_per_tok")}
    return desc


def to_model(cfg: dict[str, Any]) -> dict[str, Any]:
    """The model description of a Hugging Face config (one sequence of its full context)."""
    family = cfg.get("model_type")
    if family not in FAMILIES:
        raise SpecError(f"config field 'model_type' must be one of {', '.join(FAMILIES)}, got {family!r}")
    reader = {"gpt2": _gpt2, "bert": _bert}.get(family, _llama)
    return {"family": family, **reader(cfg)}


def to_spec(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """A layer spec (name, model description, layers) built from a Hugging Face config."""
    from costs.specs.transformer_spec import build_layers

    try:
        model = to_model(cfg)
        layers = build_layers(model)
    except SpecError as exc:
        raise SpecError(exc.detail, source=name) from None
    return {"name": name, "source": f"Hugging Face config {name}", "model": model, "layers": layers}
