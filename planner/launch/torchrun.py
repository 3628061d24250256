"""torchrun with the reference training scripts of examples/ (data parallel: DDP, ZeRO-1's
sharded optimizer state, FSDP2).

A plan with tensor, pipeline or sequence parallelism is refused, naming the targets that run
it: torchtitan (whose trainer torchrun starts, with the plan's degrees in its job files),
Megatron-LM, NeMo and, through Megatron-DeepSpeed, deepspeed. ``--target torchrun`` stays one
program, the plain PyTorch scripts whose step times a user compares with the plan (and fits a
stack on); switching it to another trainer for some plans would change what it measures.
"""

from __future__ import annotations

import json
from pathlib import Path

from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, shell_script, torchrun_prefix

RESNETS = ("resnet50", "resnet101", "resnet152")  # built in examples/train_cnn.py
# zoo CNNs torchvision.models builds under the same name (examples/train_cnn.py takes them from
# torchvision when it is installed)
TORCHVISION = ("alexnet", "vgg16", "googlenet", "inception_v3", "densenet121")


def _beyond_llama(model: dict) -> list[str]:
    """The features of a description that Llama's, Mixtral's and GPT-2's configs cannot carry
    (a config written without them would train another model): QK norms, extra norms, sliding
    windows, MLA, a head width of its own, biases on some linears only, shared or dense-first
    experts."""
    out = [k for k in ("qk_norm", "post_norms", "window", "local_layers", "mla") if model.get(k)]
    hd = model.get("head_dim")
    if hd and hd * model["n_heads"] != model["d_model"]:
        out.append("head_dim")
    if len({bool(model.get(k, model.get("bias", False))) for k in ("qkv_bias", "out_bias", "mlp_bias")}) > 1:
        out.append("biases")
    moe = model.get("moe") or {}
    out += [k for k in ("n_shared", "first_dense") if moe.get(k)]
    return out


def hf_refusal(plan) -> str:
    """Why no reference LM script builds a transformer plan's model (:func:`hf_config` is None),
    naming the features a Llama, Mixtral or GPT-2 config cannot carry."""
    extra = _beyond_llama(plan.model)
    return f"no Hugging Face causal-LM class matches {plan.net} (Llama, Mixtral and GPT-2 shapes do)" + (
        f"; it has {', '.join(extra)}, which their configs cannot carry" if extra else ""
    )


def hf_config(model: dict) -> dict | None:
    """A transformers config (``model_type`` and fields) of a net's transformer description, or
    None when no transformers causal-LM class matches it: Llama for RoPE, RMSNorm and SwiGLU;
    Mixtral for those with experts; GPT-2 for learned positions, LayerNorm and GELU."""
    common = {"vocab_size": model["vocab"], "max_position_embeddings": model["seq_len"]}
    llama = dict(
        hidden_size=model["d_model"],
        intermediate_size=model["d_ff"],
        num_hidden_layers=model["n_layers"],
        num_attention_heads=model["n_heads"],
        num_key_value_heads=model.get("n_kv_heads", model["n_heads"]),
        tie_word_embeddings=bool(model.get("tied", False)),
        **common,
    )
    if not model.get("causal", True) or _beyond_llama(model):
        return None
    kind = (model.get("positional"), model.get("norm"), model.get("activation"))
    if kind == ("rope", "rmsnorm", "swiglu"):
        moe = model.get("moe")
        if moe is None:
            return {"model_type": "llama", **llama}
        return {
            "model_type": "mixtral",
            **llama,
            "intermediate_size": moe.get("d_ff_expert", model["d_ff"]),
            "num_local_experts": moe["n_experts"],
            "num_experts_per_tok": moe["top_k"],
        }
    if kind[0] == "learned" and kind[1] == "layernorm" and kind[2] in ("gelu", None):
        return {
            "model_type": "gpt2",
            "n_embd": model["d_model"],
            "n_layer": model["n_layers"],
            "n_head": model["n_heads"],
            "n_inner": model["d_ff"],
            "n_positions": model["seq_len"],
            "vocab_size": model["vocab"],
        }
    return None


def example_files(plan: LaunchPlan) -> dict[str, str]:
    """The reference script the plan runs and its shared module, from planner's examples/
    (installed as the ``planner.examples`` package data, or beside the source tree)."""
    names = ("trainlib.py", "train_lm.py" if plan.transformer else "train_cnn.py")
    try:
        from importlib.resources import files

        folder = files("planner.examples")
        out = {n: folder.joinpath(n).read_text() for n in names}
    except (ModuleNotFoundError, FileNotFoundError):
        folder = Path(__file__).resolve().parents[2] / "examples"
        out = {n: (folder / n).read_text() for n in names}
    if plan.transformer:
        out["model_config.json"] = json.dumps(hf_config(plan.model), indent=2) + "\n"
    return out


class Torchrun(Target):
    name = "torchrun"
    validator = "runs one training step of the reference script on the CPU (gloo backend)"
    axes = {
        "tp": ("1",),
        "pp": ("1",),
        "ep": ("1",),
        "cp": ("1",),
        "sp": ("off",),
        "recompute": ("none", "full"),
    }

    def refusal(self, plan: LaunchPlan) -> str | None:
        model_parallel = [
            f"{k} {v}"
            for k, v in (("TP", plan.tp), ("PP", plan.pp), ("EP", plan.ep), ("CP", plan.cp))
            if v > 1
        ]
        if model_parallel or plan.sp:
            what = ", ".join(model_parallel) or "sequence parallelism"
            return (
                f"the reference scripts are data parallel only (DDP, ZeRO-1, FSDP2), the plan has {what}; "
                "--target torchtitan runs it under torchrun (also: megatron, nemo, deepspeed)"
            )
        if plan.precision == "fp8":
            return "the reference scripts train in fp32, tf32, fp16 or bf16; FP8 GEMMs need Transformer Engine (--target megatron or nemo)"
        if plan.recompute == "selective":
            return "the reference LM script recomputes whole layers (full) or nothing; selective recomputation is Megatron's (--target megatron)"
        if plan.transformer:
            if hf_config(plan.model) is None:
                return hf_refusal(plan)
        elif plan.net not in RESNETS + TORCHVISION:
            return f"no reference script builds {plan.net} (valid: {', '.join(RESNETS + TORCHVISION)})"
        return None

    def script_args(self, plan: LaunchPlan) -> list[str]:
        """The reference script and its options for this plan."""
        common = [
            "--batch", str(plan.microbatch),
            "--accumulation", str(plan.accumulation),
            "--precision", plan.precision,
            "--zero", str(plan.zero),
            "--net", plan.net,
            "--device-key", plan.device,
            "--network", plan.network,
            "--log-csv", "steps.csv",
        ]  # fmt: skip
        if plan.transformer:
            head = ["train_lm.py", "--model-config", "model_config.json", "--seq-len", str(plan.seq_len)]
            return head + ["--recompute", plan.recompute, "--attention", plan.attention] + common
        return ["train_cnn.py", "--arch", plan.net, "--channels-last"] + common

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        return f"{torchrun_prefix(plan, opts)} " + " ".join(self.script_args(plan))

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        script = shell_script(
            [
                "# one node of the plan; run it on every node (a scheduler's file sets NODE_RANK and MASTER_ADDR)",
                ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}" "${MASTER_PORT:=' + str(opts.port) + '}"',
                'cd "$(dirname "$0")"',
                self.node_command(plan, opts),
            ]
        )
        return {"torchrun.sh": script, **example_files(plan)}
