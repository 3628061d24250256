"""Build a transformer's layer spec (the graph's JSON format) from a small model description.

The description (``model`` in a zoo file) names the family's choices; everything else is
derived. Fields: ``d_model``, ``n_layers``, ``n_heads``, ``d_ff``, ``vocab``, ``seq_len``
(required); ``n_kv_heads`` (default ``n_heads``), ``head_dim`` (``d_model / n_heads``),
``activation`` (``gelu`` | ``swiglu``), ``norm`` (``layernorm`` | ``rmsnorm``), ``norm_position``
(``pre`` | ``post``), ``positional`` (``learned`` | ``rope``; RoPE has no parameters and its few
elementwise FLOPs are not counted), ``max_positions``, ``type_vocab`` (BERT's segment table),
``tied`` (LM head shares the token embedding), ``bias`` (linear layers carry biases),
``dropout`` (dropout after the embedding and each residual branch), ``causal``, ``attention``
(``standard`` | ``flash``), ``mlm_head`` (BERT's dense + GELU + LayerNorm transform before the
vocabulary projection), ``moe`` (``{"n_experts": E, "top_k": k}``: every feed-forward is a
mixture of experts; optional ``d_ff``, the width of one expert), ``batch`` (default sequences
per step).
Newer families add: ``activation`` ``geglu`` (Gemma's gated GELU), ``qkv_bias``, ``out_bias``
and ``mlp_bias`` (biases of the QKV, attention-output and feed-forward linears, each ``bias``
by default: Qwen2 biases Q, K and V only), ``qk_norm`` (an RMSNorm over head_dim of each query
and key head: Qwen3, Gemma 3), ``post_norms`` (an RMSNorm on the attention and the
feed-forward outputs before each residual add: Gemma 2 and 3), ``window`` (sliding-window
attention over that many keys) with ``local_layers`` (the indices of the layers that use it;
all of them when absent) or, in a one-block shard, ``window_share`` (the share of local layers),
``mla`` (DeepSeek's multi-head latent attention: ``q_lora_rank`` (null: no query latent),
``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``), and in ``moe``:
``n_shared`` (always-on experts of ``d_ff`` each, summed with the routed ones),
``first_dense`` (the first layers keep a dense feed-forward of the model's ``d_ff``) and
``groups`` with ``group_top_k`` (a token's experts come from at most ``group_top_k`` of
``groups`` expert groups: DeepSeek-V3's node-limited routing; only the all-to-all cost reads it);
``mtp_layers`` (DeepSeek-V3's multi-token-prediction modules, 0 by default: see :func:`_mtp`).

Run as ``python -m costs.specs.transformer_spec FILE...`` to rewrite each file's ``layers`` from its
``model`` (the zoo's transformer files are generated this way).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from costs.errors import SpecError

_REQUIRED = ("d_model", "n_layers", "n_heads", "d_ff", "vocab", "seq_len")
_CHOICES = {
    "activation": ("gelu", "swiglu", "geglu"),
    "norm": ("layernorm", "rmsnorm"),
    "norm_position": ("pre", "post"),
    "positional": ("learned", "rope"),
    "attention": ("standard", "flash"),
}
_DEFAULTS = {
    "activation": "gelu",
    "norm": "layernorm",
    "norm_position": "pre",
    "positional": "learned",
    "attention": "standard",
    "tied": False,
    "bias": False,
    "dropout": False,
    "causal": True,
    "mlm_head": False,
    "qk_norm": False,
    "post_norms": False,
    "type_vocab": 0,
    "batch": 1,
    "mtp_layers": 0,
}
MAX_MTP = 8  # multi-token-prediction depth: DeepSeek-V3 trains 1 (arXiv:2412.19437, §2.2)


def _checked(desc: dict[str, Any]) -> dict[str, Any]:
    """The description with defaults filled in; a bad field is a one-line :class:`SpecError`."""
    if not isinstance(desc, dict):
        raise SpecError("'model' must be an object")
    m = {**_DEFAULTS, **desc}
    for key in _REQUIRED:
        if not isinstance(m.get(key), int) or isinstance(m.get(key), bool) or m[key] <= 0:
            raise SpecError(f"model field '{key}' must be a positive integer, got {m.get(key)!r}")
    for key, valid in _CHOICES.items():
        if m[key] not in valid:
            raise SpecError(f"model field '{key}' must be one of {', '.join(valid)}, got {m[key]!r}")
    m.setdefault("n_kv_heads", m["n_heads"])
    m.setdefault("head_dim", m["d_model"] // m["n_heads"])
    mla = m.get("mla")
    if mla is not None:
        keys = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        if not isinstance(mla, dict) or set(keys) - set(mla):
            raise SpecError(f"model field 'mla' must be an object with {', '.join(keys)}")
        m["head_dim"] = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        m["n_kv_heads"] = m["n_heads"]
    m.setdefault("max_positions", m["seq_len"])
    for key in ("qkv_bias", "out_bias", "mlp_bias"):
        m.setdefault(key, m["bias"])
    moe = m.get("moe")
    if moe is not None and (not isinstance(moe, dict) or {"n_experts", "top_k"} - set(moe)):
        raise SpecError("model field 'moe' must be an object with 'n_experts' and 'top_k'")
    _check_mtp(m["mtp_layers"])
    _check_window(m)
    return m


def _check_mtp(mtp) -> None:
    if not isinstance(mtp, int) or isinstance(mtp, bool) or not 0 <= mtp <= MAX_MTP:
        raise SpecError(f"model field 'mtp_layers' must be an integer from 0 to {MAX_MTP}, got {mtp!r}")


def _check_window(m: dict) -> None:
    """A sliding window is a positive key count; its local layers exist."""
    w = m.get("window")
    if w is None:
        return
    if not isinstance(w, int) or isinstance(w, bool) or w <= 0:
        raise SpecError(f"model field 'window' must be a positive integer, got {w!r}")
    local = m.get("local_layers")
    if local is not None and (
        not isinstance(local, list)
        or any(not isinstance(i, int) or not 0 <= i < m["n_layers"] for i in local)
    ):
        raise SpecError(f"model field 'local_layers' must list layer indices from 0 to {m['n_layers'] - 1}")


def _attention_window(m: dict, i: int) -> dict[str, Any]:
    """The window fields of layer ``i``'s attention (none for a global layer)."""
    if m.get("window") is None:
        return {}
    if "window_share" in m:  # a one-block shard stands for every layer
        return {"window": m["window"], "window_share": m["window_share"]}
    local = m.get("local_layers")
    return {"window": m["window"]} if local is None or i in local else {}


