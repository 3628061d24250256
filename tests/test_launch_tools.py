"""Each launch target's files, checked by the tool's own code from its pip package.

The plans are the issue's: the best plan of `planner optimize llama3-70b --budget 512gpus --gpu
H100_SXM --network ib_ndr` (TP 8 with sequence parallelism and its communication overlapped,
ZeRO 2, no recomputation: megatron, nemo and torchtitan run it; deepspeed refuses its TP overlap
and is checked on the best plan of the search kept to it; accelerate refuses its sequence
parallelism in one line and is checked on the best plan of the same search kept to what it runs,
on the plan without sequence parallelism or TP overlap (FSDP2 with a parallelism_config) and on
its Megatron-LM plugin variant),
and the best plan of resnet50 on 64 H100 (torchrun, slurm, skypilot). A tool that is not
installed skips its test with the command that installs it (`pip install '.[launch]'`, which CI
runs); the checks that need a source checkout (Megatron-LM, Megatron-DeepSpeed: neither is on
PyPI) or a second torchtitan release skip unless an environment variable names it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from planner.cli import main
from planner.launch.plan import LaunchPlan, load_plan
from planner.launch.registry import TARGETS, emit, parse_targets
from planner.launch.target import LaunchOptions

INSTALL = "pip install '.[launch]'"
sys.path.insert(0, str(Path(__file__).parent))
from test_launch import PLANS as CONTRACT_PLANS  # noqa: E402

LLM_TARGETS = ("megatron", "nemo", "torchtitan", "deepspeed", "accelerate")
# targets that refuse the issue's llama3-70b plan, and why (test_launch.py pins the reasons)
REFUSE_LLAMA = {
    "accelerate": "tensor-parallel plans keep norms and activations replicated over the TP group",
    "deepspeed": "Megatron-DeepSpeed has no tensor-parallel communication overlap",
}
# the search kept to each refusing target's plans
KEPT = {"accelerate": "llama-dp", "deepspeed": "llama-ds"}


def need(module: str):
    return pytest.importorskip(module, reason=f"{module} is not installed: {INSTALL}")


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, LaunchPlan]:
    """The issue's plans, from seeded searches (see the module docstring)."""
    root = tmp_path_factory.mktemp("runs")
    llama = [
        "llama3-70b",
        "--budget",
        "512gpus",
        "--gpu",
        "H100_SXM",
        "--network",
        "ib_ndr",
        "--format",
        "json",
    ]
    runs = {
        "llama": llama,
        # the same search kept to plans accelerate runs without Megatron-LM (data parallel)
        "llama-dp": [*llama, "--target", "accelerate"],
        # kept to the plans Megatron-DeepSpeed runs (no TP communication overlap)
        "llama-ds": [*llama, "--target", "deepspeed"],
        # a long sequence, where the search kept to accelerate's plans picks context parallelism
        "llama-cp": ["llama3-8b", "--budget", "64gpus", "--gpu", "H100_SXM", "--network", "ib_ndr"]
        + ["--seq-len", "131072", "--target", "accelerate", "--format", "json"],
        "resnet": [
            "resnet50",
            "--budget",
            "64gpus",
            "--gpu",
            "H100_SXM",
            "--network",
            "ib_ndr",
            "--format",
            "json",
        ],
    }
    for name, args in runs.items():
        assert main(["optimize", *args, "--out", str(root / name)]) == 0
    return {name: load_plan(root / name) for name in runs}


def files_for(plan: LaunchPlan, targets: str, out: Path, **opts) -> Path:
    for name, text in emit(plan, parse_targets(targets), LaunchOptions(**opts)).items():
        (out / name).write_text(text)
    return out


def tokens(path: Path) -> dict[str, object]:
    """A file of command-line options as flag -> value (True for a flag without one)."""
    out: dict[str, object] = {}
    words = shlex.split(path.read_text())
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out[w] = True if nxt is None or nxt.startswith("--") or ":" in nxt else nxt
    return out


def test_the_llama_plan_is_the_one_the_issue_names(plans):
    """The numbers below are whatever the seeded search picks; the targets must carry them."""
    p = plans["llama"]
    assert (p.net, p.device, p.gpus, p.network) == ("llama3-70b", "H100_SXM", 512, "ib_ndr")
    assert p.tp * p.pp * p.dp == 512 and p.global_batch == p.microbatch * p.accumulation * p.dp


