"""torchtitan: a job TOML, and the same job as command-line overrides.

torchtitan's releases read a job two ways, each parsed by its ConfigManager (tyro):

* 0.2.x: a TOML job file (``--job.config_file``; sections and fields of its JobConfig,
  torchtitan/config/job_config.py of torchtitan 0.2.2), the model by ``[model] name`` and
  ``flavor``, Float8 training as the ``quantize.linear.float8`` model converter. Its tensor
  parallelism always shards the sequence too (llama3/infra/parallelize.py).
* 0.3: no TOML; ``--module`` and ``--config`` (a function of the model's config_registry) and
  ``--<section>.<field>`` overrides (torchtitan/config/manager.py of torchtitan 0.3.0). Float8
  is set by model converters inside config_registry functions, not by an option.

The target writes the file each release can run the plan from, and torchtitan.sh starts the
installed release with its own. Data parallelism is
FSDP2 on a (replicate, shard) mesh: ZeRO 0 replicates (``data_parallel_replicate_degree``),
ZeRO 2 and 3 shard (``data_parallel_shard_degree``) and keep parameters gathered after the
forward pass (``fsdp_reshard_after_forward = never``, ZeRO-2) or free them (``always``, ZeRO-3).
FSDP2 shards parameters, gradients and optimizer state together, so there is no ZeRO-1.

Neither release takes the attention kernel as an option. 0.3's config_registry functions build
the model with model_registry's default ``attn_backend = "flex"`` (FlexAttention;
torchtitan/models/llama3/__init__.py of torchtitan 0.3.0) inside a ``model_spec`` the command line
cannot set (``Trainer.Config.model_spec`` is ``tyro.conf.Suppress``, torchtitan/trainer.py); the
0.2.x flavors 8B and 70B have ``attn_type = "sdpa"`` (torchtitan/models/llama3/__init__.py and
model/args.py of torchtitan 0.2.2): PyTorch's scaled_dot_product_attention trying cuDNN, then flash
attention, before the math kernel (torchtitan/models/attention.py, same release). Both are fused
kernels that keep no s^2 scores, so the files run the default and say which kernel that is, and,
for a plan costed with standard attention, that torchtitan runs a fused one instead.
"""

from __future__ import annotations

from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, args_text, shell_script, torchrun_prefix

# planner net -> (torchtitan module, config_registry function) (torchtitan 0.3.0,
# torchtitan/models/llama3/config_registry.py)
CONFIGS = {"llama3-8b": ("llama3", "llama3_8b"), "llama3-70b": ("llama3", "llama3_70b")}
# planner net -> (model name, flavor) of torchtitan 0.2.2 (torchtitan/models/llama3/__init__.py)
FLAVORS = {"llama3-8b": ("llama3", "8B"), "llama3-70b": ("llama3", "70B")}
ARGS_FILE = "torchtitan_args.txt"
TOML_FILE = "torchtitan_job.toml"


def _parallelism(plan: LaunchPlan) -> dict[str, object]:
    """The [parallelism] fields both releases name alike."""
    shard = plan.zero >= 2
    out: dict[str, object] = {
        "data_parallel_replicate_degree": 1 if shard else plan.dp,
        "data_parallel_shard_degree": plan.dp if shard else 1,
        "tensor_parallel_degree": plan.tp,
        "pipeline_parallel_degree": plan.pp,
        "context_parallel_degree": plan.cp,
        "expert_parallel_degree": plan.ep,
    }
    if shard:
        out["fsdp_reshard_after_forward"] = "always" if plan.zero == 3 else "never"
    if plan.pp > 1:
        out["pipeline_parallel_microbatch_size"] = plan.microbatch
        out["pipeline_parallel_schedule"] = _schedule(plan)
        stages = 2 if plan.pp_schedule == "dualpipev" else plan.interleave  # DualPipeV: a V of 2 per GPU
        if stages > 1:
            out["pipeline_parallel_layers_per_stage"] = plan.model["n_layers"] // (plan.pp * stages)
    return out