def _mlp(m: dict, x: str, width: int, prefix: str = "") -> dict[str, dict]:
    """A dense feed-forward of ``width`` reading ``x``: up (gate and up when gated), act, down."""
    gated = m["activation"] in ("swiglu", "geglu")
    up = width * (2 if gated else 1)  # gated: gate and up projections side by side
    act = {"swiglu": "SwiGLU", "geglu": "GeGLU"}.get(m["activation"], "GELU")
    bias = m["mlp_bias"]
    return {
        f"{prefix}up": {"type": "Linear", "parents": [x], "num_outputs": up, "bias": bias},
        f"{prefix}act": {"type": act, "parents": [f"{prefix}up"]},
        f"{prefix}down": {
            "type": "Linear",
            "parents": [f"{prefix}act"],
            "num_outputs": m["d_model"],
            "bias": bias,
        },
    }


def _ffn(m: dict, x: str, i: int) -> dict[str, dict]:
    """Layer ``i``'s feed-forward sublayers reading ``x``; the last one is the branch output.
    A mixture of experts may keep its first ``first_dense`` layers dense (DeepSeek-V3) and add
    ``n_shared`` always-on experts beside the routed ones (DeepSeek-MoE, arXiv:2401.06066)."""
    moe = m.get("moe")
    if not moe or i < moe.get("first_dense", 0):
        return _mlp(m, x, m["d_ff"])
    width = moe.get("d_ff", m["d_ff"])
    spec = {"type": "MoE", "parents": [x], "d_ff": width, "activation": m["activation"]}
    out = {"moe": {**spec, "n_experts": moe["n_experts"], "top_k": moe["top_k"]}}
    if moe.get("local_experts"):  # an expert-parallel shard holds these (costs.llm.shard)
        out["moe"]["local_experts"] = moe["local_experts"]
    if moe.get("n_shared"):
        out.update(_mlp(m, x, moe["n_shared"] * width, "shared_"))
        out["ffn_sum"] = {"type": "Add", "parents": ["moe", "shared_down"]}
    return out


