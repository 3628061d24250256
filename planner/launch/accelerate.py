"""Hugging Face accelerate: a config file for `accelerate launch` and the launch line that trains
the reference causal LM (examples/train_lm.py --accelerate).

A data-parallel plan runs on DDP, DeepSpeed ZeRO-1 or FSDP2; a plan with tensor, pipeline or
sequence parallelism runs on accelerate's Megatron-LM plugin (``distributed_type: MEGATRON_LM``
and its ``megatron_lm_config``), which builds a Megatron-LM GPT model from the transformers
config. Keys are accelerate's (accelerate 1.15: commands/config/config_args.py, ClusterConfig;
the ``--fsdp_*`` and ``--megatron_lm_*`` options of commands/launch.py, which copies
``megatron_lm_config`` into them). FSDP2's ``fsdp_reshard_after_forward`` false keeps
parameters gathered after the forward pass (ZeRO-2), true frees them (ZeRO-3).

The Megatron-LM plugin (utils/dataclasses.py, ``MegatronLMPlugin.__post_init__``) fills a
setting the launcher left unset with its own default, so every one is written: its context
parallel size defaults to 2 and its recompute granularity to full.
"""

from __future__ import annotations

import yaml

from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, shell_script
from planner.launch.torchrun import Torchrun, example_files, hf_config, hf_refusal

CONFIG_FILE = "accelerate_config.yaml"
MIXED = {"bf16": "bf16", "fp16": "fp16", "fp32": "no", "tf32": "no"}


def _megatron(plan: LaunchPlan) -> bool:
    """accelerate runs the plan on its Megatron-LM plugin: tensor, pipeline or sequence parallelism."""
    return plan.tp > 1 or plan.pp > 1 or plan.sp


def _fsdp(plan: LaunchPlan) -> bool:
    """accelerate runs the plan with FSDP2: a data-parallel plan with ZeRO 2 or 3."""
    return plan.zero >= 2 and not _megatron(plan)


def megatron_lm_config(plan: LaunchPlan) -> dict:
    """The Megatron-LM plugin settings of the plan (accelerate launch's --megatron_lm_* options)."""
    full = plan.recompute == "full"
    return {
        "megatron_lm_tp_degree": plan.tp,
        "megatron_lm_pp_degree": plan.pp,
        "megatron_lm_num_micro_batches": plan.accumulation,
        "megatron_lm_sequence_parallelism": plan.sp,
        "megatron_lm_recompute_activations": True,
        "megatron_lm_recompute_granularity": plan.recompute,
        "megatron_lm_recompute_method": "uniform" if full else None,
        "megatron_lm_recompute_num_layers": 1 if full else None,
        "megatron_lm_use_distributed_optimizer": plan.zero == 1,
        "megatron_lm_gradient_clipping": 1.0,
        "megatron_lm_context_parallel_size": 1,
        "megatron_lm_expert_model_parallel_size": plan.ep,
    }


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
    if _megatron(plan):
        cfg["distributed_type"] = "MEGATRON_LM"
        cfg["megatron_lm_config"] = {k: v for k, v in megatron_lm_config(plan).items() if v is not None}
    elif plan.zero == 0:
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
    return cfg


class Accelerate(Target):
    name = "accelerate"
    validator = (
        "accelerate launch's own argument handling (_validate_launch_command, prepare_*_env) and, "
        "with model parallelism, its MegatronLMPlugin built from that environment"
    )
    # the search keeps to data-parallel plans, which accelerate runs at every ZeRO stage; the
    # Megatron-LM plugin runs model-parallel plans only with ZeRO 0 or 1 and recomputation
    axes = {
        "tp": ("1",),
        "pp": ("1",),
        "ep": ("1",),
        "cp": ("1",),
        "sp": ("off",),
        "recompute": ("none", "full"),
    }

    def refusal(self, plan: LaunchPlan) -> str | None:
        if not plan.transformer:
            return f"this target trains the reference causal LM with accelerate; {plan.net} is a CNN (use --target torchrun)"
        if plan.ep > 1 or plan.interleave > 1 or plan.cp > 1:
            return "this target writes no expert-parallel, context-parallel or interleaved-pipeline settings for accelerate (use --target megatron)"
        if _megatron(plan):
            return self._megatron_refusal(plan)
        if plan.precision == "fp8":
            return "this target writes bf16, fp16 or fp32 configs; FP8 needs an fp8 recipe accelerate leaves to Transformer Engine or torchao"
        if plan.recompute == "selective":
            return "accelerate's FSDP checkpointing recomputes whole layers (full) or nothing"
        if hf_config(plan.model) is None:
            return hf_refusal(plan)
        return None

    def _megatron_refusal(self, plan: LaunchPlan) -> str | None:
        if plan.zero >= 2:
            return (
                "accelerate's Megatron-LM plugin shards only optimizer state (megatron_lm_use_distributed_optimizer, "
                "ZeRO-1); its megatron_lm_use_custom_fsdp sets a field Megatron-Core no longer reads and no sharding "
                f"strategy, and the plan has ZeRO {plan.zero} (use --target megatron, nemo, deepspeed or torchtitan)"
            )
        if plan.recompute == "none":
            return (
                "accelerate's Megatron-LM plugin always recomputes activations (an unset "
                "megatron_lm_recompute_granularity becomes full, MegatronLMPlugin.__post_init__); the plan recomputes none"
            )
        if plan.precision not in ("bf16", "fp16"):
            return f"accelerate's Megatron-LM plugin trains in bf16 or fp16 (the plan trains in {plan.precision})"
        model_type = (hf_config(plan.model) or {}).get("model_type")
        if model_type not in ("llama", "gpt2"):
            return f"accelerate's Megatron-LM plugin converts Llama and GPT-2 configs; {plan.net} is neither"
        return None

    def _script(self, plan: LaunchPlan) -> str:
        args = Torchrun().script_args(plan) + ["--accelerate"]
        if _fsdp(plan) or _megatron(plan):  # FSDP or Megatron-LM recomputes, not the script
            args[args.index("--recompute") + 1] = "none"
        return " ".join(args)

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        return (
            f'accelerate launch --config_file {CONFIG_FILE} --machine_rank "$NODE_RANK" '
            f'--main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" {self._script(plan)}'
        )

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        megatron = [  # the plugin imports megatron.training, which only a Megatron-LM checkout has
            ': "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout (the Megatron-LM plugin imports it)}"',
            'export PYTHONPATH="$MEGATRON_LM${PYTHONPATH:+:$PYTHONPATH}"',
        ]
        script = shell_script(
            [
                "# one node of the plan; run it on every node (a scheduler's file sets NODE_RANK and MASTER_ADDR)",
                *(megatron if _megatron(plan) else []),
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
