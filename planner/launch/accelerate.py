"""Hugging Face accelerate: a config file for `accelerate launch` and the launch line that trains
the reference causal LM (examples/train_lm.py --accelerate).

A data-parallel plan runs on DDP, DeepSpeed ZeRO-1 or FSDP2. A plan with tensor and/or context
parallelism and ZeRO 2 or 3 runs on FSDP2 with accelerate's ``parallelism_config`` (its
N-dimensional parallelism: ``ParallelismConfig`` in accelerate/parallelism_config.py, the keys
``parallelism_config_*`` of commands/config/cluster.py; the layout of accelerate's
examples/torch_native_parallelism/configs/tp_hsdp.yaml): FSDP2 shards over the data-parallel
GPUs (``dp_shard``), transformers' tensor-parallel plan of the model shards its linears over
``tp``, and torch's context parallelism splits the sequence over ``cp``. Any other plan with
tensor, pipeline or sequence parallelism runs on accelerate's Megatron-LM plugin
(``distributed_type: MEGATRON_LM`` and its ``megatron_lm_config``), which builds a Megatron-LM
GPT model from the transformers config. Keys are accelerate's (accelerate 1.15: commands/config/config_args.py, ClusterConfig;
the ``--fsdp_*`` and ``--megatron_lm_*`` options of commands/launch.py, which copies
``megatron_lm_config`` into them). FSDP2's ``fsdp_reshard_after_forward`` false keeps
parameters gathered after the forward pass (ZeRO-2), true frees them (ZeRO-3).

The Megatron-LM plugin (utils/dataclasses.py, ``MegatronLMPlugin.__post_init__``) fills a
setting the launcher left unset with its own default, so every one is written: its context
parallel size defaults to 2 and its recompute granularity to full.
"""

from __future__ import annotations

import yaml

from planner.errors import BadInput
from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, shell_script
from planner.launch.torchrun import Torchrun, example_files, hf_config, hf_refusal

CONFIG_FILE = "accelerate_config.yaml"
# transformers' tensor-parallel plans shard linears only: Llama's base_model_tp_plan
# (models/llama/configuration_llama.py) names q/k/v/o and the MLP, none of its norms, and the
# colwise/rowwise styles of distributed/tensor_parallel.py take and return activations replicated
# over the TP group; DistributedConfig.enable_sequence_parallel is "reserved ... not wired up yet"
# (distributed/configuration_utils.py, transformers 5.17). accelerate's own sp_size is another
# scheme (DeepSpeed's Ulysses, all-to-all over heads, under DeepSpeed only).
SP_REFUSAL = (
    "transformers' tensor-parallel plans keep norms and activations replicated over the TP group "
    "(DistributedConfig.enable_sequence_parallel is not wired up), so accelerate cannot run Megatron-style "
    "sequence parallelism with FSDP2; the plan has it on (search with --target accelerate, which keeps it "
    "off, or use --target megatron, nemo, torchtitan or deepspeed)"
)
MIXED = {"bf16": "bf16", "fp16": "fp16", "fp32": "no", "tf32": "no"}


# model types whose transformers config carries a base_model_tp_plan (transformers 5.17:
# models/llama/configuration_llama.py, models/mixtral/configuration_mixtral.py; GPT-2 has none)
TP_PLANS = ("llama", "mixtral")
# the plan's context-parallel exchange -> accelerate's cp_comm_strategy, which is torch's rotate
# method (torch/distributed/tensor/experimental/_context_parallel/_attention.py: "alltoall" sends
# each key/value shard to the next rank, a ring; "allgather" gathers all shards once); Megatron's
# a2a (all-to-all over heads) has no counterpart
CP_STRATEGY = {"p2p": "alltoall", "all_gather": "allgather"}


def _nd(plan: LaunchPlan) -> bool:
    """accelerate runs the plan with FSDP2 and a parallelism_config: tensor and/or context
    parallelism with ZeRO 2 or 3, no pipeline."""
    return (plan.tp > 1 or plan.cp > 1) and plan.zero >= 2 and plan.pp == 1


def _megatron(plan: LaunchPlan) -> bool:
    """accelerate runs the plan on its Megatron-LM plugin: any other tensor, pipeline or
    sequence parallelism."""
    return (plan.tp > 1 or plan.pp > 1 or plan.sp) and not _nd(plan)


def _fsdp(plan: LaunchPlan) -> bool:
    """accelerate runs the plan with FSDP2: ZeRO 2 or 3, data parallel or N-dimensional."""
    return plan.zero >= 2 and not _megatron(plan)


def parallelism_config(plan: LaunchPlan) -> dict:
    """The parallelism_config section of an N-dimensional plan (accelerate launch's
    --parallelism_config_* options): FSDP2 shards over the data-parallel GPUs (ZeRO 2 and 3
    alike; ``fsdp_reshard_after_forward`` tells them apart), no replicated dimension."""
    cfg = {
        "parallelism_config_dp_replicate_size": 1,
        "parallelism_config_dp_shard_size": plan.dp,
        "parallelism_config_tp_size": plan.tp,
        "parallelism_config_cp_size": plan.cp,
    }
    if plan.cp > 1:
        cfg["parallelism_config_cp_comm_strategy"] = CP_STRATEGY[plan.cp_comm]
    return cfg


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
            # every rank builds the model from its config, so there is no checkpoint for rank 0 to
            # broadcast; `accelerate launch` turns this on when the config leaves it out, and then
            # fsdp2_load_full_state_dict (utils/fsdp_utils.py, accelerate 1.15) broadcasts a
            # tensor-parallel parameter's local shard as if it were the whole (DTensor.to_local),
            # so a TP plan fails with a size mismatch; accelerate's tp_hsdp.yaml sets it false too
            "fsdp_cpu_ram_efficient_loading": False,
        }
        if _nd(plan):
            cfg["parallelism_config"] = parallelism_config(plan)
    return cfg