def _schedule(plan: LaunchPlan) -> str:
    """torch.distributed.pipelining's schedule name for the plan's (torch 2.14 get_schedule_class)."""
    if plan.pp_schedule == "zb1p":
        return "InterleavedZeroBubble"
    if plan.pp_schedule == "dualpipev":
        return "DualPipeV"
    return "Interleaved1F1B" if plan.interleave > 1 else "1F1B"


def _training(plan: LaunchPlan) -> dict[str, object]:
    """The [training] batch fields: torchtitan's local batch is a pipeline's whole step (its
    microbatches split it), else one microbatch (accumulation = global / (local x dp))."""
    local = plan.microbatch * (plan.accumulation if plan.pp > 1 else 1)
    param = "bfloat16" if plan.precision in ("bf16", "fp8") else "float32"
    return {
        "local_batch_size": local,
        "global_batch_size": plan.global_batch,
        "seq_len": plan.seq_len,
        "mixed_precision_param": param,
    }


def attention_note(plan: LaunchPlan) -> str:
    """A comment line saying which attention kernel torchtitan runs for the plan (see the module
    docstring: no release takes one as an option)."""
    ran = "torchtitan runs a fused kernel (0.3: FlexAttention; 0.2.x: SDPA's cuDNN or flash attention)"
    if plan.attention == "flash":
        return f"# attention: {ran}, as the plan's flash kernel"
    return (
        f"# attention: {ran}, not the plan's standard kernel (it has no option for one): "
        "no s^2 scores kept, so less memory and a shorter step than planned"
    )


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)


