"""Hugging Face ``config.json`` files wherever a net name goes (costs/specs/hf_config.py)."""

from __future__ import annotations

import json

import pytest

from costs.specs import layers
from planner import catalog
from planner.cli import main

# Meta-Llama-3-8B's config.json, the fields read (a copy at
# https://huggingface.co/QizhiPei/Llama3-8B-MathFusion/blob/main/config.json, read 2026-11-23).
LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
# https://huggingface.co/openai-community/gpt2-xl/blob/main/config.json (read 2026-11-23)
GPT2_XL = {
    "model_type": "gpt2",
    "n_embd": 1600,
    "n_head": 25,
    "n_layer": 48,
    "n_positions": 1024,
    "vocab_size": 50257,
}
# https://huggingface.co/google-bert/bert-large-uncased/blob/33c39800b0a20bb13de1f87885c10ceb43f55a11/config.json
BERT_LARGE = {
    "model_type": "bert",
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "max_position_embeddings": 512,
    "num_attention_heads": 16,
    "num_hidden_layers": 24,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}
# Mixtral-8x7B's config fields (Jiang et al. 2024, Table 1; see configs/nets/mixtral-8x7b.json).
MIXTRAL = {
    **LLAMA3_8B,
    "model_type": "mixtral",
    "max_position_embeddings": 32768,
    "vocab_size": 32000,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
}


def _write(tmp_path, cfg: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _params(net) -> int:
    return sum(layers.params(s) for s in net.layers)


def test_a_llama3_8b_config_gives_8_03_billion(tmp_path):
    net = catalog.load_net(_write(tmp_path, LLAMA3_8B), "planner")
    assert abs(_params(net) - 8.03e9) <= 0.005e9
    assert _params(net) == _params(catalog.load_net("llama3-8b", "planner"))


@pytest.mark.parametrize(
    "cfg, zoo", [(GPT2_XL, "gpt2-xl"), (BERT_LARGE, "bert-large"), (MIXTRAL, "mixtral-8x7b")]
)
def test_configs_match_their_zoo_entries(tmp_path, cfg, zoo):
    net = catalog.load_net(_write(tmp_path, cfg), "modern")
    assert _params(net) == _params(catalog.load_net(zoo, "modern"))
    assert [s.out_shape for s in net.layers] == [s.out_shape for s in catalog.load_net(zoo, "modern").layers]


def test_summary_of_a_config_file(tmp_path, capsys):
    code = main(["summary", _write(tmp_path, LLAMA3_8B), "--rules", "modern", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["totals"]["params"] == _params(catalog.load_net("llama3-8b", "modern"))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_size": None}, "config field 'hidden_size' is missing"),
        (
            {"num_hidden_layers": "32"},
            "config field 'num_hidden_layers' must be a positive integer, got '32'",
        ),
        (
            {"model_type": "t5"},
            "config field 'model_type' must be one of gpt2, bert, llama, mistral, mixtral",
        ),
        ({"tie_word_embeddings": "no"}, "config field 'tie_word_embeddings' must be true or false"),
        ({"hidden_act": "relu"}, "config field 'hidden_act' must be silu"),
    ],
)
def test_a_malformed_config_is_one_line_naming_the_field(tmp_path, capsys, change, message):
    cfg = {k: v for k, v in {**LLAMA3_8B, **change}.items() if v is not None}
    code = main(["summary", _write(tmp_path, cfg), "--rules", "planner"])
    out, err = capsys.readouterr()
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