@pytest.mark.parametrize("name", LLM_TARGETS)
def test_every_llm_target_runs_or_refuses_the_llama_plan(plans, name):
    """Each LLM target writes the best llama3-70b plan's files, or refuses it in one line (the
    CLI's exit 2 is in test_launch.py); a refusing target runs the plan of the search kept to
    what it runs."""
    p = plans["llama"]
    assert (p.tp, p.sp, p.pp, p.zero, p.recompute, p.tp_overlap) == (
        8,
        True,
        1,
        2,
        "none",
        True,
    )  # what the search picks
    why = TARGETS[name].refusal(p)
    assert (why is None) == (name not in REFUSE_LLAMA), why
    if why is None:
        assert emit(p, [TARGETS[name]], LaunchOptions())
    else:
        assert "\n" not in why and REFUSE_LLAMA[name] in why
        assert TARGETS[name].refusal(plans[KEPT[name]]) is None


# --- DeepSpeed ---------------------------------------------------------------------------


class _DataParallel:
    """DeepSpeed's model-parallel unit protocol (``mpu``): how it learns the data-parallel size."""

    def __init__(self, dp: int):
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


@pytest.fixture
def deepspeed_comm(monkeypatch):
    """DeepSpeedConfig asks deepspeed.comm for this process's rank before it asks the ``mpu``
    for the data-parallel size; without a process group it falls back to a world of one. The
    rank query alone is answered here (rank 0), so the config's own batch logic runs at the
    plan's data-parallel size without building DeepSpeed's communication ops."""
    need("deepspeed")
    import deepspeed.comm

    monkeypatch.setattr(deepspeed.comm, "get_rank", lambda *a, **k: 0)


@pytest.mark.parametrize("which", ["llama-ds", "llama-dp"])
def test_deepspeed_config_passes_deepspeeds_batch_arithmetic(plans, tmp_path, deepspeed_comm, which):
    """The DeepSpeed config at the plan's data-parallel size (Megatron-DeepSpeed's model-parallel
    unit tells DeepSpeed the same): batch arithmetic, ZeRO stage, precision."""
    from deepspeed.runtime.config import DeepSpeedConfig

    plan = plans[which]
    path = files_for(plan, "deepspeed", tmp_path) / "ds_config.json"
    cfg = DeepSpeedConfig(str(path), mpu=_DataParallel(plan.dp))
    assert cfg.train_batch_size == plan.global_batch
    assert cfg.train_micro_batch_size_per_gpu == plan.microbatch
    assert cfg.gradient_accumulation_steps == plan.accumulation
    assert cfg.zero_optimization_stage == plan.zero
    assert cfg.bfloat16_config.enabled == (plan.precision == "bf16")
    # the same check refuses a global batch that the data-parallel size does not produce
    bad = json.loads(path.read_text())
    bad["train_batch_size"] += plan.microbatch
    with pytest.raises(AssertionError, match="Check batch related parameters"):
        DeepSpeedConfig(bad, mpu=_DataParallel(plan.dp))


def test_megatron_deepspeed_arguments_carry_the_plan(plans, tmp_path):
    """The Megatron-DeepSpeed arguments of the llama plan: DeepSpeed's own flags parse with
    DeepSpeed's parser (deepspeed.add_config_arguments, which Megatron-DeepSpeed's parse_args
    calls), and Megatron's carry the plan's degrees and batch."""
    need("deepspeed")
    import argparse

    import deepspeed

    plan = plans["llama-ds"]
    flags = tokens(files_for(plan, "deepspeed", tmp_path) / "megatron_deepspeed_args.txt")
    parsed, _ = deepspeed.add_config_arguments(argparse.ArgumentParser()).parse_known_args(
        ["--deepspeed", "--deepspeed_config", str(flags["--deepspeed_config"])]
    )
    assert parsed.deepspeed and parsed.deepspeed_config == "ds_config.json"
    assert flags["--tensor-model-parallel-size"] == str(plan.tp) and flags["--sequence-parallel"] is True
    assert (flags["--micro-batch-size"], flags["--global-batch-size"]) == (
        str(plan.microbatch),
        str(plan.global_batch),
    )
    assert flags["--zero-stage"] == str(plan.zero) and flags["--no-pipeline-parallel"] is True


MEGATRON_DEEPSPEED_CHECK = textwrap.dedent(
    """
    import shlex, sys
    import megatron.arguments as arguments
    sys.argv = ["pretrain_gpt.py", *shlex.split(open(sys.argv[1]).read())]
    args = arguments.parse_args()
    arguments.validate_args(args)
    print(args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.data_parallel_size,
          args.micro_batch_size, args.global_batch_size, args.zero_stage, args.sequence_parallel)
    """
)


