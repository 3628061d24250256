"""Megatron-LM (Megatron-Core): pretrain_gpt.py arguments for the plan.

Flag names are Megatron-LM's (megatron/training/arguments.py, which builds most of them from
Megatron-Core's TransformerConfig fields); the refusals are the assertions of its
``validate_args`` (NVIDIA/Megatron-LM, commit d98e8a64ddf34856e74b24714e3bedb2f5a39553,
2026-08-22: the --use-torch-fsdp2 block and the --tp-comm-overlap check; for the expert all-to-all
overlap, --overlap-moe-expert-parallel-comm with the flex dispatcher on DeepEP, the checks of
megatron/core/transformer/transformer_config.py and the field of model_parallel_config.py, same
commit). ZeRO stages map onto Megatron's data-parallel options:
1 = the distributed optimizer (optimizer state sharded), 2 = Megatron-FSDP sharding optimizer
state and gradients (``--data-parallel-sharding-strategy optim_grads``), 3 = PyTorch FSDP2
(``--use-torch-fsdp2``, parameters sharded too). A plan in rank order ``tp-cp-ep-pp-dp`` gets
``--use-tp-pp-dp-mapping`` (megatron/training/initialize.py, same commit). The plan's attention
kernel is ``--attention-backend``, an argument Megatron-LM builds from TransformerConfig's
``attention_backend`` field (an ``AttnBackend``: flash, fused, unfused, local, auto; default auto,
Transformer Engine's choice; megatron/core/transformer/transformer_config.py and
megatron/training/argument_utils.py, same commit): ``flash`` for a flash plan, ``unfused`` (the
softmax scores materialised, as the plan's standard attention keeps them) for a standard one.
"""

from __future__ import annotations

from costs.comm.ranks import ORDERS, PP_INSIDE_DP
from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target, args_text, shell_script, torchrun_prefix

ARGS_FILE = "megatron_args.txt"
ATTENTION_BACKEND = {"flash": "flash", "standard": "unfused"}  # plan kernel -> AttnBackend name


def model_args(plan: LaunchPlan) -> list[str]:
    """The model's shape as Megatron-LM arguments (GPT-style decoder, synthetic data)."""
    m = plan.model
    kv = m.get("n_kv_heads") or m["n_heads"]
    rope = m.get("positional") == "rope"
    args = [
        "--num-layers", str(m["n_layers"]),
        "--hidden-size", str(m["d_model"]),
        "--ffn-hidden-size", str((m.get("moe") or {}).get("d_ff_expert", m["d_ff"])),
        "--num-attention-heads", str(m["n_heads"]),
        "--seq-length", str(plan.seq_len),
        "--max-position-embeddings", str(max(plan.seq_len, m["seq_len"])),
        "--position-embedding-type", "rope" if rope else "learned_absolute",
        "--normalization", "RMSNorm" if m.get("norm") == "rmsnorm" else "LayerNorm",
        "--tokenizer-type", "NullTokenizer",
        "--vocab-size", str(m["vocab"]),
        "--mock-data",
        "--attention-backend", ATTENTION_BACKEND[plan.attention],
    ]  # fmt: skip
    if kv < m["n_heads"]:
        args += ["--group-query-attention", "--num-query-groups", str(kv)]
    if m.get("activation") == "swiglu":
        args.append("--swiglu")
    if not m.get("bias", True):
        args.append("--disable-bias-linear")
    if not m.get("tied", False):
        args.append("--untie-embeddings-and-output-weights")
    if m.get("moe"):
        args += ["--num-experts", str(m["moe"]["n_experts"]), "--moe-router-topk", str(m["moe"]["top_k"])]
    return args