def _branch(layers: dict, m: dict, name: str, last: str) -> str:
    """Dropout on a residual branch when the family uses it; returns the branch's last layer."""
    if not m["dropout"]:
        return last
    layers[name] = {"type": "Dropout", "parents": [last], "dropout_keep_prob": 0.9}
    return name


def _block(m: dict, x: str, i: int) -> dict[str, Any]:
    """Transformer layer ``i`` reading ``x`` (pre- or post-norm); its endpoint is ``out``."""
    norm = "LayerNorm" if m["norm"] == "layernorm" else "RMSNorm"
    h, kv, hd = m["n_heads"], m["n_kv_heads"], m["head_dim"]
    pre = m["norm_position"] == "pre"
    layers: dict[str, Any] = {}
    if pre:
        layers["ln1"] = {"type": norm, "parents": [x]}
    heads = {"n_heads": h, "n_kv_heads": kv, "head_dim": hd}
    if m.get("mla"):
        layers["qkv"] = {"type": "MLA", "parents": ["ln1" if pre else x], "n_heads": h, **m["mla"]}
        heads = {"n_heads": h, "n_kv_heads": h, "head_dim": hd, "v_head_dim": m["mla"]["v_head_dim"]}
    else:
        layers["qkv"] = {
            "type": "Linear",
            "parents": ["ln1" if pre else x],
            "num_outputs": (h + 2 * kv) * hd,
            "bias": m["qkv_bias"],
        }
    qkv = "qkv"
    if m["qk_norm"]:
        layers["qk_norm"] = {"type": "QKNorm", "parents": ["qkv"], **heads}
        qkv = "qk_norm"
    layers["attn"] = {
        "type": "Attention",
        "parents": [qkv],
        **heads,
        "causal": m["causal"],
        "flash": m["attention"] == "flash",
        **_attention_window(m, i),
    }
    layers["proj"] = {
        "type": "Linear",
        "parents": ["attn"],
        "num_outputs": m["d_model"],
        "bias": m["out_bias"],
    }
    attn_out = "proj"
    if m["post_norms"]:
        layers["proj_norm"] = {"type": norm, "parents": ["proj"]}
        attn_out = "proj_norm"
    layers["add1"] = {"type": "Add", "parents": [_branch(layers, m, "drop1", attn_out), x]}
    mid = "add1"
    if not pre:
        layers["ln1"] = {"type": norm, "parents": ["add1"]}
        mid = "ln1"
    else:
        layers["ln2"] = {"type": norm, "parents": ["add1"]}
    ffn = _ffn(m, "ln2" if pre else mid, i)
    layers.update(ffn)
    ffn_out = list(ffn)[-1]
    if m["post_norms"]:
        layers["ffn_norm"] = {"type": norm, "parents": [ffn_out]}
        ffn_out = "ffn_norm"
    last = _branch(layers, m, "drop2", ffn_out)
    layers["out" if pre else "add2"] = {"type": "Add", "parents": [last, mid]}
    if not pre:
        layers["out"] = {"type": norm, "parents": ["add2"]}
    return {"type": "Block", "parents": [x], "endpoint": "out", "layers": layers}


