"""Newer Hugging Face ``config.json`` families (costs/specs/hf_decoders.py): exact parameter counts
against the published totals, the architecture terms each family adds, and bad configs.

Configs are the published ``config.json`` fields planner reads (others omitted), read
2026-11-25 from the Hugging Face repositories named (through public copies whose
``_name_or_path`` or commit message names the original, where the original is gated).
Published totals are exact integers: a ``model.safetensors.index.json`` ``total_size`` (bytes)
over 2 bytes per bf16 parameter, or Google's KerasHub preset metadata (``params``).
"""

from __future__ import annotations

import json

import pytest

from costs.errors import SpecError
from costs.llm import shard as llm_shard
from costs.modern import roofline
from costs.rules import MODERN
from costs.specs import hf_config, layers, transformer
from costs.specs.graph import build_net
from costs.specs.transformer_spec import with_seq_len
from planner import catalog
from planner.cli import main

QWEN25_7B = {  # https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json
    "model_type": "qwen2",
    "hidden_act": "silu",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 152064,
}
QWEN3_8B = {  # https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
    "model_type": "qwen3",
    "attention_bias": False,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "max_window_layers": 36,
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
QWEN3_30B_A3B = {  # https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
    "model_type": "qwen3_moe",
    "attention_bias": False,
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
MISTRAL_7B = {  # https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json
    "model_type": "mistral",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}
GEMMA_2B = {  # https://huggingface.co/google/gemma-2b/blob/main/config.json
    "model_type": "gemma",
    "attention_bias": False,
    "head_dim": 256,
    "hidden_act": "gelu",
    "hidden_size": 2048,
    "intermediate_size": 16384,
    "max_position_embeddings": 8192,
    "num_attention_heads": 8,
    "num_hidden_layers": 18,
    "num_key_value_heads": 1,
    "vocab_size": 256000,
}
GEMMA2_9B = {  # https://huggingface.co/google/gemma-2-9b/blob/main/config.json
    "model_type": "gemma2",
    "attention_bias": False,
    "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "sliding_window": 4096,
    "vocab_size": 256000,
}
GEMMA3_1B = {  # https://huggingface.co/google/gemma-3-1b-pt/blob/main/config.json
    "model_type": "gemma3_text",
    "attention_bias": False,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "max_position_embeddings": 32768,
    "num_attention_heads": 4,
    "num_hidden_layers": 26,
    "num_key_value_heads": 1,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "vocab_size": 262144,
}
PHI3_MINI = {  # https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/main/config.json
    "model_type": "phi3",
    "hidden_act": "silu",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "sliding_window": 2047,
    "tie_word_embeddings": False,
    "vocab_size": 32064,
}
DEEPSEEK_V3 = {  # https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
    "model_type": "deepseek_v3",
    "first_k_dense_replace": 3,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "topk_group": 4,
    "v_head_dim": 128,
    "vocab_size": 129280,
}

# Exact published totals (parameters).
PUBLISHED = {
    # total_size 15231233024 B (bf16):
    # https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/raw/main/model.safetensors.index.json
    "qwen2.5-7b": (QWEN25_7B, 15231233024 // 2),
    # total_size 16381470720 B (bf16):
    # https://huggingface.co/Qwen/Qwen3-8B/blob/main/model.safetensors.index.json
    "qwen3-8b": (QWEN3_8B, 16381470720 // 2),
    # total_size 61064245248 B (bf16, 16 shards); model card: "30.5B total, 3.3B activated":
    # https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/model.safetensors.index.json
    "qwen3-30b-a3b": (QWEN3_30B_A3B, 61064245248 // 2),
    # total_size 14483464192 B (bf16):
    # https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/model.safetensors.index.json
    "mistral-7b-v0.1": (MISTRAL_7B, 14483464192 // 2),
    # KerasHub preset gemma_2b_en "params": 2506172416: github.com/keras-team/keras-hub,
    # keras_hub/src/models/gemma/gemma_presets.py (commit 02aeee5f)
    "gemma-2b": (GEMMA_2B, 2506172416),
    # KerasHub preset gemma2_9b_en "params": 9241705984 (same file); total_size 18483411968 B
    # (bf16) in https://huggingface.co/google/gemma-2-9b/blob/main/model.safetensors.index.json
    "gemma-2-9b": (GEMMA2_9B, 9241705984),
    # KerasHub preset gemma3_1b "params": 999885952: github.com/keras-team/keras-hub,
    # keras_hub/src/models/gemma3/gemma3_presets.py
    "gemma-3-1b": (GEMMA3_1B, 999885952),
    # total_size 7642159104 B (bf16):
    # https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/main/model.safetensors.index.json
    "phi-3-mini-4k": (PHI3_MINI, 7642159104 // 2),
}
# Checked against transformers' own models (when installed), with the published totals above.
BUILT = {**{k: v[0] for k, v in PUBLISHED.items()}, "deepseek-v3": DEEPSEEK_V3}


def _net(cfg: dict, seq: int | None = None):
    spec = hf_config.to_spec(cfg, "config.json")
    if seq is not None:
        spec = with_seq_len(spec, seq, "config.json")
    return build_net(spec, "config.json", MODERN)


def _params(net) -> int:
    return sum(layers.params(s) for s in net.layers)


def _main(net) -> int:
    """Parameters without DeepSeek-V3's multi-token-prediction module (the model transformers builds)."""
    return sum(layers.params(s) for s in net.layers if not s.name.startswith("mtp"))


def _active(net) -> int:
    idle = sum(layers.params(s) - transformer.moe_active_params(s) for s in net.layers if s.type == "MoE")
    return _params(net) - idle


def _training_flops(net) -> float:
    t = roofline.build(net, [layers.params(s) for s in net.layers])
    return float((t.tc + t.vec).sum())


@pytest.mark.parametrize("name", PUBLISHED)
def test_parameter_count_is_the_published_integer(name):
    cfg, total = PUBLISHED[name]
    assert _params(_net(cfg)) == total


@pytest.mark.parametrize("name", BUILT)
def test_parameter_count_equals_the_transformers_model_when_installed(name):
    """transformers' own model of the config, built on the meta device (no weights); optional."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    tf = pytest.importorskip("transformers", reason="transformers is not installed")
    cfg = BUILT[name]
    with torch.device("meta"):
        model = tf.AutoModelForCausalLM.from_config(tf.AutoConfig.for_model(**cfg))
    assert _main(_net(cfg)) == sum(p.numel() for p in model.parameters())


def test_qwen3_30b_a3b_activates_3_3_billion():
    """Model card: "3.3B activated" (3.35B, the digits after the first decimal dropped). By
    hand: everything but 120 of the 128 experts of each layer."""
    d, f, layers_ = 2048, 768, 48
    net = _net(QWEN3_30B_A3B)
    assert _params(net) - _active(net) == layers_ * 120 * 3 * d * f
    assert _active(net) == 61064245248 // 2 - layers_ * 120 * 3 * d * f == 3_353_032_704
    assert 3.3e9 <= _active(net) < 3.4e9


def _deepseek_v3_by_hand() -> tuple[int, int]:
    """DeepSeek-V3's main model from its config's arithmetic (arXiv:2412.19437, §2.1):
    (total, activated per token)."""
    d, h, v, layers_, dense = 7168, 128, 129280, 61, 3
    ql, kvl, nope, rope, vd = 1536, 512, 128, 64, 128
    mla = d * ql + ql + ql * h * (nope + rope) + d * (kvl + rope) + kvl + kvl * h * (nope + vd) + h * vd * d
    expert = 3 * d * 2048  # gate, up, down
    sparse = 256 * d + 256 * expert + 1 * expert  # router, routed experts, the shared expert
    norms = 2 * d
    total = 2 * v * d + d + layers_ * (mla + norms) + dense * 3 * d * 18432 + (layers_ - dense) * sparse
    return total, total - (layers_ - dense) * (256 - 8) * expert


def test_deepseek_v3_is_671b_with_37b_activated():
    """README (github.com/deepseek-ai/DeepSeek-V3, read 2026-11-25): "671B total, 37B activated";
    "685B, which includes 671B of the Main Model weights and 14B of the Multi-Token Prediction
    (MTP) Module weights". The main model is what transformers' DeepseekV3ForCausalLM builds
    (671,026,404,352). 37.55B activated reads "37B" with the digits after the integer dropped."""
    total, active = _deepseek_v3_by_hand()
    net = _net(DEEPSEEK_V3)
    mtp = _params(net) - _main(net)
    assert (
        (_main(net), _active(net) - _mtp_active(net)) == (total, active) == (671_026_404_352, 37_552_282_624)
    )
    assert round(total / 1e9) == 671 and 37e9 <= active < 38e9
    kinds = [net[f"layer{i}/moe"].type if i >= 3 else net[f"layer{i}/down"].type for i in range(61)]
    assert kinds == ["Linear"] * 3 + ["MoE"] * 58  # dense first, then sparse
    assert mtp > 0


def _mtp_active(net) -> int:
    idle = sum(
        layers.params(s) - transformer.moe_active_params(s)
        for s in net.layers
        if s.type == "MoE" and s.name.startswith("mtp")
    )
    return _params(net) - _main(net) - idle


def test_deepseek_v3_multi_token_prediction_module_is_counted_and_costed():
    """num_nextn_predict_layers 1 (arXiv:2412.19437, §2.2, Figure 3): RMSNorms of the last hidden
    state and of the next token's embedding, their concatenation projected 2d -> d, one more MoE
    layer (as layers 3-60), a final RMSNorm; the embedding and the output head are the main
    model's. README_WEIGHTS.md of github.com/deepseek-ai/DeepSeek-V3 (read 2026-11-25): "11.5B
    unique parameters (excluding the shared 0.9B Embedding and 0.9B output Head)", "Activation
    parameters: 1.5B (including 0.9B for the output Head)"; with the shared embedding and head
    stored again, the "14B" of the README (13.46B). Its training FLOPs: the layer, the
    projection and a second pass through the head (about 4% on top of the main model's)."""
    d, v = 7168, 129280
    net = _net(DEEPSEEK_V3)
    moe_layer = sum(layers.params(s) for s in net.layers if s.name.startswith("layer60/"))
    mtp = _params(net) - _main(net)
    assert mtp == moe_layer + 2 * d * d + 3 * d == 11_610_067_968
    assert round(moe_layer / 1e8) == 115  # "11.5B unique parameters" (the layer; plus 0.1B of projection)
    assert round((mtp + 2 * v * d) / 1e9) == 13  # 13.46B stored: the README's "14B" rounds up
    # "1.5B" activated, the shared head included (the projection left out, as above)
    assert round((_mtp_active(net) - 2 * d * d - 3 * d + v * d) / 1e8) == 15
    assert _net({**DEEPSEEK_V3, "num_nextn_predict_layers": 0}).layers[-1].name == "loss"
    at_4k = [_training_flops(_net({**DEEPSEEK_V3, "num_nextn_predict_layers": n}, 4096)) for n in (0, 1)]
    assert 0.035 < at_4k[1] / at_4k[0] - 1 < 0.05  # 4,096-token pre-training sequences


def test_a_bad_mtp_depth_is_one_line():
    with pytest.raises(
        SpecError, match="config field 'num_nextn_predict_layers' must be an integer from 0 to 8"
    ):
        hf_config.to_model({**DEEPSEEK_V3, "num_nextn_predict_layers": -1})


def test_qwen2_biases_q_k_v_only_and_llama_attention_bias_spares_the_mlp():
    block = _net(QWEN25_7B)
    assert block["layer0/qkv"].layer.spec["bias"] is True
    assert not any(block[f"layer0/{n}"].layer.spec["bias"] for n in ("proj", "up", "down"))
    llama = {**MISTRAL_7B, "model_type": "llama", "attention_bias": True}
    del llama["sliding_window"]
    net = _net(llama)
    assert net["layer0/qkv"].layer.spec["bias"] and net["layer0/proj"].layer.spec["bias"]
    assert not net["layer0/up"].layer.spec["bias"] and not net["layer0/down"].layer.spec["bias"]


def test_qwen3_norms_each_query_and_key_head():
    net = _net(QWEN3_8B)
    s = net["layer0/qk_norm"]
    assert layers.params(s) == 2 * 128  # one gain over head_dim for Q, one for K
    assert transformer.costs(s)["fwd"].vec == 5 * 40960 * (32 + 8) * 128  # RMSNorm on 40 heads


def test_gemma2_alternates_local_and_global_layers_and_gemma3_keeps_one_in_six_global():
    g2 = _net(GEMMA2_9B)
    local = [i for i in range(42) if "window" in g2[f"layer{i}/attn"].layer.spec]
    assert local == list(range(0, 42, 2))
    g3 = _net(GEMMA3_1B)
    globals_ = [i for i in range(26) if "window" not in g3[f"layer{i}/attn"].layer.spec]
    assert globals_ == [5, 11, 17, 23]
    assert {"proj_norm", "ffn_norm"} <= {s.name.split("/")[-1] for s in g2.layers}


def test_sliding_window_attention_flops_by_hand():
    """Mistral 7B at 16k tokens: query i attends min(i + 1, 4096) keys, s w - w^2 / 2 pairs
    (continuous count), each 4 head_dim FLOPs forward (Q K^T and P V) over 32 heads."""
    s, w, h, hd = 16384, 4096, 32, 128
    attn = _net(MISTRAL_7B, seq=s)["layer0/attn"]
    assert transformer.costs(attn)["fwd"].tc == 4.0 * h * hd * (s * w - w * w / 2)
    short = _net(MISTRAL_7B, seq=2048)["layer0/attn"]  # shorter than the window: causal half
    assert transformer.costs(short)["fwd"].tc == 4.0 * h * hd * 2048 * 2048 / 2


def test_qwen3_30b_a3b_training_flops_per_token_by_hand():
    """6 N over the active matmul parameters (Narayanan et al. 2021, eq. 3) plus the causal
    flash attention scores, 6 n_layers n_heads head_dim s; the rest (norms, routing) < 1%."""
    s, d, h, kv, hd, f, e, k, v, n = 4096, 2048, 32, 4, 128, 768, 128, 8, 151936, 48
    per_layer = d * (h + 2 * kv) * hd + h * hd * d + d * e + k * 3 * d * f  # QKV, O, router, experts
    matmul = n * per_layer + d * v  # and the LM head; the embedding is a lookup
    want = 6.0 * matmul + 6.0 * n * h * hd * s
    got = _training_flops(_net(QWEN3_30B_A3B, seq=s)) / s
    assert got == pytest.approx(want, rel=0.01)
    assert got > want  # the elementwise FLOPs come on top


@pytest.mark.parametrize(
    "cfg", [GEMMA2_9B, GEMMA3_1B, QWEN3_30B_A3B, DEEPSEEK_V3], ids=lambda c: c["model_type"]
)
def test_the_one_block_shard_carries_every_layer(cfg, tmp_path):
    """The LLM evaluator's one-block shard (local and global layers in their shares) times the
    layers is the whole net (parameters, training FLOPs), to float rounding of the shares."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "max_position_embeddings": 8192}))
    costs = catalog.net_costs(str(path), "modern")
    m = costs.net.meta["model"]
    sh = llm_shard.shard(m, 1, MODERN)
    total = sh.params[0] + m["n_layers"] * sh.params[1] + sh.params[2]
    assert total == pytest.approx(costs.total_params, rel=1e-12)
    whole = sh.flops[0] + m["n_layers"] * sh.flops[1] + sh.flops[2]
    assert whole == pytest.approx(_training_flops(costs.net), rel=1e-12)


@pytest.mark.parametrize("cfg", [QWEN3_30B_A3B, DEEPSEEK_V3], ids=lambda c: c["model_type"])
def test_llm_evaluator_scores_a_moe_plan_array(tmp_path, cfg):
    from costs.hardware import PRECISIONS
    from costs.model import evaluate, plans

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "max_position_embeddings": 4096}))
    costs = catalog.net_costs(str(path), "modern")
    p = plans(
        costs.n_layers,
        device=0,
        network=0,
        intra_link=1,
        precision=PRECISIONS.index("bf16"),
        batch=1,
        workers=[8, 8, 16],
        gpus_per_node=8,
        tp=[1, 2, 1],
        ep=[8, 4, 8],
        scheme=3,
    )
    r = evaluate(costs, p, catalog.device_table(["H100_SXM"]), catalog.link_table(["ib_ndr", "nvlink4"]))
    assert r.total.shape == (3,) and (r.total > 0).all()
    assert (r.ep_comm > 0).all()  # the experts' all-to-alls over EP 8 and 4


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "t5"}, "config field 'model_type' must be one of gpt2, bert, llama"),
        (
            {"num_experts_per_tok": 129},
            "config field 'num_experts_per_tok' (129) must not exceed 'num_experts'",
        ),
        (
            {"sliding_window": 0, "use_sliding_window": True},
            "config field 'sliding_window' must be a positive",
        ),
        ({"num_key_value_heads": 5}, "config field 'num_key_value_heads' (5) must divide"),
        (
            {"head_dim": None, "hidden_size": 2050},
            "config field 'num_attention_heads' (32) must divide 'hidden_size'",
        ),
        ({"mlp_only_layers": [0, 1]}, "config field 'mlp_only_layers' must be empty"),
        ({"layer_types": ["full_attention"]}, "config field 'layer_types' must list 48"),
        (
            {**DEEPSEEK_V3, "first_k_dense_replace": 61},
            "config field 'first_k_dense_replace' must be an integer",
        ),
        (
            {**DEEPSEEK_V3, "num_experts_per_tok": 300},
            "config field 'num_experts_per_tok' (300) must not exceed",
        ),
    ],
)
def test_a_bad_config_is_one_line_naming_the_key(tmp_path, capsys, change, message):
    cfg = {k: v for k, v in {**QWEN3_30B_A3B, **change}.items() if k != "head_dim" or v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code = main(["summary", str(path), "--rules", "modern"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_zero_window_is_refused_for_mistral_too():
    with pytest.raises(SpecError, match="config field 'sliding_window' must be a positive integer, got -1"):
        hf_config.to_model({**MISTRAL_7B, "sliding_window": -1})


@pytest.mark.parametrize("cfg", [DEEPSEEK_V3, QWEN3_30B_A3B, GEMMA2_9B], ids=lambda c: c["model_type"])
def test_one_gpu_llm_times_equal_the_layer_graph(tmp_path, cfg):
    """TP 1, PP 1: the LLM evaluator's weighted blocks give the forward and backward seconds of
    the modern evaluator's sum over every layer of the whole net."""
    from costs.hardware import PRECISIONS
    from costs.llm import evaluator as llm
    from costs.model import plans
    from costs.modern import evaluator as modern

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "max_position_embeddings": 8192}))
    costs = catalog.net_costs(str(path), "modern")
    names = (["H100_SXM"], ["ib_ndr", "nvlink4"])
    devices, links, eff = (
        catalog.device_table(names[0]),
        catalog.link_table(names[1]),
        catalog.efficiency(*names),
    )
    p = plans(
        costs.n_layers,
        device=0,
        network=0,
        intra_link=1,
        precision=PRECISIONS.index("bf16"),
        batch=1,
        workers=1,
        scheme=3,
    )
    a = llm.evaluate(costs, p, devices, links, efficiency=eff)
    b = modern.evaluate(costs, p, devices, links, efficiency=eff)
    assert a.forward[0] == pytest.approx(b.forward[0], rel=1e-9)
    assert a.backward[0] == pytest.approx(b.backward[0], rel=1e-9)


def test_mla_activation_memory_keeps_the_latents_and_narrower_values():
    """Per layer and token (E = 2 bytes, t = 1): the latents 2 E (q_lora_rank + kv_lora_rank)
    beside Korthikanti's terms; values and the output-projection input at v_head_dim (128), not
    the 192 of a query/key head."""
    import numpy as np

    from costs.llm import memory as llm_memory

    m = llm_shard.dims(hf_config.to_model({**DEEPSEEK_V3, "max_position_embeddings": 4096}))
    plain = {k: v for k, v in m.items() if k != "mla"}
    one = [np.array(x) for x in (1.0, 1, False, llm_memory.NONE)]  # b, t, sp, recompute
    with_mla = llm_memory.layer_activations(m, one[0], 2.0, one[1], one[2], one[3])
    without = llm_memory.layer_activations(plain, one[0], 2.0, one[1], one[2], one[3])
    a, s = 128, 4096
    assert with_mla - without == s * 2.0 * (2 * (1536 + 512) - 2 * a * (192 - 128))


def test_gemma3_multimodal_config_reads_its_language_model():
    """A gemma3 checkpoint's config nests the language model in ``text_config`` (the SigLIP
    vision tower is not counted)."""
    wrapped = {
        "model_type": "gemma3",
        "text_config": {k: v for k, v in GEMMA3_1B.items() if k != "model_type"},
    }
    assert _params(_net(wrapped)) == PUBLISHED["gemma-3-1b"][1]
    with pytest.raises(SpecError, match="config field 'text_config' must be an object"):
        hf_config.to_model({"model_type": "gemma3"})


def test_qwen2_sliding_window_starts_at_max_window_layers():
    cfg = {**QWEN25_7B, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    net = _net(cfg)
    local = [i for i in range(28) if net[f"layer{i}/attn"].layer.spec.get("window") == 4096]
    assert local == list(range(20, 28))
    assert all("window" not in _net(QWEN25_7B)[f"layer{i}/attn"].layer.spec for i in range(28))