def parallel_args(plan: LaunchPlan) -> list[str]:
    """Degrees, batch, recomputation, data-parallel sharding, overlap and precision."""
    args = [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        "--micro-batch-size", str(plan.microbatch),
        "--global-batch-size", str(plan.global_batch),
    ]  # fmt: skip
    if plan.interleave > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(plan.interleave)]
    if plan.sp:
        args.append("--sequence-parallel")
    if plan.ep > 1:
        args += ["--expert-model-parallel-size", str(plan.ep)]
    if plan.cp > 1:
        args += ["--context-parallel-size", str(plan.cp), "--cp-comm-type", plan.cp_comm]
    if plan.rank_order == PP_INSIDE_DP:  # initialize.py: order tp-cp-ep-pp-dp instead of tp-cp-ep-dp-pp
        args.append("--use-tp-pp-dp-mapping")
    if plan.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    elif plan.recompute == "full":
        args += [
            "--recompute-granularity",
            "full",
            "--recompute-method",
            "uniform",
            "--recompute-num-layers",
            "1",
        ]
    args += {
        0: ["--overlap-grad-reduce"],
        1: ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"],
        2: [
            "--use-megatron-fsdp",
            "--data-parallel-sharding-strategy",
            "optim_grads",
            "--ckpt-format",  # arguments.py: 'Megatron-FSDP requires the `fsdp_dtensor` checkpointing format.'
            "fsdp_dtensor",
            "--overlap-grad-reduce",
        ],
        3: ["--use-torch-fsdp2", "--no-gradient-accumulation-fusion"],
    }[plan.zero]
    if plan.tp_overlap:
        args.append("--tp-comm-overlap")
    if plan.ep_overlap:  # the all-to-alls beside another microbatch's compute, DeepEP kernels
        args += [
            "--overlap-moe-expert-parallel-comm",
            "--moe-token-dispatcher-type",
            "flex",
            "--moe-flex-dispatcher-backend",
            "deepep",
        ]
    args += {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format", "hybrid"]}.get(
        plan.precision, []
    )
    return args


def megatron_refusal(plan: LaunchPlan, name: str) -> str | None:
    """Why Megatron-LM (or a stack on it) cannot run the plan, or None."""
    if not plan.transformer:
        return f"{name} trains transformer models; {plan.net} is a CNN (use --target torchrun)"
    if not plan.model.get("causal", True):
        return f"this target writes GPT (decoder) pre-training arguments; {plan.net} is an encoder"
    if plan.zero == 3:  # Megatron-LM arguments.py validate_args, the --use-torch-fsdp2 block
        if plan.pp > 1:
            return "ZeRO-3 is FSDP2 in Megatron-LM, and '--use-torch-fsdp2 is not supported with pipeline parallelism' (arguments.py)"
        if plan.ep > 1:
            return "ZeRO-3 is FSDP2 in Megatron-LM, and '--use-torch-fsdp2 is not supported with expert parallelism' (arguments.py)"
        if plan.model.get("tied", False):
            return "ZeRO-3 is FSDP2 in Megatron-LM, and '--use-torch-fsdp2 requires --untie-embeddings-and-output-weights' (arguments.py); this net ties them"
    if plan.tp_overlap and not plan.sp:
        return "'Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled' (arguments.py); the plan has it off"
    # parallel_state.py: expert data parallelism is GPUs / (tp ep pp), the layers' GPUs / (tp cp pp)
    if plan.rank_order == PP_INSIDE_DP and plan.pp > 1 and plan.ep != plan.cp:
        return "'When not using pp-last rank ordering, the data parallel size of the attention and moe layers must be the same' (parallel_state.py); the plan's EP differs from its CP"
    return _ep_overlap_refusal(plan)


def _ep_overlap_refusal(plan: LaunchPlan) -> str | None:
    """Megatron-Core's TransformerConfig.__post_init__ checks of overlap_moe_expert_parallel_comm."""
    if not plan.ep_overlap:
        return None
    if plan.pp > 1 and plan.interleave == 1:
        return "'If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1' (transformer_config.py); the plan has interleave 1"
    if plan.recompute == "full":
        return "'disable full recomputation when enabling overlap_moe_expert_parallel_comm' (transformer_config.py)"
    return None


class Megatron(Target):
    name = "megatron"
    rank_orders = ORDERS  # --use-tp-pp-dp-mapping selects the second
    validator = "Megatron-Core's TransformerConfig, DistributedDataParallelConfig and microbatch calculator"

    def refusal(self, plan: LaunchPlan) -> str | None:
        return megatron_refusal(plan, "Megatron-LM")

    def arguments(self, plan: LaunchPlan) -> list[str]:
        return model_args(plan) + parallel_args(plan)

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        # arguments.py (validate_args) asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP on GPUs
        # before Blackwell, and Megatron-FSDP asserts it is not 1 (with FSDP, TP only warns)
        env = "CUDA_DEVICE_MAX_CONNECTIONS=1 " if plan.tp > 1 and plan.zero < 2 else ""
        return f'{env}{torchrun_prefix(plan, opts)} "$MEGATRON_LM"/pretrain_gpt.py $(cat {ARGS_FILE})'

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        script = shell_script(
            [
                "# one node of the plan; MEGATRON_LM is a checkout of NVIDIA/Megatron-LM",
                ': "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout}"',
                ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}" "${MASTER_PORT:=' + str(opts.port) + '}"',
                'cd "$(dirname "$0")"',
                self.node_command(plan, opts),
            ]
        )
        return {ARGS_FILE: args_text(self.arguments(plan)), "megatron.sh": script}
