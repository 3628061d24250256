"""NeMo 2 / Megatron-Bridge: a library recipe with ``KEY=VALUE`` overrides of its ConfigContainer.

Megatron-Bridge's training launcher (``scripts/training/train.sh``) loads a recipe by name and
applies trailing ``KEY=VALUE`` overrides to its ConfigContainer, whose ``model`` is a
Megatron-Core TransformerConfig, ``ddp`` Megatron-Core's DistributedDataParallelConfig and
``train`` holds the batch sizes (NVIDIA-NeMo/Megatron-Bridge, scripts/training/README.md and
src/megatron/bridge/training/config.py, commit 067f987df03b8355b03192d88d70f1709fedf51a,
2026-08-22). ZeRO 1 is the distributed optimizer, 2 and 3 Megatron-FSDP's ``optim_grads`` and
``optim_grads_params`` sharding. The plan's attention kernel is ``model.attention_backend``, the
TransformerConfig field a recipe override sets by its ``AttnBackend`` member's name
(docs/training/attention-optimizations.md, commit 8bb68862e96631b47d01b45c521674430c691333, names
``model.attention_backend=fused``; megatron/core/transformer/enums.py of megatron-core 0.16.1:
flash, fused, unfused, local, auto): ``flash`` for a flash plan, ``unfused`` for a standard one, as
the megatron target's ``--attention-backend``.
"""

from __future__ import annotations

from planner.launch.megatron import ATTENTION_BACKEND, megatron_refusal
from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, shell_script

# planner net -> Megatron-Bridge library recipe (src/megatron/bridge/recipes/, same commit)
RECIPES = {
    "llama3-8b": "llama3_8b_pretrain_config",
    "llama3-70b": "llama3_70b_pretrain_config",
    "gpt3-175b": "gpt3_175b_pretrain_config",
}
# registered mixed-precision recipes (src/megatron/bridge/training/mixed_precision.py, same commit)
MIXED_PRECISION = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_current_scaling_mixed"}
OVERRIDES_FILE = "nemo_overrides.txt"


def _value(v) -> str:
    """A Hydra-style override value."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def overrides(plan: LaunchPlan) -> dict[str, object]:
    """ConfigContainer field -> value for the plan."""
    recompute = {
        "none": (None, None, None),
        "selective": ("selective", None, None),
        "full": ("full", "uniform", 1),
    }
    granularity, method, layers = recompute[plan.recompute]
    out: dict[str, object] = {
        "model.tensor_model_parallel_size": plan.tp,
        "model.pipeline_model_parallel_size": plan.pp,
        "model.virtual_pipeline_model_parallel_size": plan.interleave if plan.interleave > 1 else None,
        "model.sequence_parallel": plan.sp,
        "model.context_parallel_size": plan.cp,
        "model.cp_comm_type": plan.cp_comm if plan.cp > 1 else None,
        "model.expert_model_parallel_size": plan.ep,
        "model.recompute_granularity": granularity,
        "model.recompute_method": method,
        "model.recompute_num_layers": layers,
        "model.tp_comm_overlap": plan.tp_overlap,
        "model.attention_backend": ATTENTION_BACKEND[plan.attention],
        "train.micro_batch_size": plan.microbatch,
        "train.global_batch_size": plan.global_batch,
        "ddp.use_distributed_optimizer": plan.zero >= 1,
        "ddp.use_megatron_fsdp": plan.zero >= 2,
        "ddp.data_parallel_sharding_strategy": {2: "optim_grads", 3: "optim_grads_params"}.get(
            plan.zero, "no_shard"
        ),
        "ddp.overlap_grad_reduce": True,
        "ddp.overlap_param_gather": plan.zero >= 1,
        "dataset.seq_length": plan.seq_len,  # run_recipe.py copies it to model.seq_length
    }
    if plan.precision in MIXED_PRECISION:
        out["mixed_precision"] = MIXED_PRECISION[plan.precision]
    return out


class Nemo(Target):
    name = "nemo"
    validator = "Megatron-Core's TransformerConfig, DistributedDataParallelConfig and microbatch calculator (the ConfigContainer's own classes)"

    def refusal(self, plan: LaunchPlan) -> str | None:
        why = megatron_refusal(plan, "Megatron-Bridge")
        if why and "FSDP2" not in why:  # Megatron-Bridge shards ZeRO-3 with Megatron-FSDP, not FSDP2
            return why
        if plan.ep_overlap:
            return "this target writes no expert all-to-all overlap setting for Megatron-Bridge (use --target megatron)"
        if plan.net not in RECIPES:
            return (
                f"Megatron-Bridge has no library recipe for {plan.net} (recipes here: {', '.join(RECIPES)})"
            )
        if plan.precision in ("fp32", "tf32"):
            return "Megatron-Bridge's mixed-precision recipes are bf16, fp16 or FP8 (the plan trains in fp32)"
        return None

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        return (
            f'python "$MEGATRON_BRIDGE"/scripts/training/run_recipe.py --recipe {RECIPES[plan.net]} '
            f"--dataset mock $(cat {OVERRIDES_FILE})"
        )

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        lines = "".join(f"{k}={_value(v)}\n" for k, v in overrides(plan).items())
        script = shell_script(
            [
                "# submit through Megatron-Bridge's Slurm launcher (it runs run_recipe.py on every node)",
                ': "${MEGATRON_BRIDGE:?set MEGATRON_BRIDGE to a Megatron-Bridge checkout}"',
                'cd "$(dirname "$0")"',
                f'"$MEGATRON_BRIDGE"/scripts/training/train.sh --nodes {plan.nodes} '
                f'--gpus-per-node {plan.gpus_per_node} --recipe {RECIPES[plan.net]} --mode pretrain --dataset mock "$@" '
                f"$(cat {OVERRIDES_FILE})",
            ]
        )
        return {OVERRIDES_FILE: lines, "nemo.sh": script}
