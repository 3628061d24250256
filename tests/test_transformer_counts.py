"""Transformer layers and the transformer zoo: parameter counts, training FLOPs, contracts.

Parameter convention: every trainable tensor the model owns (weights, biases, norm gains and
shifts, embedding tables); a tied LM head adds only its bias. BERT-Large is counted with its
masked-LM head (dense + LayerNorm + output bias, decoder tied) and without the pooler and the
next-sentence classifier.

Training FLOPs per token follow Narayanan et al. 2021 (arXiv:2104.04473, eq. 3: 72 B s l h^2
(1 + s / 6h + V / 12hl) per iteration, i.e. 6N + 12 l h s per token): 6N over the parameters
used in matmuls plus 12 x n_layers x d_model x seq for the attention scores (Q K^T and P V,
forward and backward, the full seq x seq, as a standard kernel computes them even under a
causal mask). A flash kernel on a causal mask skips the masked half: 6 x n_layers x d_model x
seq. N excludes the embedding lookups (no matmul) and includes the LM head (its matrix, tied or
not); for a mixture of experts it is the active parameters (router plus top-k experts).
"""

from __future__ import annotations

import pytest

from costs.errors import SpecError
from costs.modern import roofline
from costs.rules import MODERN, PALEO_2016, PALEO_2018, PLANNER
from costs.specs import coefficients, layers, transformer
from costs.specs.graph import build_net
from costs.specs.transformer_spec import build_layers
from planner import catalog

TRANSFORMERS = (
    "bert-large",
    "gpt2-xl",
    "gpt3-175b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "llama3.1-405b",
    "mixtral-8x7b",
    "deepseek-v3",
)

# Published totals, each with the rounding it is published at (absolute tolerance = half a unit
# of its last digit).
PUBLISHED = {
    # "Model size 8.03B params" (Hugging Face's count of a copy of Meta-Llama-3-8B's weights):
    # https://huggingface.co/nm-testing/Meta-Llama-3-8B-Instruct-FP8-Static-Per-Tensor-testing
    "llama3-8b": (8.03e9, 0.005e9),
    # "Model size 70.6B params", Llama 3.3 70B (the Llama 3 70B architecture):
    # https://huggingface.co/jsulz/Llama-3.3-70B-Instruct-bigtensor
    "llama3-70b": (70.6e9, 0.05e9),
    # 175.0B in Brown et al. 2020 (arXiv:2005.14165) Table 2.1; 174.6B counted with the
    # embedding (617,558,016 parameters) and 2048 learned positions.
    "gpt3-175b": (174.6e9, 0.05e9),
    # 46.7B total, 12.9B active: github.com/Azure/azureml-assets, assets/models/system/
    # mistralai-Mixtral-8x7B-Instruct-v01/description.md (Mistral AI's model description)
    "mixtral-8x7b": (46.7e9, 0.05e9),
    # "about 335M": BERT-Large with the MLM head, without pooler and NSP classifier (see the
    # module docstring); Devlin et al. 2019 round BERT-Large to 340M.
    "bert-large": (335e6, 0.5e6),
    # 1.56B: 1,557,611,200 with the tied embedding and 1024 learned positions (GPT-2's paper
    # rounds to 1542M; the reference is 1.56B).
    "gpt2-xl": (1.56e9, 0.005e9),
    # No count published at more digits than "70B" / "405B" was read: the exact counts from the
    # configs' shapes, computed by hand in tests/test_goodput_cards.py (80 x 855,654,400 + 2 x
    # 32,000 x 8,192 + 8,192; 126 x 3,187,703,808 + 2 x 128,256 x 16,384 + 16,384)
    "llama2-70b": (68_976_648_192, 0),
    "llama3.1-405b": (405_853_388_800, 0),
    # "671B total parameters": README of github.com/deepseek-ai/DeepSeek-V3 at 9b4e978 (the main
    # model; the multi-token-prediction module, 11.6B more, is not in it, nor in _params below);
    # exact counts in test_llm_experts.py and test_hf_architectures.py
    "deepseek-v3": (671e9, 0.5e9),
}
MIXTRAL_ACTIVE = (12.9e9, 0.05e9)