def job_toml(plan: LaunchPlan) -> str:
    """The plan as a torchtitan 0.2.x job TOML (None-free sections of its JobConfig)."""
    name, flavor = FLAVORS[plan.net]
    fp8 = plan.precision == "fp8"
    sections: dict[str, dict[str, object]] = {
        "job": {
            "description": f"{plan.net} on {plan.gpus} x {plan.device} ({plan.source or 'planner plan'})"
        },
        "model": {"name": name, "flavor": flavor, "converters": ["quantize.linear.float8"] if fp8 else []},
        "training": _training(plan),
        "parallelism": {**_parallelism(plan), "enable_async_tensor_parallel": plan.tp_overlap},
        "activation_checkpoint": {"mode": plan.recompute},
        "compile": {"enable": plan.tp_overlap or fp8},  # async TP needs torch.compile; Float8 is fast with it
    }
    if fp8:  # tensorwise scaling, its all-gathers in Float8 when FSDP shards the parameters
        sharded = plan.zero >= 2
        sections["quantize.linear.float8"] = {
            "recipe_name": "tensorwise",
            "enable_fsdp_float8_all_gather": sharded,
            "precompute_float8_dynamic_scale_for_fsdp": sharded,
        }
    lines = ["# torchtitan 0.2.x job: torchrun ... -m torchtitan.train --job.config_file " + TOML_FILE]
    lines.append(attention_note(plan))
    for section, fields in sections.items():
        lines += ["", f"[{section}]"] + [f"{k} = {_toml_value(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


def toml_refusal(plan: LaunchPlan) -> str | None:
    """Why torchtitan 0.2.x cannot run the plan from a job TOML, or None."""
    if plan.tp > 1 and not plan.sp:
        return "torchtitan 0.2's tensor parallelism always shards the sequence (the plan has it off)"
    return None


def args_refusal(plan: LaunchPlan) -> str | None:
    """Why torchtitan 0.3 cannot run the plan from command-line overrides, or None."""
    if plan.precision == "fp8":
        return "torchtitan 0.3 sets Float8 in config_registry functions, not by an option"
    return None


def overrides(plan: LaunchPlan) -> list[str]:
    """The torchtitan 0.3 ConfigManager options of the plan (the activation-checkpoint
    subcommand last)."""
    args: list[str] = []
    for section, fields in (("parallelism", _parallelism(plan)), ("training", _training(plan))):
        for key, value in fields.items():
            args += [f"--{section}.{key}"] if value is True else [f"--{section}.{key}", str(value)]
    if plan.tp > 1 and not plan.sp:
        args.append("--parallelism.no-enable-sequence-parallel")
    if plan.pp > 1:  # 0.3 captures CUDA graphs by default and refuses them with a pipeline
        args.append("--training.disable_cuda_graphs")  # (torchtitan/trainer.py, _validate_cuda_graphs)
    if plan.tp_overlap:  # 0.3 moved async TP under [compile]
        args += ["--compile.enable", "--compile.enable_async_tensor_parallel"]
    args.append("activation_checkpoint:full" if plan.recompute == "full" else "activation_checkpoint:none")
    return args


class Torchtitan(Target):
    name = "torchtitan"
    validator = (
        "torchtitan's ConfigManager (tyro) of 0.2.2 (the TOML) and 0.3.0 (the options), and ParallelDims"
    )
    # pp_schedule: torch.distributed.pipelining's InterleavedZeroBubble (ZB1P) and DualPipeV, by
    # name in pipeline_parallel_schedule (torch/distributed/pipelining/schedules.py, get_schedule_class)
    axes = {
        "zero": ("0", "2", "3"),
        "recompute": ("none", "full"),
        "pp_schedule": ("1f1b", "zb1p", "dualpipev"),
    }

    def refusal(self, plan: LaunchPlan) -> str | None:
        if not plan.transformer:
            return f"torchtitan trains transformer models; {plan.net} is a CNN (use --target torchrun)"
        if plan.net not in CONFIGS:
            return f"torchtitan has no config_registry entry for {plan.net} (here: {', '.join(CONFIGS)})"
        if plan.cp > 1 and plan.cp_comm == "a2a":
            return "torchtitan's context parallelism is ring attention (p2p or all_gather); the plan uses a2a (DeepSpeed-Ulysses; --target megatron runs it)"
        if plan.ep_overlap:
            return "this target writes no expert all-to-all overlap setting for torchtitan (use --target megatron)"
        if plan.zero == 1:
            return "torchtitan's FSDP2 shards parameters, gradients and optimizer state together: it has ZeRO 0, 2 and 3, no ZeRO-1"
        if plan.recompute == "selective":
            return (
                "torchtitan's selective checkpointing recomputes per operator (every second matmul), not the core "
                "attention that the plan's selective recomputation prices"
            )
        if plan.precision == "fp16":
            return (
                "torchtitan's training.mixed_precision_param is bfloat16 or float32 (the plan trains in fp16)"
            )
        toml, args = toml_refusal(plan), args_refusal(plan)
        if toml and args:
            return f"{toml}, and {args}"
        return None

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        """torchrun starting the installed release with the file it reads (0.2.x has the
        torchtitan.config.job_config module, 0.3 does not)."""
        module, config = CONFIGS[plan.net]
        run = f"{torchrun_prefix(plan, opts)} -m torchtitan.train"
        toml = f"{run} --job.config_file {TOML_FILE}"
        args = f"{run} --module {module} --config {config} $(cat {ARGS_FILE})"
        if toml_refusal(plan):
            toml = f"echo 'torchtitan 0.2 cannot run this plan: {toml_refusal(plan)}' >&2; exit 2"
        if args_refusal(plan):
            args = f"echo 'torchtitan 0.3 cannot run this plan: {args_refusal(plan)}' >&2; exit 2"
        return f"if python -c 'import torchtitan.config.job_config' 2>/dev/null; then {toml}; else {args}; fi"

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        script = shell_script(
            [
                "# one node of the plan (pip install torchtitan; the tokenizer under the job's hf_assets_path)",
                attention_note(plan),
                ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}" "${MASTER_PORT:=' + str(opts.port) + '}"',
                'cd "$(dirname "$0")"',
                self.node_command(plan, opts),
            ]
        )
        out = {"torchtitan.sh": script}
        if not toml_refusal(plan):
            out[TOML_FILE] = job_toml(plan)
        if not args_refusal(plan):
            out[ARGS_FILE] = args_text(overrides(plan))
        return out
