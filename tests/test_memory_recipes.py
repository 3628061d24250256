"""Memory verdicts against recipes that ran, the usable share (--memory-headroom), and the
in-flight activations of Megatron's interleaved pipeline schedule."""

from __future__ import annotations

import json

import numpy as np

from planner import catalog
from planner.cli import main

# Llama 3 405B (Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 3:
# 126 layers, model dimension 16,384, FFN dimension 53,248, 128 attention heads, 8 key/value
# heads) as its Hugging Face config.json states it (vocabulary 128,256, untied embeddings).
LLAMA3_405B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 16384,
    "intermediate_size": 53248,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 128,
    "num_hidden_layers": 126,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}


def _estimate(capsys, *args) -> dict:
    assert main(["estimate", *args, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1
    return rows[0]


def test_gpu_memory_is_binary():
    # an "80 GB" H100 has 80 GiB; CUDA reports 81,559 MiB of it (planner/catalog.py cites it)
    h100 = catalog.device("H100_SXM").device.memory_bytes
    assert h100 == 80 * 2**30
    assert 81559 * 2**20 <= h100 < 81559 * 2**20 * 1.01


def test_nvidia_llama3_70b_fp8_recipe_fits(capsys):
    # Megatron-Bridge's Llama 3 70B FP8 pre-training recipe on 64 H100 (TP 4, PP 8, VP 5,
    # sequence parallel, distributed optimizer, micro-batch 1, global batch 128, 8k sequences),
    # a row of configs/measurements/llm.csv with its release and URL: it ran, so it fits.
    r = _estimate(
        capsys, "llama3-70b", "--device", "H100_SXM", "--network", "ib_ndr", "--workers", "64",
        "--gpus-per-node", "8", "--precision", "fp8", "--tp", "4", "--pp", "8", "--interleave", "5",
        "--sp", "--zero", "1", "--global-batch", "128", "--batch", "1",
    )  # fmt: skip
    assert r["fits_memory"] and r["memory_gb"] < 0.9 * 80 * 2**30 / 1e9


def test_llama3_405b_layout_fits_with_its_sharding(capsys, tmp_path):
    # Dubey et al. 2024, Table 4: TP 8, PP 16, DP 128 on 16,384 H100, 8,192-token sequences,
    # 16M tokens per step (2,048 sequences); §3.3.2: FSDP shards the optimizer states and the
    # gradients but keeps the weights (ZeRO stage 2).
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3_405B))
    r = _estimate(
        capsys, str(path), "--device", "H100_SXM", "--network", "ib_ndr", "--workers", "16384",
        "--gpus-per-node", "8", "--tp", "8", "--pp", "16", "--sp", "--zero", "2", "--stack", "fsdp",
        "--global-batch", "2048", "--batch", "1", "--seq-len", "8192",
    )  # fmt: skip
    assert r["fits_memory"], r["memory_gb"]


def test_headroom_moves_the_verdict_and_is_validated(capsys):
    args = ["llama3-70b", "--device", "H100_SXM", "--workers", "64", "--gpus-per-node", "8", "--precision",
            "fp8", "--tp", "4", "--pp", "8", "--interleave", "5", "--sp", "--zero", "1", "--global-batch",
            "128", "--batch", "1"]  # fmt: skip
    assert not _estimate(capsys, *args, "--memory-headroom", "0.8")["fits_memory"]
    assert _estimate(capsys, *args, "--memory-headroom", "1")["fits_memory"]
    for bad in ("0", "1.5", "nan", "-0.1"):
        assert main(["estimate", *args, "--memory-headroom", bad]) == 2
        err = capsys.readouterr().err
        assert "--memory-headroom" in err and "(0, 1]" in err and err.count("\n") == 1