def _params(net) -> int:
    """The main model's parameters (DeepSeek-V3's multi-token-prediction module left out)."""
    return sum(layers.params(s) for s in net.layers if not s.name.startswith("mtp"))


def _active(net, mtp: bool = False) -> int:
    kept = [s for s in net.layers if mtp or not s.name.startswith("mtp")]
    idle = sum(layers.params(s) - transformer.moe_active_params(s) for s in kept if s.type == "MoE")
    return sum(layers.params(s) for s in kept) - idle


def _matmul_params(net) -> int:
    """N of 6N: active parameters (multi-token-prediction modules included) less the embedding
    lookups, plus a tied head's matrix; each MTP module runs the shared head once more."""
    m = net.meta["model"]
    embedding = sum(layers.params(s) for s in net.layers if s.type == "Embedding")
    heads = (1 if m.get("tied") else 0) + m.get("mtp_layers", 0)
    return _active(net, mtp=True) - embedding + heads * m["vocab"] * m["d_model"]


def _attention_term(net) -> float:
    m = net.meta["model"]
    qk = m.get("head_dim") or m["d_model"] // m["n_heads"]
    v = (m.get("mla") or {}).get("v_head_dim", qk)  # MLA's value heads are narrower (128 of 192)
    full = 6.0 * (m["n_layers"] + m.get("mtp_layers", 0)) * m["n_heads"] * (qk + v)
    skips = m.get("attention") == "flash" and m.get("causal", True)
    return full * m["seq_len"] * (0.5 if skips else 1.0)


def _training_flops(net, rules) -> float:
    return sum(sum(sum(w.flops) for w in layers.work(s, 1, rules).values()) for s in net.layers)


def test_the_zoo_lists_the_transformers():
    assert set(catalog.zoo_transformers()) == set(TRANSFORMERS)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_parameter_count_matches_the_published_figure(name):
    value, tol = PUBLISHED[name]
    assert abs(_params(catalog.load_net(name, "planner")) - value) <= tol


def test_mixtral_active_parameters():
    net = catalog.load_net("mixtral-8x7b", "planner")
    value, tol = MIXTRAL_ACTIVE
    assert abs(_active(net) - value) <= tol
    # Total minus active = 6 idle experts x 32 layers x 3 x 4096 x 14336.
    assert _params(net) - _active(net) == 6 * 32 * 3 * 4096 * 14336


def test_exact_llama3_8b_count_by_hand():
    d, f, v, kv = 4096, 14336, 128256, 1024
    per_layer = d * d + 2 * d * kv + d * d + 3 * d * f + 2 * d  # q, k and v, o, SwiGLU, 2 RMSNorms
    assert _params(catalog.load_net("llama3-8b", "planner")) == 2 * v * d + 32 * per_layer + d


@pytest.mark.parametrize("name", TRANSFORMERS)
@pytest.mark.parametrize("rules", [PLANNER, MODERN], ids=lambda r: r.name)
def test_training_flops_per_token_are_6n_plus_attention(name, rules):
    net = catalog.load_net(name, rules.name)
    seq = net.meta["model"]["seq_len"]
    want = 6.0 * _matmul_params(net) + _attention_term(net)
    assert _training_flops(net, rules) / seq == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_modern_flops_equal_planner_flops(name):
    """Both rule sets read one count (costs/specs/transformer.py): tensor-core plus vector FLOPs."""
    costs = catalog.net_costs(name, "modern")
    t = roofline.terms(costs)
    assert float((t.tc + t.vec).sum()) == pytest.approx(_training_flops(costs.net, MODERN), rel=1e-12)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_zoo_files_are_the_builder_output(name):
    """The zoo files were generated by ``python -m costs.specs.transformer_spec``: nothing edited."""
    spec = catalog.zoo_info()[name]
    assert spec["layers"] == build_layers(spec["model"])


# ---- every transformer layer type --------------------------------------------------------------

S, D, V = 16, 32, 100