def build_layers(desc: dict[str, Any]) -> dict[str, Any]:
    """The ``layers`` object of a transformer spec from its model description."""
    m = _checked(desc)
    norm = "LayerNorm" if m["norm"] == "layernorm" else "RMSNorm"
    embed = {"type": "Embedding", "parents": ["data"], "vocab": m["vocab"], "d_model": m["d_model"]}
    if m["positional"] == "learned":
        embed["positions"] = m["max_positions"]
    if m["type_vocab"]:
        embed["types"] = m["type_vocab"]
    layers: dict[str, Any] = {
        "data": {"type": "Input", "parents": [], "tensor": [m["batch"], m["seq_len"]]},
        "embed": embed,
    }
    x = "embed"
    if m["norm_position"] == "post":  # BERT normalises the summed embeddings
        layers["embed_norm"] = {"type": norm, "parents": [x]}
        x = "embed_norm"
    if m["dropout"]:
        layers["embed_drop"] = {"type": "Dropout", "parents": [x], "dropout_keep_prob": 0.9}
        x = "embed_drop"
    for i in range(m["n_layers"]):
        layers[f"layer{i}"] = _block(m, x, i)
        x = f"layer{i}"
    layers.update(_mtp(m, x, norm))
    if m["norm_position"] == "pre":
        layers["final_norm"] = {"type": norm, "parents": [x]}
        x = "final_norm"
    if m["mlm_head"]:
        layers["mlm_dense"] = {"type": "Linear", "parents": [x], "num_outputs": m["d_model"], "bias": True}
        layers["mlm_act"] = {"type": "GELU", "parents": ["mlm_dense"]}
        layers["mlm_norm"] = {"type": norm, "parents": ["mlm_act"]}
        x = "mlm_norm"
    layers["lm_head"] = {
        "type": "LMHead",
        "parents": [x],
        "vocab": m["vocab"],
        "tied": m["tied"],
        "bias": m["mlm_head"],  # BERT's decoder has an output bias
    }
    layers["loss"] = {"type": "CrossEntropy", "parents": ["lm_head"]}
    return layers


def _mtp(m: dict, h: str, norm: str) -> dict[str, Any]:
    """DeepSeek-V3's multi-token-prediction modules (arXiv:2412.19437, §2.2, Figure 3): module
    ``k`` normalises the previous depth's hidden state (the main model's last layer for the
    first) and the embedding of the token ``k`` ahead, concatenates them, projects 2d -> d (its
    matrix M_k), runs one more transformer layer (a mixture of experts, as the model's later
    layers), and predicts through the output head. The embedding and the output head are the
    main model's ("shared"): they add compute, no parameters. Every layer name starts with
    ``mtp``: the tensor-parallel shard counts them on the last pipeline stage."""
    out: dict[str, Any] = {}
    for k in range(m["mtp_layers"]):
        p = f"mtp{k}_"
        out[p + "embed"] = {
            "type": "Embedding",
            "parents": ["data"],
            "vocab": m["vocab"],
            "d_model": m["d_model"],
        }
        out[p + "embed"]["shared"] = True
        out[p + "hnorm"] = {"type": norm, "parents": [h]}
        out[p + "enorm"] = {"type": norm, "parents": [p + "embed"]}
        out[p + "cat"] = {"type": "Concatenate", "parents": [p + "hnorm", p + "enorm"], "dim": 2}
        out[p + "proj"] = {
            "type": "Linear",
            "parents": [p + "cat"],
            "num_outputs": m["d_model"],
            "bias": False,
        }
        out[p + "layer"] = _block(m, p + "proj", m["n_layers"])
        out[p + "norm"] = {"type": norm, "parents": [p + "layer"]}
        out[p + "head"] = {"type": "LMHead", "parents": [p + "norm"], "vocab": m["vocab"], "tied": True}
        out[p + "loss"] = {"type": "CrossEntropy", "parents": [p + "head"]}
        h = p + "layer"
    return out


