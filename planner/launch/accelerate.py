"""Hugging Face accelerate: a config file for `accelerate launch` (DDP, DeepSpeed ZeRO-1, or
FSDP2 with tensor parallelism through its parallelism_config) and the launch line that trains
the reference causal LM (examples/train_lm.py --accelerate).

Keys are accelerate's config file keys (accelerate/commands/config/config_args.py, ClusterConfig;
the FSDP and parallelism_config options of accelerate/commands/launch.py). FSDP2's
``fsdp_reshard_after_forward`` false keeps parameters gathered after the forward pass (ZeRO-2),
true frees them (ZeRO-3).
"""

from __future__ import annotations

import yaml

from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, shell_script
from planner.launch.torchrun import Torchrun, example_files, hf_config

CONFIG_FILE = "accelerate_config.yaml"
MIXED = {"bf16": "bf16", "fp16": "fp16", "fp32": "no", "tf32": "no"}


def _fsdp(plan: LaunchPlan) -> bool:
    """accelerate runs the plan with FSDP2: ZeRO 2 or 3, or tensor parallelism (parallelism_config)."""
    return plan.zero >= 2 or plan.tp > 1


def accelerate_config(plan: LaunchPlan, opts: LaunchOptions) -> dict:
    """The accelerate config of the plan (machine rank and main address come from the launch line)."""
    cfg: dict = {
        "compute_environment": "LOCAL_MACHINE",
        "num_machines": plan.nodes,
        "num_processes": plan.gpus,
        "machine_rank": 0,
        "main_process_port": opts.port,
        "rdzv_backend": "static",
        "same_network": True,
        "mixed_precision": MIXED[plan.precision],
        "use_cpu": False,
    }
    if not _fsdp(plan) and plan.zero == 0:
        cfg["distributed_type"] = "MULTI_GPU"
    elif plan.zero == 1:
        cfg["distributed_type"] = "DEEPSPEED"
        cfg["deepspeed_config"] = {
            "zero_stage": 1,
            "gradient_accumulation_steps": plan.accumulation,
            "gradient_clipping": 1.0,
        }
    else:
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_reshard_after_forward": plan.zero == 3,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_activation_checkpointing": plan.recompute == "full",
        }
        if plan.tp > 1:
            shard = plan.dp if plan.zero >= 2 else 1
            cfg["parallelism_config"] = {
                "parallelism_config_dp_replicate_size": plan.dp // shard,
                "parallelism_config_dp_shard_size": shard,
                "parallelism_config_tp_size": plan.tp,
                "parallelism_config_cp_size": 1,
            }
    return cfg


class Accelerate(Target):
    name = "accelerate"
    validator = "accelerate launch's own argument handling (_validate_launch_command, prepare_*_env)"
    axes = {"pp": ("1",), "ep": ("1",), "sp": ("off",), "recompute": ("none", "full")}

    def refusal(self, plan: LaunchPlan) -> str | None:
        if not plan.transformer:
            return f"this target trains the reference causal LM with accelerate; {plan.net} is a CNN (use --target torchrun)"
        if plan.pp > 1 or plan.ep > 1:
            return "accelerate's parallelism_config has data, tensor and context degrees, no pipeline or expert parallelism"
        if plan.sp:
            return "accelerate's tensor parallelism follows the model's transformers tp_plan, without Megatron-style sequence parallelism"
        if plan.tp > 1 and plan.zero == 1:
            return "accelerate combines tensor parallelism with FSDP2 only (parallelism_config needs --fsdp_version 2), not with DeepSpeed ZeRO-1"
        if plan.precision == "fp8":
            return "this target writes bf16, fp16 or fp32 configs; FP8 needs an fp8 recipe accelerate leaves to Transformer Engine or torchao"
        if plan.recompute == "selective":
            return "accelerate's FSDP checkpointing recomputes whole layers (full) or nothing"
        if hf_config(plan.model) is None:
            return f"no Hugging Face causal-LM class matches {plan.net}"
        return None

    def _script(self, plan: LaunchPlan) -> str:
        args = Torchrun().script_args(plan) + ["--accelerate"]
        if _fsdp(plan):  # FSDP recomputes through fsdp_activation_checkpointing, not the script
            args[args.index("--recompute") + 1] = "none"
        return " ".join(args)

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        return (
            f'accelerate launch --config_file {CONFIG_FILE} --machine_rank "$NODE_RANK" '
            f'--main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" {self._script(plan)}'
        )

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        script = shell_script(
            [
                "# one node of the plan; run it on every node (a scheduler's file sets NODE_RANK and MASTER_ADDR)",
                ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}" "${MASTER_PORT:=' + str(opts.port) + '}"',
                'cd "$(dirname "$0")"',
                self.node_command(plan, opts),
            ]
        )
        return {
            CONFIG_FILE: yaml.safe_dump(accelerate_config(plan, opts), sort_keys=False),
            **example_files(plan),
            "accelerate.sh": script,
        }