def _every_type_spec(flash: bool = False, causal: bool = True) -> dict:
    lay = {
        "data": {"type": "Input", "parents": [], "tensor": [2, S]},
        "embed": {"type": "Embedding", "parents": ["data"], "vocab": V, "d_model": D, "positions": S},
        "ln": {"type": "LayerNorm", "parents": ["embed"]},
        "qkv": {"type": "Linear", "parents": ["ln"], "num_outputs": (4 + 2 * 2) * 8, "bias": True},
        "qkn": {"type": "QKNorm", "parents": ["qkv"], "n_heads": 4, "n_kv_heads": 2, "head_dim": 8},
        "attn": {
            "type": "Attention",
            "parents": ["qkn"],
            "n_heads": 4,
            "n_kv_heads": 2,
            "head_dim": 8,
            "causal": causal,
            "flash": flash,
        },
        "mla": {
            "type": "MLA",
            "parents": ["ln"],
            "n_heads": 4,
            "q_lora_rank": 8,
            "kv_lora_rank": 8,
            "qk_nope_head_dim": 4,
            "qk_rope_head_dim": 4,
            "v_head_dim": 8,
        },
        "mla_attn": {"type": "Attention", "parents": ["mla"], "n_heads": 4, "head_dim": 8, "v_head_dim": 8},
        "add": {"type": "Add", "parents": ["attn", "embed", "mla_attn"]},
        "rms": {"type": "RMSNorm", "parents": ["add"]},
        "up": {"type": "Linear", "parents": ["rms"], "num_outputs": 4 * D},
        "swiglu": {"type": "SwiGLU", "parents": ["up"]},
        "geglu": {"type": "GeGLU", "parents": ["swiglu"]},
        "gelu": {"type": "GELU", "parents": ["geglu"]},
        "down": {"type": "Linear", "parents": ["gelu"], "num_outputs": D},
        "drop": {"type": "Dropout", "parents": ["down"]},
        "moe": {"type": "MoE", "parents": ["drop"], "n_experts": 4, "top_k": 2, "d_ff": 48},
        "soft": {"type": "SeqSoftmax", "parents": ["moe"]},
        "head": {"type": "LMHead", "parents": ["soft"], "vocab": V, "tied": False},
        "loss": {"type": "CrossEntropy", "parents": ["head"]},
        "qa": {"type": "Reshape", "parents": ["moe"], "output_shape": [2, 4, S, 8]},
        "kb": {"type": "Reshape", "parents": ["down"], "output_shape": [2, 4, 8, S]},
        "bmm": {"type": "BatchedMatMul", "parents": ["qa", "kb"]},
    }
    return {"name": "every-transformer-type", "layers": lay}


@pytest.mark.parametrize("rules", [PLANNER, MODERN], ids=lambda r: r.name)
def test_every_transformer_type_costs_flops_and_bytes(rules):
    net = build_net(_every_type_spec(), "t.json", rules)
    assert transformer.TYPES <= {s.type for s in net.layers}  # the net covers every type
    costs = coefficients.build(net, rules)
    t = roofline.build(net, costs.params)
    for i, s in enumerate(net.layers):
        if s.type not in transformer.TYPES:
            continue
        work = layers.work(s, 4, rules)
        assert sum(sum(w.flops) for w in work.values()) > 0, s.type
        assert sum(sum(w.bytes) for w in work.values()) > 0, s.type
        assert t.kernels[i].sum() > 0 and (t.tc[i] + t.vec[i]).sum() > 0, s.type
        assert (t.act_b[i] + t.fixed[i]).sum() > 0, s.type


@pytest.mark.parametrize("rules", [PALEO_2016, PALEO_2018], ids=lambda r: r.name)
def test_paleo_rules_reject_transformer_layers(rules):
    with pytest.raises(
        SpecError, match=r"layer 'embed': layer type 'Embedding' is not supported by rules"
    ) as exc:
        build_net(_every_type_spec(), "t.json", rules)
    assert str(exc.value).endswith("; rules planner, modern support it") and "\n" not in str(exc.value)


def _attention(flash: bool, causal: bool):
    net = build_net(_every_type_spec(flash, causal), "t.json", PLANNER)
    return net["attn"]


