"""Hugging Face ``config.json`` files as model descriptions (:mod:`costs.specs.transformer_spec`).

Families read, by the field names and defaults of the ``transformers`` library's configuration
classes: GPT-2 (``gpt2``), BERT (``bert``) and the decoder families of
:mod:`costs.specs.hf_decoders` (Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, Gemma,
Gemma 2, Gemma 3, Phi-3). Only the architecture is read: no weights, no tokenizer, no network.
A missing, malformed or inconsistent field is a one-line :class:`~costs.errors.SpecError`
naming it.
"""

from __future__ import annotations

from typing import Any

from costs.errors import SpecError
from costs.specs import hf_decoders
from costs.specs.hf_fields import as_bool, as_int


def _gpt2(cfg: dict) -> dict[str, Any]:
    d = as_int(cfg, "n_embd")
    heads = as_int(cfg, "n_head")
    if d % heads:
        raise SpecError(f"config field 'n_head' ({heads}) must divide 'n_embd' ({d})")
    inner = cfg.get("n_inner")
    return {
        "d_model": d,
        "n_layers": as_int(cfg, "n_layer"),
        "n_heads": heads,
        "d_ff": 4 * d if inner is None else as_int(cfg, "n_inner"),
        "vocab": as_int(cfg, "vocab_size"),
        "seq_len": as_int(cfg, "n_positions"),
        "activation": "gelu",
        "norm": "layernorm",
        "positional": "learned",
        "tied": as_bool(cfg, "tie_word_embeddings", True),
        "bias": True,
        "dropout": True,
    }


def _bert(cfg: dict) -> dict[str, Any]:
    d = as_int(cfg, "hidden_size")
    heads = as_int(cfg, "num_attention_heads")
    if d % heads:
        raise SpecError(f"config field 'num_attention_heads' ({heads}) must divide 'hidden_size' ({d})")
    return {
        "d_model": d,
        "n_layers": as_int(cfg, "num_hidden_layers"),
        "n_heads": heads,
        "d_ff": as_int(cfg, "intermediate_size"),
        "vocab": as_int(cfg, "vocab_size"),
        "seq_len": as_int(cfg, "max_position_embeddings"),
        "type_vocab": as_int(cfg, "type_vocab_size", 2),
        "activation": "gelu",
        "norm": "layernorm",
        "norm_position": "post",
        "positional": "learned",
        "tied": as_bool(cfg, "tie_word_embeddings", True),
        "bias": True,
        "dropout": True,
        "causal": False,
        "mlm_head": True,
    }


def _readers() -> dict[str, Any]:
    return {"gpt2": _gpt2, "bert": _bert, **hf_decoders.READERS}


def is_hf_config(spec: Any) -> bool:
    """A parsed JSON object that is a Hugging Face config rather than a layer spec."""
    return isinstance(spec, dict) and "layers" not in spec and "model_type" in spec


def to_model(cfg: dict[str, Any]) -> dict[str, Any]:
    """The model description of a Hugging Face config (one sequence of its full context)."""
    readers = _readers()
    family = cfg.get("model_type")
    if family not in readers:
        raise SpecError(f"config field 'model_type' must be one of {', '.join(readers)}, got {family!r}")
    return {"family": family, **readers[family](cfg)}


def to_spec(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """A layer spec (name, model description, layers) built from a Hugging Face config."""
    from costs.specs.transformer_spec import build_layers

    try:
        model = to_model(cfg)
        layers = build_layers(model)
    except SpecError as exc:
        raise SpecError(exc.detail, source=name) from None
    return {"name": name, "source": f"Hugging Face config {name}", "model": model, "layers": layers}