@pytest.mark.parametrize("which", ["llama-ds", "llama8-tp2-zero1", "llama70-pp4-zero1-full"])
def test_deepspeed_arguments_pass_megatron_deepspeed_validate_args(plans, tmp_path, which):
    """With a Megatron-DeepSpeed checkout (MEGATRON_DEEPSPEED, as the emitted script reads it),
    its own parse_args and validate_args accept the arguments at the plan's world size."""
    need("deepspeed")
    checkout = os.environ.get("MEGATRON_DEEPSPEED")
    if not checkout or not Path(checkout, "megatron", "arguments.py").is_file():
        pytest.skip("set MEGATRON_DEEPSPEED to a microsoft/Megatron-DeepSpeed checkout (it is not on PyPI)")
    plan = plans.get(which) or CONTRACT_PLANS[which]
    if which == "llama70-pp4-zero1-full":  # DeepSpeed's pipeline engine has no virtual stages
        plan = dataclasses.replace(plan, interleave=1)
    out = files_for(plan, "deepspeed", tmp_path)
    env = {**os.environ, "PYTHONPATH": checkout, "WORLD_SIZE": str(plan.gpus), "RANK": "0"}
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"  # as deepspeed.sh runs it
    done = subprocess.run(
        [sys.executable, "-c", MEGATRON_DEEPSPEED_CHECK, str(out / "megatron_deepspeed_args.txt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=out,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    want = f"{plan.tp} {plan.pp} {plan.dp} {plan.microbatch} {plan.global_batch} {plan.zero} {plan.sp}"
    assert done.stdout.strip().splitlines()[-1] == want


# --- SkyPilot ----------------------------------------------------------------------------


@pytest.mark.parametrize("which, engine", [("resnet", "torchrun"), ("llama", "megatron")])
def test_skypilot_task_loads_with_skypilots_loader(plans, tmp_path, which, engine):
    need("sky")
    import sky

    plan = plans[which]
    out = files_for(plan, f"{engine},skypilot", tmp_path, provider="aws", pricing="spot")
    task = sky.Task.from_yaml(str(out / "sky_task.yaml"))
    assert task.num_nodes == plan.nodes
    (res,) = task.resources
    assert res.accelerators == {"H100": plan.gpus_per_node}
    assert res.use_spot and str(res.cloud).lower() == "aws"
    assert f"--nproc-per-node {plan.gpus_per_node}" in task.run
    assert task.envs["NCCL_IB_DISABLE"] == "0"  # ib_ndr: InfiniBand verbs


# SkyPilot's accelerator names (skypilot-org/skypilot-catalog, catalogs/v8/common/accelerators.csv,
# commit 001ca549aad50db24c5670b5438bea0573a2b6c0): SkyPilot downloads this catalog at run time,
# so the names it validates against are copied here as reference data.
SKYPILOT_ACCELERATORS = (
    "A10 A100 A100-80GB A100-80GB-SXM A10G A30 A40 A4000 A6000 A800 B200 GH200 H100 H100-MEGA H100-NVL "
    "H100-NVLINK H100-SXM H200 H200-SXM K80 L4 L40 L40S M60 MI300X P100 P4 RTX3090 RTX4090 T4 T4g V100 V100-32GB"
).split()


def test_skypilot_names_are_skypilots():
    """Every accelerator name the target writes is in SkyPilot's catalog, and every cloud in
    SkyPilot's own cloud registry."""
    need("sky")
    from sky.utils import registry

    from planner.launch.skypilot import ACCELERATORS, CLOUDS

    assert set(ACCELERATORS.values()) <= set(SKYPILOT_ACCELERATORS)
    for cloud in CLOUDS.values():
        assert registry.CLOUD_REGISTRY.from_str(cloud) is not None, cloud


# --- torchtitan --------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["llama", "llama-dp", "llama-no-sp", "llama70-pp4-zero2"])
def test_torchtitan_arguments_parse_with_its_config_manager(plans, tmp_path, which):
    need("torchtitan")
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import ParallelDims

    from planner.launch.torchtitan import CONFIGS

    if (
        which == "llama70-pp4-zero2"
    ):  # a pipeline (FSDP2 has no ZeRO-1): torchtitan 0.3 refuses CUDA graphs with it
        plan = dataclasses.replace(CONTRACT_PLANS["llama70-pp4-zero1-full"], zero=2)
    else:
        plan = plans.get(which) or dataclasses.replace(plans["llama"], sp=False)
    out = files_for(plan, "torchtitan", tmp_path)
    module, config = CONFIGS[plan.net]
    args = shlex.split((out / "torchtitan_args.txt").read_text())
    cfg = ConfigManager().parse_args(["--module", module, "--config", config, *args])
    par = cfg.parallelism
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree) == (plan.tp, plan.pp)
    assert par.data_parallel_shard_degree * par.data_parallel_replicate_degree == plan.dp
    assert par.enable_sequence_parallel == (plan.sp or plan.tp == 1)
    assert (cfg.training.global_batch_size, cfg.training.seq_len) == (plan.global_batch, plan.seq_len)
    dims = ParallelDims.from_config(par, world_size=plan.gpus)  # asserts the degrees fill the GPUs
    assert dims.world_size == plan.gpus
    # torchtitan's trainer: gradient accumulation = global / (local x data-parallel degree)
    assert plan.global_batch % (cfg.training.local_batch_size * plan.dp) == 0
    assert (cfg.activation_checkpoint is None) == (plan.recompute == "none")


@pytest.mark.parametrize("kernel", ["flash", "standard"])
def test_torchtitan_states_the_attention_kernel_its_config_runs(plans, tmp_path, kernel):
    """No torchtitan release takes the attention kernel as an option: the parsed 0.3 config runs
    FlexAttention whatever the plan's kernel, and the files say so (and, for a plan costed with
    standard attention, that torchtitan runs a fused kernel instead)."""
    need("torchtitan")
    from torchtitan.config import ConfigManager
    from torchtitan.models.common.attention import FlexAttention, VarlenAttention

    from planner.launch.torchtitan import CONFIGS

    plan = dataclasses.replace(plans["llama"], attention=kernel)
    out = files_for(plan, "torchtitan", tmp_path)
    module, config = CONFIGS[plan.net]
    args = shlex.split((out / "torchtitan_args.txt").read_text())
    cfg = ConfigManager().parse_args(["--module", module, "--config", config, *args])
    assert any(cfg.model_spec.model.traverse(FlexAttention.Config))
    assert not any(cfg.model_spec.model.traverse(VarlenAttention.Config))
    for name in ("torchtitan.sh", "torchtitan_job.toml"):
        notes = [x for x in (out / name).read_text().splitlines() if x.startswith("# attention: ")]
        assert len(notes) == 1 and "FlexAttention" in notes[0] and "SDPA" in notes[0]
        assert ("not the plan's standard kernel" in notes[0]) == (kernel == "standard")
        assert ("as the plan's flash kernel" in notes[0]) == (kernel == "flash")


TORCHTITAN_TOML_CHECK = textwrap.dedent(
    """
    import sys
    from torchtitan.config import ConfigManager
    from torchtitan.config.job_config import JobConfig  # torchtitan 0.2.x only
    from torchtitan.distributed import ParallelDims
    cfg = ConfigManager().parse_args(["--job.config_file", sys.argv[1]])
    par, tr = cfg.parallelism, cfg.training
    ParallelDims(dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
                 cp=par.context_parallel_degree, tp=par.tensor_parallel_degree, pp=par.pipeline_parallel_degree,
                 ep=par.expert_parallel_degree, etp=par.expert_tensor_parallel_degree, world_size=int(sys.argv[2]))
    print(cfg.model.name, cfg.model.flavor, ",".join(cfg.model.converters) or "-", par.data_parallel_replicate_degree,
          par.data_parallel_shard_degree, par.tensor_parallel_degree, par.pipeline_parallel_degree,
          par.context_parallel_degree, par.fsdp_reshard_after_forward, tr.local_batch_size, tr.global_batch_size,
          tr.seq_len, cfg.activation_checkpoint.mode)
    """
)


@pytest.mark.parametrize("which", ["llama", "llama-dp", "llama-fp8"])
def test_torchtitan_job_toml_parses_with_its_config_manager(plans, tmp_path, which):
    """The job TOML parsed by torchtitan 0.2.x's ConfigManager (the releases that read TOML;
    TORCHTITAN_0_2 names a folder holding one, e.g. `pip install --no-deps --target DIR
    torchtitan==0.2.2`, as CI does), its ParallelDims checking the degrees fill the GPUs."""
    folder = os.environ.get("TORCHTITAN_0_2")
    if not folder or not Path(folder, "torchtitan", "config", "job_config.py").is_file():
        pytest.skip(
            "set TORCHTITAN_0_2 to a folder with torchtitan 0.2.x (pip install --no-deps --target DIR torchtitan==0.2.2)"
        )
    plan = plans.get(which) or dataclasses.replace(plans["llama"], precision="fp8")
    out = files_for(plan, "torchtitan", tmp_path)
    env = {**os.environ, "PYTHONPATH": folder}
    done = subprocess.run(
        [sys.executable, "-c", TORCHTITAN_TOML_CHECK, str(out / "torchtitan_job.toml"), str(plan.gpus)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shard = plan.zero >= 2
    reshard = {2: "never", 3: "always"}.get(plan.zero, "default")
    converters = "quantize.linear.float8" if plan.precision == "fp8" else "-"
    want = (
        f"llama3 70B {converters} {1 if shard else plan.dp} {plan.dp if shard else 1} {plan.tp} {plan.pp} 1 "
        f"{reshard} {plan.microbatch} {plan.global_batch} {plan.seq_len} {plan.recompute}"
    )
    assert done.stdout.strip().splitlines()[-1] == want


# --- Megatron-Core / Megatron-LM ----------------------------------------------------------

# Megatron-LM flags whose Megatron-Core field has another name, or that set none
RENAMED = {
    "--swiglu": ("gated_linear_unit", True),
    "--disable-bias-linear": ("add_bias_linear", False),
    "--no-gradient-accumulation-fusion": ("gradient_accumulation_fusion", False),
    "--num-experts": ("num_moe_experts", None),
    "--fp8-format": ("fp8", None),
    "--num-virtual-stages-per-pipeline-rank": ("virtual_pipeline_model_parallel_size", None),
}


def _mcore(flags: dict[str, object], plan: LaunchPlan):
    """Megatron-Core's own config objects built from Megatron-LM flags, as Megatron-LM's
    core_transformer_config_from_args copies same-named arguments into them."""
    import torch
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.transformer import TransformerConfig

    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    ddp_fields = {f.name for f in dataclasses.fields(DistributedDataParallelConfig)}
    tc, ddp = {}, {}
    for flag, value in flags.items():
        name, fixed = RENAMED.get(flag, (flag[2:].replace("-", "_"), None))
        value = fixed if fixed is not None else value
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if name == "attention_backend":  # argument_utils.py's enum type: AttnBackend[name]
            from megatron.core.transformer.enums import AttnBackend

            value = AttnBackend[value]
        if name in fields:
            tc[name] = value
        elif name in ddp_fields:
            ddp[name] = value
    if plan.pp > 1:  # Megatron-LM sets it from the parameter dtype
        tc["pipeline_dtype"] = torch.bfloat16
    if plan.zero == 2:
        ddp["use_megatron_fsdp"] = True
    config = TransformerConfig(**tc)  # __post_init__ checks the degrees and recomputation
    DistributedDataParallelConfig(**ddp)
    calc = ConstantNumMicroBatchesCalculator(
        int(flags.get("--global-batch-size", flags.get("train.global_batch_size", 0))),
        int(flags.get("--micro-batch-size", flags.get("train.micro_batch_size", 0))),
        plan.dp,
        False,
        0,
    )
    return config, calc


@pytest.mark.parametrize("which", ["llama", "llama-dp", "llama70-pp4-zero1-full"])
def test_megatron_arguments_build_megatron_core_configs(plans, tmp_path, which):
    need("megatron.core")
    plan = plans.get(which) or CONTRACT_PLANS[which]  # a pipeline with virtual stages too
    flags = tokens(files_for(plan, "megatron", tmp_path) / "megatron_args.txt")
    config, calc = _mcore(flags, plan)
    assert (config.tensor_model_parallel_size, config.pipeline_model_parallel_size) == (plan.tp, plan.pp)
    assert config.sequence_parallel == plan.sp
    assert (config.num_layers, config.hidden_size) == (plan.model["n_layers"], plan.model["d_model"])
    assert calc.get() == plan.accumulation


def test_megatron_core_refuses_what_the_target_refuses():
    """The checks the test relies on bite: sequence parallelism without TP is refused by
    Megatron-Core's own ModelParallelConfig."""
    need("megatron.core")
    from megatron.core.transformer import TransformerConfig

    with pytest.raises(ValueError, match="sequence parallelism without tensor parallelism"):
        TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, sequence_parallel=True)


MEGATRON_LM_CHECK = textwrap.dedent(
    """
    import shlex, sys, typing
    typing.override = getattr(typing, "override", lambda f: f)  # 3.12's typing.override on 3.11
    import megatron.training.arguments as arguments
    arguments.get_device_arch_version = lambda: 9  # the plan's H100 (compute capability 9.0)
    sys.argv = ["pretrain_gpt.py", *shlex.split(open(sys.argv[1]).read())]
    args = arguments.parse_args()
    arguments.validate_args(args)
    print(args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.data_parallel_size,
          args.micro_batch_size, args.global_batch_size)
    """
)


@pytest.mark.parametrize(
    "which", ["llama", "llama-dp", "llama70-pp4-zero1-full", "llama8-tp2-zero1", "gpt3-fp8-selective"]
)
def test_megatron_arguments_pass_megatron_lm_validate_args(plans, tmp_path, which):
    """With a Megatron-LM checkout (MEGATRON_LM, as the emitted script reads it), its own
    parse_args and validate_args accept the arguments at the plan's world size."""
    checkout = os.environ.get("MEGATRON_LM")
    if not checkout or not Path(checkout, "megatron", "training", "arguments.py").is_file():
        pytest.skip("set MEGATRON_LM to a NVIDIA/Megatron-LM checkout (megatron/training is not on PyPI)")
    plan = plans.get(which) or CONTRACT_PLANS[which]  # the search's, or test_launch.py's
    out = files_for(plan, "megatron", tmp_path)
    env = {**os.environ, "PYTHONPATH": checkout, "WORLD_SIZE": str(plan.gpus), "RANK": "0"}
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    if "CUDA_DEVICE_MAX_CONNECTIONS=1 " in (out / "megatron.sh").read_text():  # as the script runs it
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", MEGATRON_LM_CHECK, str(out / "megatron_args.txt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    want = f"{plan.tp} {plan.pp} {plan.dp} {plan.microbatch} {plan.global_batch}"
    assert done.stdout.strip().splitlines()[-1] == want


# --- NeMo / Megatron-Bridge -----------------------------------------------------------------

# Megatron-Bridge's registered mixed-precision recipes (src/megatron/bridge/training/mixed_precision.py,
# NVIDIA-NeMo/Megatron-Bridge commit 067f987df03b8355b03192d88d70f1709fedf51a)
BRIDGE_MIXED_PRECISION = ("bf16_mixed", "fp16_mixed", "bf16_with_fp8_current_scaling_mixed")


@pytest.mark.parametrize("kernel, backend", [("flash", "flash"), ("standard", "unfused")])
def test_nemo_overrides_build_the_config_containers_megatron_core_classes(plans, tmp_path, kernel, backend):
    """Megatron-Bridge needs Transformer Engine and CUDA to import, so its ConfigContainer's own
    classes (Megatron-Core's TransformerConfig and DistributedDataParallelConfig) check the
    overrides, with the model's shape from the recipe's net; the plan's attention kernel is the
    TransformerConfig's attention_backend."""
    need("megatron.core")
    import torch
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.enums import AttnBackend

    assert plans["llama"].attention == "flash"  # Llama 3's spec kernel, from the search's record
    plan = dataclasses.replace(plans["llama"], attention=kernel)
    lines = (files_for(plan, "nemo", tmp_path) / "nemo_overrides.txt").read_text().split()
    kv = dict(line.split("=", 1) for line in lines)
    value = lambda v: {"true": True, "false": False, "null": None}.get(v, int(v) if v.isdigit() else v)  # noqa: E731
    model = {k[6:]: value(v) for k, v in kv.items() if k.startswith("model.")}
    # the override names an AttnBackend member, which OmegaConf's EnumNode looks up by name
    # (omegaconf/nodes.py, EnumNode.validate_and_convert_to_enum: enum_type[value])
    model["attention_backend"] = AttnBackend[model["attention_backend"]]
    ddp = {k[4:]: value(v) for k, v in kv.items() if k.startswith("ddp.")}
    m = plan.model
    shape = dict(num_layers=m["n_layers"], hidden_size=m["d_model"], num_attention_heads=m["n_heads"])
    config = TransformerConfig(**shape, **model, pipeline_dtype=torch.bfloat16 if plan.pp > 1 else None)
    DistributedDataParallelConfig(**ddp)
    micro, glob = int(kv["train.micro_batch_size"]), int(kv["train.global_batch_size"])
    assert ConstantNumMicroBatchesCalculator(glob, micro, plan.dp, False, 0).get() == plan.accumulation
    assert (config.tensor_model_parallel_size, config.sequence_parallel) == (plan.tp, plan.sp)
    assert config.attention_backend is AttnBackend[backend]
    assert kv["mixed_precision"] in BRIDGE_MIXED_PRECISION


# --- accelerate ----------------------------------------------------------------------------


def _accelerate_env(plan: LaunchPlan, out: Path) -> dict[str, str]:
    """The environment `accelerate launch` gives the script for the written config file
    (its own parser, config merge and environment builder)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    argv = ["--config_file", str(out / "accelerate_config.yaml"), "--machine_rank", "0"]
    argv += ["--main_process_ip", "10.0.0.1", str(out / "train_lm.py"), "--batch", str(plan.microbatch)]
    args = launch_command_parser().parse_args(argv)
    args, _, _ = _validate_launch_command(args)  # merges the config file into the launch options
    assert (args.num_processes, args.num_machines) == (plan.gpus, plan.nodes)
    return prepare_multi_gpu_env(args)


def test_accelerate_config_passes_accelerate_launch(plans, tmp_path, monkeypatch):
    """The best plan of the llama3-70b search kept to accelerate (FSDP2, ZeRO 3, full
    recomputation, data parallel): accelerate launch's environment for its config builds
    accelerate's own FullyShardedDataParallelPlugin with the plan's settings, and the node
    command carries its batch, accumulation and sequence, which fill its global batch."""
    need("accelerate")
    from accelerate.utils import FullyShardedDataParallelPlugin

    plan = plans["llama-dp"]
    assert (plan.tp, plan.pp, plan.cp, plan.zero, plan.recompute) == (
        1,
        1,
        1,
        3,
        "full",
    )  # what the search picks
    out = files_for(plan, "accelerate", tmp_path)
    cfg = yaml.safe_load((out / "accelerate_config.yaml").read_text())
    assert cfg["distributed_type"] == "FSDP" and "parallelism_config" not in cfg
    env = _accelerate_env(plan, out)
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    assert env["ACCELERATE_MIXED_PRECISION"] == {"bf16": "bf16", "fp16": "fp16"}.get(plan.precision, "no")
    _from_env(monkeypatch, env, "FSDP_")
    fsdp = FullyShardedDataParallelPlugin()
    assert (fsdp.fsdp_version, fsdp.reshard_after_forward) == (2, plan.zero == 3)
    assert fsdp.activation_checkpointing == (plan.recompute == "full")
    assert fsdp.cpu_ram_efficient_loading is False
    (tmp_path / "node.txt").write_text((out / "accelerate.sh").read_text().strip().splitlines()[-1])
    node = tokens(tmp_path / "node.txt")
    batch, accumulation = int(node["--batch"]), int(node["--accumulation"])
    assert (batch, accumulation, int(node["--seq-len"])) == (plan.microbatch, plan.accumulation, plan.seq_len)
    assert node["--recompute"] == "none"  # FSDP's activation checkpointing recomputes, not the script
    assert batch * accumulation * cfg["num_processes"] == plan.global_batch


def _from_env(monkeypatch, env: dict[str, str], prefix: str) -> None:
    """Put the ``prefix`` variables of a launch environment (and only those) in os.environ."""
    for key in [k for k in os.environ if k.startswith(prefix)]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith(prefix):
            monkeypatch.setenv(key, value)


def test_accelerate_tensor_parallel_plan_builds_its_parallelism_config(plans, tmp_path, monkeypatch):
    """The llama plan without sequence parallelism (TP 4, ZeRO 3): its config goes through
    accelerate launch into the environment, from which accelerate's own ParallelismConfig reads
    its sizes (its __post_init__ checks them); their product is the plan's GPUs, the launch's
    world size, which Accelerator checks against it (ParallelismConfig._validate_accelerator)."""
    need("accelerate")
    from accelerate.parallelism_config import ParallelismConfig

    plan = dataclasses.replace(plans["llama"], sp=False, tp_overlap=False, zero=3)
    assert TARGETS["accelerate"].refusal(plan) is None
    out = files_for(plan, "accelerate", tmp_path)
    env = _accelerate_env(plan, out)
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    assert env["FSDP_RESHARD_AFTER_FORWARD"] == "true"  # ZeRO 3
    # off (the launcher's default is on): with it, fsdp2_load_full_state_dict re-shards a TP
    # parameter's local shard as if it were the whole parameter
    assert env["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "false"
    assert env["FSDP_ACTIVATION_CHECKPOINTING"] == str(plan.recompute == "full").lower()
    assert env["ACCELERATE_USE_PARALLELISM_CONFIG"] == "true"
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16" == plan.precision
    _from_env(monkeypatch, env, "PARALLELISM_CONFIG_")
    pc = ParallelismConfig()
    assert (pc.dp_replicate_size, pc.dp_shard_size, pc.tp_size, pc.cp_size) == (1, plan.dp, plan.tp, plan.cp)
    assert pc.total_size == plan.gpus and pc.fsdp_dim_names == ["dp_shard_cp"]
    node = (out / "accelerate.sh").read_text()
    assert f"--batch {plan.microbatch} --accumulation {plan.accumulation} --precision bf16 --zero 3" in node
    # ZeRO 0 would replicate instead of shard, which accelerate refuses beside tensor parallelism:
    # such a plan takes the Megatron-LM plugin
    with pytest.raises(ValueError, match="cannot be used with pure data parallelism"):
        ParallelismConfig(dp_replicate_size=plan.dp, dp_shard_size=1, tp_size=plan.tp, cp_size=1)


@pytest.mark.parametrize("which", ["llama-cp", "llama-tp2-cp2"])
def test_accelerate_context_parallel_config_passes_accelerate_launch(plans, tmp_path, monkeypatch, which):
    """Context parallelism (the plan a 128k-token search kept to accelerate finds, and the llama
    plan with TP 2 x CP 2 and full recomputation): its exchange reaches accelerate's
    TorchContextParallelConfig as the rotation the plan's cp_comm names."""
    need("accelerate")
    from accelerate.parallelism_config import ParallelismConfig

    if which == "llama-cp":
        plan = plans["llama-cp"]
        assert plan.cp > 1 and plan.zero >= 2 and not plan.sp
    else:
        plan = dataclasses.replace(
            plans["llama"], sp=False, tp=2, cp=2, cp_comm="p2p", recompute="full", tp_overlap=False
        )
    assert TARGETS["accelerate"].refusal(plan) is None
    out = files_for(plan, "accelerate", tmp_path)
    env = _accelerate_env(plan, out)
    assert env["FSDP_ACTIVATION_CHECKPOINTING"] == str(plan.recompute == "full").lower()
    assert env["FSDP_RESHARD_AFTER_FORWARD"] == str(plan.zero == 3).lower()
    _from_env(monkeypatch, env, "PARALLELISM_CONFIG_")
    pc = ParallelismConfig()
    assert (pc.dp_shard_size, pc.tp_size, pc.cp_size) == (plan.dp, plan.tp, plan.cp)
    assert pc.total_size == plan.gpus
    # torch's ring rotation of key/value shards (p2p) or one all-gather of them
    assert pc.cp_handler.cp_comm_strategy == {"p2p": "alltoall", "all_gather": "allgather"}[plan.cp_comm]
    node = (out / "accelerate.sh").read_text()
    assert (
        f"--seq-len {plan.seq_len} --recompute none --attention flash --batch {plan.microbatch} "
        f"--accumulation {plan.accumulation}" in node
    )


@pytest.mark.parametrize("recompute", ["full", "selective"])
def test_accelerate_megatron_lm_plugin_gets_the_plans_degrees(plans, tmp_path, monkeypatch, recompute):
    """The llama plan with what the Megatron-LM plugin can run (ZeRO-1, recomputation): its
    megatron_lm_config goes through accelerate launch into the environment, from which
    accelerate's own MegatronLMPlugin reads its settings."""
    need("accelerate")
    from accelerate.utils import MegatronLMPlugin

    plan = dataclasses.replace(plans["llama"], zero=1, recompute=recompute, tp_overlap=False)
    out = files_for(plan, "accelerate", tmp_path)
    env = _accelerate_env(plan, out)
    assert env["ACCELERATE_USE_MEGATRON_LM"] == "true"
    _from_env(monkeypatch, env, "MEGATRON_LM_")
    plugin = MegatronLMPlugin()
    assert (plugin.tp_degree, plugin.pp_degree, plugin.num_micro_batches) == (
        plan.tp,
        plan.pp,
        plan.accumulation,
    )
    assert plugin.sequence_parallelism == plan.sp and plugin.use_distributed_optimizer
    assert (plugin.context_parallel_size, plugin.expert_model_parallel_size) == (1, 1)
    assert plugin.recompute_granularity == recompute
    # global batch = data-parallel size x micro batch x microbatches (MegatronLMPlugin.set_training_args)
    plugin.set_training_args(plan.microbatch, plan.dp)
    assert plugin.megatron_lm_default_args["global_batch_size"] == plan.global_batch


# --- Slurm ---------------------------------------------------------------------------------


@pytest.mark.service
@pytest.mark.parametrize("which, engine", [("resnet", "torchrun"), ("llama", "megatron")])
def test_sbatch_accepts_the_script(plans, tmp_path, which, engine):
    """`sbatch --test-only` parses the script and its directives. The CI cluster is one node
    without GPUs, so the node count and GPUs are overridden on the command line (which takes
    precedence over #SBATCH lines); the directives' own values are asserted from the text."""
    if not os.environ.get("PLANNER_TEST_SLURM") or shutil.which("sbatch") is None:
        pytest.skip('no Slurm cluster: eval "$(bash .ci/services.sh start)" starts one, as CI does')
    plan = plans[which]
    script = files_for(plan, f"{engine},slurm", tmp_path) / "job.sbatch"
    text = script.read_text()
    assert f"#SBATCH --nodes={plan.nodes}\n" in text and f"#SBATCH --gres=gpu:{plan.gpus_per_node}\n" in text
    done = subprocess.run(
        ["sbatch", "--test-only", "--nodes=1", "--gres=none", "--exclusive=user", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "to start at" in done.stderr or "to start at" in done.stdout


def test_resnet_plan_targets_carry_its_numbers(plans, tmp_path):
    plan = plans["resnet"]
    out = files_for(plan, "torchrun,slurm,skypilot", tmp_path)
    node = (out / "torchrun.sh").read_text()
    assert f"--nnodes {plan.nodes} --nproc-per-node {plan.gpus_per_node}" in node
    assert (
        f"--arch resnet50 --channels-last --batch {plan.microbatch} --accumulation {plan.accumulation}"
        in node
    )
    assert f"--precision {plan.precision}" in node
    assert yaml.safe_load((out / "sky_task.yaml").read_text())["num_nodes"] == plan.nodes