def test_attention_shapes_and_score_flops():
    s = _attention(False, True)
    assert s.in_shapes == ((S, 64),) and s.out_shape == (S, 32)
    c = transformer.costs(s)
    assert c["fwd"].tc == 4.0 * S * S * 4 * 8  # Q K^T and P V over 4 query heads of 8
    assert c["bwd_data"].tc == 2 * c["fwd"].tc


def test_flash_moves_fewer_bytes_at_the_same_flops():
    std, fl = transformer.costs(_attention(False, False)), transformer.costs(_attention(True, False))
    for phase in ("fwd", "bwd_data"):
        assert fl[phase].tc == std[phase].tc and fl[phase].vec <= std[phase].vec
        assert fl[phase].act < std[phase].act
        assert std[phase].act - fl[phase].act >= 4 * S * S  # the 4 heads' S x S scores, at least


def test_causal_halves_score_flops_only_where_the_kernel_skips_them():
    flops = {
        (f, c): transformer.costs(_attention(f, c))["fwd"].tc for f in (False, True) for c in (False, True)
    }
    assert flops[(True, True)] == 0.5 * flops[(True, False)]  # flash on a causal mask
    assert flops[(False, True)] == flops[(False, False)]  # a standard kernel computes every score


def test_grouped_and_multi_query_attention_change_the_projection_only():
    for kv in (4, 2, 1):  # multi-head, grouped-query, multi-query
        spec = _every_type_spec()
        spec["layers"]["qkv"]["num_outputs"] = (4 + 2 * kv) * 8
        spec["layers"]["attn"]["n_kv_heads"] = kv
        spec["layers"]["qkn"]["n_kv_heads"] = kv
        net = build_net(spec, "t.json", PLANNER)
        assert layers.params(net["qkv"]) == D * (4 + 2 * kv) * 8 + (4 + 2 * kv) * 8
        assert transformer.costs(net["attn"])["fwd"].tc == 4.0 * S * S * 32


def test_embedding_and_head_parameters_and_tying():
    net = build_net(_every_type_spec(), "t.json", PLANNER)
    assert layers.params(net["embed"]) == (V + S) * D  # tokens and learned positions
    assert layers.params(net["head"]) == V * D
    spec = _every_type_spec()
    spec["layers"]["head"]["tied"] = True
    tied = build_net(spec, "t.json", PLANNER)["head"]
    assert layers.params(tied) == 0  # the embedding's matrix
    assert transformer.costs(tied)["fwd"].tc == 2.0 * S * D * V  # still a full projection
    # The embedding's backward is a scatter-add into its tables: a weight gradient only.
    assert set(transformer.costs(net["embed"])) == {"fwd", "bwd_filter"}


def test_moe_counts_all_experts_and_computes_top_k():
    net = build_net(_every_type_spec(), "t.json", PLANNER)
    s = net["moe"]
    expert = 3 * D * 48
    assert layers.params(s) == D * 4 + 4 * expert
    assert transformer.moe_active_params(s) == D * 4 + 2 * expert
    assert transformer.costs(s)["fwd"].tc == 2.0 * S * (D * 4 + 2 * expert)


def test_norm_parameters():
    net = build_net(_every_type_spec(), "t.json", PLANNER)
    assert layers.params(net["ln"]) == 2 * D and layers.params(net["rms"]) == D


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("d_model", 0, "model field 'd_model' must be a positive integer"),
        ("norm", "batchnorm", "model field 'norm' must be one of layernorm, rmsnorm"),
        ("moe", {"n_experts": 8}, "model field 'moe' must be an object with 'n_experts' and 'top_k'"),
    ],
)
def test_builder_rejects_a_bad_description_in_one_line(field, value, message):
    desc = {**catalog.zoo_info()["llama3-8b"]["model"], field: value}
    with pytest.raises(SpecError, match=message):
        build_layers(desc)


def test_bad_attention_width_is_a_spec_error():
    spec = _every_type_spec()
    spec["layers"]["attn"]["n_kv_heads"] = 4
    with pytest.raises(SpecError, match=r"layer 'attn': input width 64 is not"):
        build_net(spec, "t.json", PLANNER)