class Accelerate(Target):
    name = "accelerate"
    validator = (
        "accelerate launch's own argument handling (_validate_launch_command, prepare_*_env) and "
        "the ParallelismConfig or MegatronLMPlugin it builds from that environment"
    )
    # the search keeps to plans FSDP2 with a parallelism_config runs (tensor and context
    # parallelism without Megatron's sequence parallelism, which transformers does not write:
    # SP_REFUSAL), ZeRO 2 or 3 (couple); the Megatron-LM plugin's plans (ZeRO 0 or 1 with
    # tensor parallelism and recomputation) are written by `planner launch`, not searched
    axes = {
        "pp": ("1",),
        "ep": ("1",),
        "sp": ("off",),
        "cp_comm": tuple(CP_STRATEGY),
        "recompute": ("none", "full"),
        "tp_overlap": ("off",),
    }

    def couple(self, options: dict[str, str]) -> dict[str, str]:
        """ZeRO 2 and 3 where the search may pick tensor or context parallelism (FSDP2 with a
        parallelism_config runs those; DDP and DeepSpeed ZeRO-1 under accelerate do not); data
        parallelism alone where the user asks for ZeRO 0 or 1 only."""
        if options.get("tp", "").strip() == options.get("cp", "").strip() == "1":
            return options  # data parallel: every ZeRO stage runs
        zero = [z.strip() for z in options.get("zero", "0,1,2,3").split(",") if z.strip()]
        sharded = [z for z in zero if z in ("2", "3")]
        if sharded:
            return {**options, "zero": ",".join(sharded)}
        out = dict(options)
        for axis in ("tp", "cp"):
            if axis in out and "1" not in [x.strip() for x in out[axis].split(",")]:
                raise BadInput(
                    f"--{axis} {out[axis]}: --target accelerate runs tensor and context parallelism with "
                    f"ZeRO 2 or 3 only (FSDP2), and --zero is {options['zero']}"
                )
            out[axis] = "1"
        return out

    def refusal(self, plan: LaunchPlan) -> str | None:
        if not plan.transformer:
            return f"this target trains the reference causal LM with accelerate; {plan.net} is a CNN (use --target torchrun)"
        if plan.ep > 1 or plan.interleave > 1:
            return "this target writes no expert-parallel or interleaved-pipeline settings for accelerate (use --target megatron)"
        if plan.sp and plan.zero >= 2 and plan.pp == 1:
            return SP_REFUSAL
        if plan.tp_overlap:
            return (
                "accelerate writes no tensor-parallel communication overlap (Megatron-Core's "
                "--tp-comm-overlap, torchtitan's async TP; use --target megatron, nemo or torchtitan)"
            )
        if _nd(plan) or plan.cp > 1:
            return self._nd_refusal(plan)
        if _megatron(plan):
            return self._megatron_refusal(plan)
        return self._fsdp_refusal(plan)

    def _nd_refusal(self, plan: LaunchPlan) -> str | None:
        """Why FSDP2 with a parallelism_config cannot run a tensor- or context-parallel plan."""
        if plan.zero < 2 or plan.pp > 1:
            return (
                "accelerate runs context parallelism under FSDP2 only (parallelism_config, no pipeline), which "
                f"shards parameters over the data- and context-parallel GPUs; the plan has ZeRO {plan.zero} and PP "
                f"{plan.pp} (use --target megatron or torchtitan)"
            )
        if plan.dp == 1 and plan.cp == 1:
            return (
                "accelerate's FSDP2 needs a data- or context-parallel dimension to shard over "
                f"(ParallelismConfig._validate_accelerator), and TP {plan.tp} takes every GPU of the plan"
            )
        if plan.cp > 1 and plan.cp_comm not in CP_STRATEGY:
            return (
                "accelerate's context parallelism passes key/value shards around a ring or all-gathers them "
                f"(cp_comm_strategy alltoall or allgather, i.e. cp_comm p2p or all_gather); the plan's {plan.cp_comm} "
                "all-to-all over heads is not one of them (use --target megatron)"
            )
        return self._fsdp_refusal(plan) or self._tp_refusal(plan)

    def _tp_refusal(self, plan: LaunchPlan) -> str | None:
        """Why transformers cannot shard the plan's model over its TP degree."""
        if plan.tp == 1:
            return None
        model_type = (hf_config(plan.model) or {}).get("model_type")
        if model_type not in TP_PLANS:
            return (
                f"transformers has no tensor-parallel plan for {model_type} models (base_model_tp_plan: "
                f"{', '.join(TP_PLANS)}), so accelerate cannot shard {plan.net} over TP {plan.tp}"
            )
        heads = (plan.model["n_heads"], plan.model.get("n_kv_heads", plan.model["n_heads"]))
        if any(h % plan.tp for h in heads):
            return (
                f"transformers' colwise q/k/v projections split whole heads over the TP group; {plan.net} has "
                f"{heads[0]} query and {heads[1]} key/value heads, TP {plan.tp}"
            )
        return None

    def _fsdp_refusal(self, plan: LaunchPlan) -> str | None:
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
