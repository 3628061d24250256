"""Megatron-DeepSpeed: how the deepspeed target runs a plan with tensor, pipeline or sequence
parallelism (pretrain_gpt.py with Megatron's degrees and DeepSpeed's engine and ZeRO).

Flag names are those of microsoft/Megatron-DeepSpeed's megatron/arguments.py (commit
f4157bea69f3df8c6cb66f2ebcda66ba03d1288e, 2024-12-24), as its
examples_deepspeed/pretrain_llama2_distributed.sh uses them; ``--deepspeed`` and
``--deepspeed_config`` are added by DeepSpeed's own ``deepspeed.add_config_arguments``. The
refusals are that code's rules: DeepSpeed's PipelineEngine takes ZeRO 0 or 1 only, so a plan
without pipeline stages runs the plain GPT model (``--no-pipeline-parallel``), which ZeRO 2 and
3 accept; its pipeline has no interleaved (virtual) stages.
"""

from __future__ import annotations

from planner.launch.plan import LaunchPlan

ARGS_FILE = "megatron_deepspeed_args.txt"


def model_parallel(plan: LaunchPlan) -> bool:
    """Plans the deepspeed target runs through Megatron-DeepSpeed rather than the reference script."""
    return plan.tp > 1 or plan.pp > 1 or plan.sp


def refusal(plan: LaunchPlan) -> str | None:
    """Why Megatron-DeepSpeed cannot run the plan (one sentence), or None."""
    m = plan.model
    if not m.get("causal", True):
        return f"Megatron-DeepSpeed's pretrain_gpt.py trains decoders; {plan.net} is an encoder"
    if plan.pp > 1 and plan.zero >= 2:  # deepspeed/runtime/pipe/engine.py, PipelineEngine.__init__
        return (
            "'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism' (DeepSpeed's PipelineEngine); "
            f"the plan has ZeRO {plan.zero} with PP {plan.pp}"
        )
    if plan.interleave > 1:
        return "DeepSpeed's pipeline engine has no interleaved (virtual) stages; the plan interleaves"
    if plan.ep > 1 or m.get("moe"):
        return "this target writes no Megatron-DeepSpeed expert-parallel settings (use --target megatron)"
    if plan.precision == "fp8":
        return "this target writes bf16 or fp16 Megatron-DeepSpeed runs; FP8 GEMMs are Megatron-LM's (--target megatron)"
    if plan.tp_overlap:
        return "Megatron-DeepSpeed has no tensor-parallel communication overlap (Megatron-LM's --tp-comm-overlap)"
    kind = (m.get("positional"), m.get("norm"), m.get("activation"))
    if kind not in (
        ("rope", "rmsnorm", "swiglu"),
        ("learned", "layernorm", "gelu"),
        ("learned", "layernorm", None),
    ):
        return f"Megatron-DeepSpeed's GPT model has no {'/'.join(map(str, kind))} variant"
    return None


def arguments(plan: LaunchPlan, config_file: str) -> list[str]:
    """pretrain_gpt.py's arguments for the plan (data and training length come from the script)."""
    m = plan.model
    args = [
        "--num-layers", str(m["n_layers"]),
        "--hidden-size", str(m["d_model"]),
        "--ffn-hidden-size", str(m["d_ff"]),
        "--num-attention-heads", str(m["n_heads"]),
        "--num-key-value-heads", str(m.get("n_kv_heads") or m["n_heads"]),
        "--seq-length", str(plan.seq_len),
        "--max-position-embeddings", str(max(plan.seq_len, m["seq_len"])),
        "--normalization", "rmsnorm" if m.get("norm") == "rmsnorm" else "layernorm",
        "--tokenizer-type", "NullTokenizer",
        "--vocab-size", str(m["vocab"]),
    ]  # fmt: skip
    if m.get("positional") == "rope":
        args += ["--use-rotary-position-embeddings", "--no-position-embedding"]
    if m.get("activation") == "swiglu":
        args.append("--swiglu")
    if not m.get("bias", True):
        args.append("--disable-bias-linear")
    if not m.get("tied", False):
        args.append("--untie-embeddings-and-output-weights")
    args += [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        "--micro-batch-size", str(plan.microbatch),
        "--global-batch-size", str(plan.global_batch),
    ]  # fmt: skip
    if plan.pp == 1:  # the GPT model without DeepSpeed's PipelineEngine (which refuses ZeRO 2 and 3)
        args.append("--no-pipeline-parallel")
    if plan.sp:
        args.append("--sequence-parallel")
    if plan.recompute == "full":  # as examples_deepspeed/pretrain_llama2_distributed.sh recomputes layers
        args += ["--deepspeed-activation-checkpointing", "--recompute-granularity", "full"]
        args += ["--recompute-method", "uniform"]
    elif plan.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    if plan.precision in ("bf16", "fp16"):
        args.append(f"--{plan.precision}")
    args += ["--zero-stage", str(plan.zero), "--deepspeed", "--deepspeed_config", config_file]
    return args
