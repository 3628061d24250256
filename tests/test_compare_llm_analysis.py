"""benchmarks/compare_llm_analysis.py hands llm-analysis the measured run's own numbers.

Three shipped runs of configs/measurements/llm.csv, read through planner's loader: Megatron-LM's
GPT-3 175B on 1,024 A100s (TP 8, PP 16, micro-batch 1, 192 micro-batches, full recomputation;
README: "global batch size of 1536 ... each iteration takes around 32 seconds"), torchtitan's
Llama 3 70B on 64 A100s (FSDP, grouped-query attention, SwiGLU of 3.5 x the hidden size) and
NeMo 24.07's FP8 GPT-3 175B on 512 H100s (TP 4 with sequence parallelism, PP 8, ZeRO 1,
global batch 2048). The mixture-of-experts runs are skipped with their reason.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "llm_analysis",
    reason="the comparison needs llm-analysis: pip install '.[compare]' (llm-analysis==0.2.2)",
)

from planner import catalog  # noqa: E402
from planner.calibrate import measurements  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location(
        "compare_llm_analysis", ROOT / "benchmarks" / "compare_llm_analysis.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    module.quiet()
    return module


@pytest.fixture(scope="module")
def runs():
    return measurements.load(catalog.configs_dir() / "measurements" / "llm.csv")


def one(runs, source: str, net: str, gpus: int):
    (run,) = [r for r in runs if r.source == source and r.net == net and r.gpus == gpus]
    return run


def test_megatron_gpt3_175b_inputs_and_step_time(compare, runs):
    run = one(runs, "megatron-lm-readme-gpt3-175b", "gpt3-175b", 1024)
    assert compare.skip_reason(run) == ""
    x = compare.inputs(run)
    m = x.model
    assert (m.hidden_dim, m.num_layers, m.n_head, m.num_key_value_heads) == (12288, 96, 96, 96)
    assert (m.ffn_embed_dim, m.vocab_size) == (49152, 50257)
    p = x.parallel
    assert (p.tp_size, p.pp_size, p.dp_size, p.sp_size) == (8, 16, 8, 1)
    t = x.training
    assert (t["batch_size_per_gpu"], t["gradient_accumulation_steps"], t["global_batch_size"]) == (
        1,
        192,
        1536,
    )
    assert t["seq_len"] == 2048 and t["activation_recomputation"].name == "FULL" and t["ds_zero"].value == 0
    # A100 80GB SXM datasheet (configs/devices.toml): 312 TFLOP/s FP16 dense, 2039 GB/s, 80 GB;
    # NVLink 3 300 GB/s per direction; HDR InfiniBand 200 Gbit/s = 25 GB/s
    g = x.gpu
    assert (g.peak_fp16_TFLOPS, g.hbm_bandwidth_in_GB_per_sec, g.mem_per_GPU_in_GB) == (312.0, 2039.0, 80)
    assert g.intra_node_bandwidth_in_GB_per_sec == 300.0 and g.inter_node_bandwidth_in_GB_per_sec == 25.0
    assert (x.dtype.weight_bits, x.dtype.activation_bits) == (16, 16)
    # llm-analysis's step: 4 forward passes' FLOPs (forward, backward = 2x, full recomputation)
    # per micro-batch, 24 b s l h^2 (1 + s/(6h) + V/(12 l h)) each, over TP x PP = 128 GPUs at
    # 0.5 x 312 TFLOP/s: 28.3 s per step of 192 micro-batches, against the README's ~32 s.
    h, layers, s, vocab = 12288, 96, 2048, 50257
    forward = 24 * s * layers * h**2 * (1 + s / (6 * h) + vocab / (12 * layers * h))
    step_s = 192 * 4 * forward / (128 * 0.5 * 312e12)
    assert step_s == pytest.approx(28.3, abs=0.1)
    predicted = compare.samples_per_s(x, compare.README)
    assert predicted == pytest.approx(1536 / step_s, rel=0.01)
    assert run.samples_per_s == pytest.approx(1536 / 32, rel=0.02)  # 138 TFLOP/s per GPU as read


def test_torchtitan_llama3_70b_carries_gqa_swiglu_and_fsdp(compare, runs):
    run = one(runs, "torchtitan-a100-llama3", "llama3-70b", 64)
    x = compare.inputs(run)
    assert (x.model.hidden_dim, x.model.num_key_value_heads, x.model.ffn_embed_dim) == (8192, 8, 28672)
    assert x.model.vocab_size == 128256 and x.model.num_layers == 80
    assert (x.parallel.tp_size, x.parallel.pp_size, x.parallel.dp_size) == (1, 1, 64)
    t = x.training
    assert t["ds_zero"].value == 3 and t["activation_recomputation"].name == "FULL"
    assert t["seq_len"] == 8192 and t["global_batch_size"] == 64
    assert t["mlp_gated_linear_units"] and t["flash_attn"]
    assert x.gpu.peak_fp16_TFLOPS == 312.0  # bf16 dense, as fp16 on the A100


def test_nemo_fp8_runs_at_the_fp8_peak_with_sequence_parallelism(compare, runs):
    run = one(runs, "nemo-24.07-h100-fp8", "gpt3-175b", 512)
    x = compare.inputs(run)
    assert (x.dtype.weight_bits, x.dtype.activation_bits) == (8, 8)
    # H100 SXM datasheet: FP8 3958 TFLOP/s with sparsity, 1978.9 dense; BF16 989.4 dense
    assert x.gpu.peak_i8_TFLOPS == pytest.approx(1978.9) and x.gpu.peak_fp16_TFLOPS == pytest.approx(989.4)
    assert (x.parallel.tp_size, x.parallel.pp_size, x.parallel.dp_size, x.parallel.sp_size) == (4, 8, 16, 4)
    t = x.training
    assert (t["batch_size_per_gpu"], t["gradient_accumulation_steps"], t["global_batch_size"]) == (
        2,
        64,
        2048,
    )
    assert t["ds_zero"].value == 1 and t["activation_recomputation"].name == "NONE"
    fast, slow = compare.samples_per_s(x, compare.DEFAULTS), compare.samples_per_s(x, compare.README)
    assert fast == pytest.approx(2 * slow)  # step time is FLOPs / (efficiency x peak)


def test_mixture_of_experts_runs_are_skipped_with_the_reason(compare, runs):
    moe = [r for r in runs if catalog.net_spec(r.net)["model"].get("moe")]
    assert len(moe) == 2  # Qwen3-30B-A3B twice (DeepSeek-V3 is in scale.csv)
    assert all("mixture of experts" in compare.skip_reason(r) for r in moe)
    dense = [r for r in runs if r not in moe]
    assert not [r for r in dense if compare.skip_reason(r)]
