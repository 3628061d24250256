"""DeepSpeed: a config JSON (ZeRO stage, batch arithmetic, precision, AutoTP) and the launcher
line that trains the reference causal LM (examples/train_lm.py) with DeepSpeed's engine.

DeepSpeed checks ``train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel size`` (deepspeed/runtime/config.py,
``_batch_assertion``); tensor parallelism is its AutoTP training (``tensor_parallel.autotp_size``).
"""

from __future__ import annotations

import json

from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, shell_script, torchrun_prefix
from planner.launch.torchrun import Torchrun, example_files, hf_config

CONFIG_FILE = "ds_config.json"


def ds_config(plan: LaunchPlan) -> dict:
    """The DeepSpeed config of the plan."""
    cfg: dict = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.microbatch,
        "gradient_accumulation_steps": plan.accumulation,
        "gradient_clipping": 1.0,
        "zero_optimization": {
            "stage": plan.zero,
            "overlap_comm": plan.zero >= 2,
            "contiguous_gradients": True,
        },
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
    }
    if plan.precision in ("bf16", "fp16"):
        cfg[plan.precision] = {"enabled": True}
    if plan.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": plan.tp, "tp_overlap_comm": plan.tp_overlap}
    return cfg


class DeepSpeed(Target):
    name = "deepspeed"
    validator = "DeepSpeed's DeepSpeedConfig (batch arithmetic, ZeRO and precision sections)"
    axes = {"pp": ("1",), "ep": ("1",), "sp": ("off",), "recompute": ("none", "full")}

    def refusal(self, plan: LaunchPlan) -> str | None:
        if not plan.transformer:
            return f"this target trains the reference causal LM with DeepSpeed's engine; {plan.net} is a CNN (use --target torchrun)"
        if plan.pp > 1 and plan.zero >= 2:  # deepspeed/runtime/pipe/engine.py, PipelineEngine.__init__
            return f"'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism' (DeepSpeed's PipelineEngine); the plan has ZeRO {plan.zero} with PP {plan.pp}"
        if plan.pp > 1:
            return "DeepSpeed pipelines a model written as a deepspeed.pipe.PipelineModule; the reference Hugging Face model is not one"
        if plan.sp:
            return "DeepSpeed's AutoTP splits the linear layers without Megatron-style sequence parallelism (its sequence_parallel_size is Ulysses, another scheme)"
        if plan.ep > 1:
            return "this target writes no DeepSpeed expert-parallel settings (EP > 1)"
        if plan.precision == "fp8":
            return "this target writes bf16 or fp16 DeepSpeed configs; FP8 GEMMs need Transformer Engine layers (--target megatron or nemo)"
        if plan.recompute == "selective":
            return "the reference LM script recomputes whole layers (full) or nothing; selective recomputation is Megatron's"
        if hf_config(plan.model) is None:
            return f"no Hugging Face causal-LM class matches {plan.net}"
        return None

    def _script(self, plan: LaunchPlan) -> str:
        args = Torchrun().script_args(plan)
        return " ".join(args + ["--deepspeed-config", CONFIG_FILE])

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        return f"{torchrun_prefix(plan, opts)} {self._script(plan)}"

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        launcher = shell_script(
            [
                "# DeepSpeed's launcher starts every node over ssh from HOSTFILE ('host slots=GPUS' lines)",
                ': "${HOSTFILE:?set HOSTFILE to a DeepSpeed hostfile}" "${MASTER_ADDR:?set MASTER_ADDR to the first host}"',
                'cd "$(dirname "$0")"',
                f'deepspeed --hostfile "$HOSTFILE" --num_nodes {plan.nodes} --num_gpus {plan.gpus_per_node} '
                f'--master_addr "$MASTER_ADDR" --master_port {opts.port} {self._script(plan)}',
            ]
        )
        return {
            CONFIG_FILE: json.dumps(ds_config(plan), indent=2) + "\n",
            **example_files(plan),
            "deepspeed.sh": launcher,
        }