def test_interleaved_memory_follows_megatrons_warmup(capsys):
    """Megatron-Core's interleaved 1F1B (megatron/core/pipeline_parallel/schedules.py,
    forward_backward_pipelining_with_interleaving) runs (p - 1) * 2 + (v - 1) * p warm-up
    chunk-microbatches, plus one in flight, on the first stage: (v p + p - 1) chunks of
    L / (p v) layers, i.e. 1 + (p - 1) / (p v) times the p microbatches of L / p layers that the
    plain 1F1B schedule holds (p - 1 warm-up plus one). So memory jumps from v = 1 to v = 2 and
    falls back toward the plain schedule's as v grows."""
    base = ["llama3-8b", "--device", "H100_SXM", "--workers", "64", "--gpus-per-node", "8", "--pp", "4",
            "--global-batch", "256", "--batch", "1"]  # fmt: skip
    mem = {v: _estimate(capsys, *base, "--interleave", str(v))["memory_gb"] for v in (1, 2, 4, 8)}
    assert mem[2] > mem[4] > mem[8] > mem[1]
    states = _estimate(capsys, *base, "--interleave", "1", "--recompute", "full")  # activations ~ 0
    assert states["memory_gb"] < mem[1]


def test_interleaving_accepts_megatrons_uneven_first_and_last_stages(capsys, tmp_path):
    """126 layers on 16 stages interleave by 2 once the embedding and the loss count as layers
    (128 = 16 x 2 x 4; Megatron-Core's --account-for-embedding/loss-in-pipeline-split); 32 layers
    on 3 stages do not (neither 32 nor 34 splits into 6)."""
    from planner.space.llm_axes import interleavable

    assert interleavable(126, 16, 2) and interleavable(126, 16, 8) and interleavable(32, 4, 2)
    assert not interleavable(126, 16, 3) and not interleavable(32, 3, 2) and not interleavable(32, 1, 2)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3_405B))
    r = _estimate(
        capsys, str(path), "--workers", "16384", "--gpus-per-node", "8", "--tp", "8", "--pp", "16",
        "--interleave", "2", "--sp", "--zero", "2", "--global-batch", "2048", "--batch", "1", "--seq-len", "8192",
        "--stack", "fsdp",
    )  # fmt: skip
    assert r["interleave"] == 2 and r["pp"] == 16
    assert main(["estimate", "llama3-8b", "--workers", "6", "--pp", "3", "--interleave", "2"]) == 2
    assert "34, as Megatron-Core splits them" in capsys.readouterr().err


# NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/configs.yml (read 2026-11-24,
# https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/configs.yml):
# ResNet-50 v1.5 trains at batch 256 per GPU in AMP on a DGX-1V (V100 16 GB) and a T4 (16 GB), and
# at 112 (DGX-1V) and 128 (T4) in FP32: the recipes fit; FP32 at 256 on 16 GB is what they avoid.
DLE_RN50 = [
    ("V100_16GB", "fp16", 256, True),
    ("V100_16GB", "fp32", 112, True),
    ("T4", "fp16", 256, True),
    ("T4", "fp32", 128, True),
    ("V100_16GB", "fp32", 256, False),
]


def test_resnet50_fits_as_nvidias_published_recipes_train_it(capsys):
    for device, precision, batch, fits in DLE_RN50:
        rec = _estimate(
            capsys,
            "resnet50",
            "--device",
            device,
            "--workers",
            "1",
            "--batch",
            str(batch),
            "--precision",
            precision,
        )
        assert rec["fits_memory"] is fits, (device, precision, batch, rec["memory_gb"])


def test_identity_shortcuts_hold_no_activation_memory():
    # a view (ResNet's identity shortcut, a flatten) allocates nothing; PALEO's rules still count it
    modern = catalog.net_costs("resnet50", "modern")
    views = [s for s in modern.net.layers if s.type == "Reshape"]
    assert len(views) == 12  # the 12 identity shortcuts of ResNet-50's 16 blocks
    per_view = sum(int(np.prod(s.out_shape)) for s in views)
    assert modern.act_stored == modern.act_before[-1] - per_view