# Longest sequence a request may ask for: 2**24 tokens, 16x the million-token contexts trained
# today; beyond it activation sizes overflow nothing but answer no real question.
MAX_SEQ_LEN = 2**24


def with_seq_len(spec: dict[str, Any], seq_len: int, name: str) -> dict[str, Any]:
    """A transformer spec rebuilt at another sequence length (learned positions cap it)."""
    model = spec.get("model")
    if not isinstance(model, dict):
        raise SpecError(f"--seq-len applies to transformer nets; '{name}' is not one")
    if not 1 <= seq_len <= MAX_SEQ_LEN:
        raise SpecError(f"--seq-len must be an integer from 1 to {MAX_SEQ_LEN:,}, got {seq_len}")
    m = dict(model)
    if m.get("positional", "learned") == "learned":
        m.setdefault("max_positions", m["seq_len"])
        if seq_len > m["max_positions"]:
            raise SpecError(
                f"--seq-len {seq_len} exceeds the {m['max_positions']} learned positions of '{name}'"
            )
    m["seq_len"] = seq_len
    return {**spec, "model": m, "layers": build_layers(m)}


ATTENTION = _CHOICES["attention"]  # the attention kernels a run can use (--attention)


def with_attention(spec: dict[str, Any], attention: str, name: str) -> dict[str, Any]:
    """A transformer spec rebuilt with another attention kernel (``--attention``: the kernel is
    the run's, e.g. a GPT-3 trained today with fused attention); ``spec_attention`` names the
    spec's own kernel where it differs (answers state the override). Unchanged when the same."""
    if attention not in ATTENTION:
        raise SpecError(f"--attention '{attention}' (valid: {', '.join(ATTENTION)})")
    model = spec.get("model")
    if not isinstance(model, dict):
        raise SpecError(
            f"--attention {attention} applies to transformer nets (a 'model' description); '{name}' is not one"
        )
    own = model.get("attention", _DEFAULTS["attention"])
    if own == attention:
        return spec
    m = {**model, "attention": attention}
    return {**spec, "model": m, "layers": build_layers(m), "spec_attention": own}


def attention_fields(meta: dict[str, Any]) -> dict[str, str]:
    """A built net's (``meta``) attention kernel and its source, ``--attention`` (not its spec's) or
    ``net spec``: a record's ``attention`` and ``attention_source``; {} for a net without ``model``."""
    if not isinstance(meta.get("model"), dict):
        return {}
    source = "--attention" if meta.get("spec_attention") else "net spec"
    return {"attention": meta["model"].get("attention", "standard"), "attention_source": source}


def _rewrite(path: Path) -> None:
    """Regenerate a file's ``layers``; the description stays readable, one layer per line."""
    spec = json.loads(path.read_text())
    layers = build_layers(spec["model"])
    head = json.dumps({k: v for k, v in spec.items() if k != "layers"}, indent=2)
    body = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in layers.items())
    path.write_text(head[:-2] + ',\n  "layers": {\n' + body + "\n  }\n}\n")


def rewrite_files(argv: list[str], module: str, rewrite) -> int:
    """``python -m MODULE FILE...``: ``rewrite`` each spec file's layers from its description;
    one line and exit 2 on a bad file (the command line of this module and of vision_nets)."""
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(f"usage: python -m {module} SPEC.json [...]  (rewrites each file's layers)")
        return 0 if argv else 2
    for arg in argv:
        try:
            rewrite(Path(arg))
        except (OSError, ValueError, KeyError, SpecError) as exc:
            print(f"error: {arg}: {exc}", file=sys.stderr)
            return 2
    return 0


def main(argv: list[str]) -> int:
    """``python -m costs.specs.transformer_spec FILE...``: regenerate each file's layers from its
    ``model`` description; one line and exit 2 on a bad file."""
    return rewrite_files(argv, "costs.specs.transformer_spec", _rewrite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
