"""torchtitan: a config_registry entry with command-line overrides.

torchtitan (0.3) selects a job by ``--module`` and ``--config`` (a function of the model's
config_registry) and overrides its fields with ``--<section>.<field>`` options, parsed by its
ConfigManager (tyro); the TOML job files of earlier releases are gone. Data parallelism is
FSDP2 on a (replicate, shard) mesh: ZeRO 0 replicates (``data_parallel_replicate_degree``),
ZeRO 2 and 3 shard (``data_parallel_shard_degree``) and keep parameters gathered after the
forward pass (``fsdp_reshard_after_forward = never``, ZeRO-2) or free them (``always``, ZeRO-3).
FSDP2 shards parameters, gradients and optimizer state together, so there is no ZeRO-1.
"""

from __future__ import annotations

from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, args_text, shell_script, torchrun_prefix

# planner net -> (torchtitan module, config_registry function) (torchtitan 0.3.0,
# torchtitan/models/llama3/config_registry.py)
CONFIGS = {"llama3-8b": ("llama3", "llama3_8b"), "llama3-70b": ("llama3", "llama3_70b")}
ARGS_FILE = "torchtitan_args.txt"


def overrides(plan: LaunchPlan) -> list[str]:
    """The ConfigManager options of the plan (the activation-checkpoint subcommand last)."""
    shard = plan.zero >= 2
    pipelined = plan.pp > 1
    local = plan.microbatch * (plan.accumulation if pipelined else 1)
    args = [
        "--parallelism.data_parallel_replicate_degree", str(1 if shard else plan.dp),
        "--parallelism.data_parallel_shard_degree", str(plan.dp if shard else 1),
        "--parallelism.tensor_parallel_degree", str(plan.tp),
        "--parallelism.pipeline_parallel_degree", str(plan.pp),
        "--parallelism.context_parallel_degree", "1",
        "--parallelism.expert_parallel_degree", str(plan.ep),
        "--training.local_batch_size", str(local),
        "--training.global_batch_size", str(plan.global_batch),
        "--training.seq_len", str(plan.seq_len),
        "--training.mixed_precision_param", "bfloat16" if plan.precision == "bf16" else "float32",
    ]  # fmt: skip
    if shard:
        args += ["--parallelism.fsdp_reshard_after_forward", "always" if plan.zero == 3 else "never"]
    if plan.tp > 1 and not plan.sp:
        args.append("--parallelism.no-enable-sequence-parallel")
    if pipelined:
        args += ["--parallelism.pipeline_parallel_microbatch_size", str(plan.microbatch)]
        if plan.interleave > 1:
            layers = plan.model["n_layers"] // (plan.pp * plan.interleave)
            args += [
                "--parallelism.pipeline_parallel_schedule", "Interleaved1F1B",
                "--parallelism.pipeline_parallel_layers_per_stage", str(layers),
            ]  # fmt: skip
        else:
            args += ["--parallelism.pipeline_parallel_schedule", "1F1B"]
    if plan.tp_overlap:
        args += ["--compile.enable", "--compile.enable_async_tensor_parallel"]
    args.append("activation_checkpoint:full" if plan.recompute == "full" else "activation_checkpoint:none")
    return args


class Torchtitan(Target):
    name = "torchtitan"
    validator = "torchtitan's ConfigManager (tyro) and ParallelDims"
    axes = {"zero": ("0", "2", "3"), "recompute": ("none", "full")}

    def refusal(self, plan: LaunchPlan) -> str | None:
        if not plan.transformer:
            return f"torchtitan trains transformer models; {plan.net} is a CNN (use --target torchrun)"
        if plan.net not in CONFIGS:
            return f"torchtitan has no config_registry entry for {plan.net} (here: {', '.join(CONFIGS)})"
        if plan.zero == 1:
            return "torchtitan's FSDP2 shards parameters, gradients and optimizer state together: it has ZeRO 0, 2 and 3, no ZeRO-1"
        if plan.recompute == "selective":
            return (
                "torchtitan's selective checkpointing recomputes per operator (every second matmul), not the core "
                "attention that the plan's selective recomputation prices"
            )
        if plan.precision in ("fp16", "fp8"):
            return (
                "torchtitan's training.mixed_precision_param is bfloat16 or float32, and Float8 is set by "
                f"model converters in a config_registry function, not an option (the plan trains in {plan.precision})"
            )
        return None

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        module, config = CONFIGS[plan.net]
        return f"{torchrun_prefix(plan, opts)} -m torchtitan.train --module {module} --config {config} $(cat {ARGS_FILE})"

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        script = shell_script(
            [
                "# one node of the plan (pip install torchtitan; the tokenizer under the config's hf_assets_path)",
                ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}" "${MASTER_PORT:=' + str(opts.port) + '}"',
                'cd "$(dirname "$0")"',
                self.node_command(plan, opts),
            ]
        )
        return {ARGS_FILE: args_text(overrides(plan)), "torchtitan.sh": script}
