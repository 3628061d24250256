"""DeepSpeed: a config JSON (ZeRO stage, batch arithmetic, precision) and the line that trains
with DeepSpeed's engine: the reference causal LM (examples/train_lm.py) for a data-parallel
plan, Megatron-DeepSpeed's pretrain_gpt.py (:mod:`planner.launch.megatron_deepspeed`) for a
plan with tensor, pipeline or sequence parallelism, as DeepSpeed users train such models.

DeepSpeed checks ``train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel size`` (deepspeed/runtime/config.py,
``_batch_assertion``), the data-parallel size coming from Megatron's model-parallel unit.
"""

from __future__ import annotations

import json

from planner.launch import megatron_deepspeed as mds
from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, args_text, shell_script, torchrun_prefix
from planner.launch.torchrun import Torchrun, example_files, hf_config, hf_refusal

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
    }
    if not mds.model_parallel(plan):  # Megatron-DeepSpeed builds its own optimizer (--optimizer)
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-4}}
    if plan.precision in ("bf16", "fp16"):
        cfg[plan.precision] = {"enabled": True}
    return cfg


class DeepSpeed(Target):
    name = "deepspeed"
    validator = (
        "DeepSpeed's DeepSpeedConfig (batch arithmetic, ZeRO and precision sections); with model "
        "parallelism, Megatron-DeepSpeed's parse_args and validate_args"
    )
    axes = {"ep": ("1",), "cp": ("1",), "tp_overlap": ("off",), "interleave": ("1",)}

    def refusal(self, plan: LaunchPlan) -> str | None:
        if not plan.transformer:
            return f"this target trains the reference causal LM with DeepSpeed's engine; {plan.net} is a CNN (use --target torchrun)"
        if plan.cp > 1:
            return "this target writes no context parallelism (DeepSpeed-Ulysses is Megatron-DeepSpeed's --ds-sequence-parallel-size, not written here; use --target megatron)"
        if mds.model_parallel(plan):
            return mds.refusal(plan)
        if plan.ep > 1:
            return "this target writes no DeepSpeed expert-parallel settings (EP > 1)"
        if plan.precision == "fp8":
            return "this target writes bf16 or fp16 DeepSpeed configs; FP8 GEMMs need Transformer Engine layers (--target megatron or nemo)"
        if plan.recompute == "selective":
            return "the reference LM script recomputes whole layers (full) or nothing; selective recomputation is Megatron's"
        if hf_config(plan.model) is None:
            return hf_refusal(plan)
        return None

    def _script(self, plan: LaunchPlan) -> str:
        if mds.model_parallel(plan):
            return (
                f'"$MEGATRON_DEEPSPEED"/pretrain_gpt.py $(cat {mds.ARGS_FILE}) --data-path "$DATA_PATH" "$@"'
            )
        args = Torchrun().script_args(plan)
        return " ".join(args + ["--deepspeed-config", CONFIG_FILE])

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        # Megatron-DeepSpeed's validate_args raises with sequence parallelism on CUDA unless
        # CUDA_DEVICE_MAX_CONNECTIONS is 1 (megatron/arguments.py)
        env = "CUDA_DEVICE_MAX_CONNECTIONS=1 " if mds.model_parallel(plan) else ""
        return f"{env}{torchrun_prefix(plan, opts)} {self._script(plan)}"

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        config = {CONFIG_FILE: json.dumps(ds_config(plan), indent=2) + "\n"}
        if mds.model_parallel(plan):
            return {
                **config,
                mds.ARGS_FILE: args_text(mds.arguments(plan, CONFIG_FILE)),
                "deepspeed.sh": self._megatron_script(plan, opts),
            }
        launcher = shell_script(
            [
                "# DeepSpeed's launcher starts every node over ssh from HOSTFILE ('host slots=GPUS' lines)",
                ': "${HOSTFILE:?set HOSTFILE to a DeepSpeed hostfile}" "${MASTER_ADDR:?set MASTER_ADDR to the first host}"',
                'cd "$(dirname "$0")"',
                f'deepspeed --hostfile "$HOSTFILE" --num_nodes {plan.nodes} --num_gpus {plan.gpus_per_node} '
                f'--master_addr "$MASTER_ADDR" --master_port {opts.port} {self._script(plan)}',
            ]
        )
        return {**config, **example_files(plan), "deepspeed.sh": launcher}

    def _megatron_script(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        return shell_script(
            [
                "# one node of the plan; MEGATRON_DEEPSPEED is a checkout of microsoft/Megatron-DeepSpeed,",
                "# DATA_PATH a Megatron indexed dataset (tokenized with the net's vocabulary); further",
                "# pretrain_gpt.py options (--train-iters, --lr, --save) follow on the command line",
                ': "${MEGATRON_DEEPSPEED:?set MEGATRON_DEEPSPEED to a Megatron-DeepSpeed checkout}"',
                ': "${DATA_PATH:?set DATA_PATH to a Megatron indexed dataset prefix}"',
                ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}" "${MASTER_PORT:=' + str(opts.port) + '}"',
                'cd "$(dirname "$0")"',
                self.node_command(plan, opts),
            ]
        )
