"""The torchrun target's reference scripts run one training step on the CPU (gloo, one
process), from the files `planner launch` writes, and log a row the measurement loader of
`planner calibrate` and `planner validate` reads.

The plan's command is run as written except for what a CPU cannot hold: one node of one
process, a tiny model of the same family (``--arch tiny``; a two-layer Llama config), short
sequences and one step.
"""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from planner.calibrate import measurements
from planner.errors import BadInput
from planner.launch.registry import TARGETS
from planner.launch.target import LaunchOptions

pytest.importorskip("torch", reason="the reference scripts need PyTorch: pip install '.[launch]'")
sys.path.insert(0, str(Path(__file__).parent))
from test_launch import PLANS, llm  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"  # the reference scripts

TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 64,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_files(plan, out: Path) -> None:
    """The torchrun target's files for ``plan``, in ``out``."""
    out.mkdir()
    for name, text in TARGETS["torchrun"].files(plan, LaunchOptions()).items():
        (out / name).write_text(text)


def run_one_step(plan, out: Path, extra: list[str]) -> Path:
    """Run the written node command on one CPU process; returns the CSV it logged."""
    line = (out / "torchrun.sh").read_text().strip().splitlines()[-1]
    assert line.startswith(f"torchrun --nnodes {plan.nodes} --nproc-per-node {plan.gpus_per_node} ")
    command = re.sub(r"^torchrun --nnodes \d+ --nproc-per-node \d+", "--nnodes 1 --nproc-per-node 1", line)
    env = f"export NODE_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT={_free_port()};"
    done = subprocess.run(
        ["bash", "-c", f"{env} {sys.executable} -m torch.distributed.run {command} {' '.join(extra)}"],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 steps, median" in done.stdout
    return out / "steps.csv"


def check_row(path: Path, plan, tmp_path: Path) -> measurements.Run:
    """The loader refuses the CPU's row by its device (a GPU profile is fitted from GPU runs)
    and reads every other column; with the plan's GPU in the device column it loads."""
    with pytest.raises(BadInput, match="row 1, column device|measured on the CPU"):
        measurements.load(path)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 1 and rows[0]["device"] == "cpu" and float(rows[0]["value"]) > 0
    (run,) = _load_as(rows, plan.device, tmp_path)
    assert (run.net, run.precision, run.metric) == (plan.net, plan.precision, "iteration_ms")
    assert (run.batch_per_gpu, run.accumulation, run.zero, run.gpus) == (
        plan.microbatch,
        plan.accumulation,
        plan.zero,
        1,
    )
    return run


def _load_as(rows: list[dict], device: str, tmp_path) -> list:
    """The logged rows read by calibrate's loader as measured on ``device`` (it refuses the CPU)."""
    path = tmp_path / "as_gpu.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([{**r, "device": device} for r in rows])
    return measurements.load(path)


@pytest.mark.slow
def test_cnn_example_runs_one_step_of_the_resnet_plan(tmp_path):
    plan = PLANS["resnet50"]
    out = tmp_path / "launch"
    write_files(plan, out)
    extra = ["--arch", "tiny", "--image-size", "32", "--classes", "10", "--steps", "1", "--warmup", "0"]
    check_row(run_one_step(plan, out, extra), plan, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("zero", [0, 3])
def test_lm_example_runs_one_step_of_an_fsdp_plan(tmp_path, zero):
    pytest.importorskip("transformers", reason="the LM script needs transformers: pip install '.[launch]'")
    from dataclasses import replace

    plan = replace(PLANS["llama8-dp-zero3"], zero=zero, accumulation=2)
    out = tmp_path / "launch"
    write_files(plan, out)
    written = json.loads((out / "model_config.json").read_text())
    assert (written["model_type"], written["num_hidden_layers"]) == ("llama", plan.model["n_layers"])
    (out / "model_config.json").write_text(
        json.dumps(TINY_LLAMA)
    )  # the plan's 8B net does not fit a CPU test
    run = check_row(
        run_one_step(plan, out, ["--seq-len", "32", "--steps", "1", "--warmup", "0"]), plan, tmp_path
    )
    assert run.seq_len == 32
    assert run.attention == plan.attention  # the kernel it ran, which validate predicts it with


@pytest.mark.parametrize(("attention", "implementation"), [("flash", "sdpa"), ("standard", "eager")])
def test_lm_example_builds_the_plans_attention_kernel(attention, implementation):
    """--attention flash runs PyTorch's fused scaled_dot_product_attention (no s x s scores
    kept), standard transformers' eager attention (scores materialised), as the plan is costed."""
    pytest.importorskip("transformers", reason="the LM script needs transformers: pip install '.[launch]'")
    import argparse

    sys.path.insert(0, str(EXAMPLES))
    try:
        import train_lm
    finally:
        sys.path.remove(str(EXAMPLES))
    model = train_lm.build(argparse.Namespace(tiny=True, recompute="none", attention=attention))
    assert model.config._attn_implementation == implementation


@pytest.mark.slow
def test_lm_example_trains_one_step_under_accelerate_launch(tmp_path):
    """The accelerate target's script path (--accelerate: accelerate's Accelerator, gradient
    accumulation included) under `accelerate launch` on the CPU, one process."""
    pytest.importorskip("accelerate", reason="pip install '.[launch]'")
    plan = PLANS["llama8-dp-zero0"]
    out = tmp_path / "launch"
    write_files(plan, out)
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1"]
    launcher += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    script = [
        "train_lm.py",
        "--tiny",
        "--seq-len",
        "16",
        "--batch",
        "2",
        "--accumulation",
        "2",
        "--steps",
        "1",
    ]
    script += [
        "--warmup",
        "0",
        "--precision",
        "fp32",
        "--accelerate",
        "--net",
        plan.net,
        "--log-csv",
        "steps.csv",
    ]
    done = subprocess.run(launcher + script, cwd=out, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = csv.DictReader((out / "steps.csv").open())
    assert row["framework"].endswith("transformers accelerate") and row["accumulation"] == "2"


# run by 4 gloo processes: the accelerate target's mesh for dp_shard 2 x tp 2, and the reference
# LM's tensor-parallel step on it (transformers' plan of the model), one forward and backward
TP_DRIVER = """
import copy, json, sys
import torch, torch.distributed as dist
import transformers
from accelerate.parallelism_config import ParallelismConfig
from torch.distributed.tensor import DTensor
from transformers import AutoConfig, AutoModelForCausalLM
import train_lm

dist.init_process_group("gloo")
torch.manual_seed(0)
pc = ParallelismConfig(dp_shard_size=2, tp_size=2)
mesh = pc.build_device_mesh("cpu")
spec = dict(train_lm.TINY)
model = AutoModelForCausalLM.from_config(AutoConfig.for_model(spec.pop("model_type"), **spec))
whole = copy.deepcopy(model)
model = train_lm._tensor_parallel(model, pc.tp_size, mesh)
tokens = torch.randint(0, 256, (2, 16))
loss, reference = model(input_ids=tokens, labels=tokens).loss, whole(input_ids=tokens, labels=tokens).loss
loss.backward()
reference.backward()
full = lambda g: g.full_tensor() if isinstance(g, DTensor) else g
linears = [(m.weight, w.weight) for m, w in zip(model.modules(), whole.modules()) if isinstance(m, torch.nn.Linear)]
grad_diff = max((full(m.grad) - w.grad).abs().max().item() for m, w in linears)  # every rank gathers
q = model.model.layers[0].self_attn.q_proj.weight
if dist.get_rank() == 0:
    json.dump({
        "version": transformers.__version__,
        "mesh": list(mesh.mesh_dim_names),
        "q_local": list(q.to_local().shape), "q_global": list(q.shape),
        "o_local": list(model.model.layers[0].self_attn.o_proj.weight.to_local().shape),
        "down_local": list(model.model.layers[0].mlp.down_proj.weight.to_local().shape),
        "sharded": sorted(n for n, p in model.named_parameters() if isinstance(p, DTensor)),
        "loss": [loss.item(), reference.item()],
        "linears": len(linears),
        "grad_diff": grad_diff,
    }, open(sys.argv[1], "w"))
dist.destroy_process_group()
"""


@pytest.mark.slow
@pytest.mark.parametrize("release", ["installed", "5.0.0"])
def test_lm_example_shards_linears_on_the_accelerate_tp_mesh(tmp_path, release):
    """The accelerate target's tensor-parallel step of the reference LM on the CPU, with the
    installed transformers and with 5.0.0 (the release accelerate 1.15 prepares TP models with):
    accelerate's ParallelismConfig builds the (dp_shard, tp) mesh its parallelism_config names,
    transformers' plan of the model shards q/k/v/o and the MLP over tp (Llama's
    base_model_tp_plan) and leaves the norms whole (no sequence parallelism), and the sharded
    model's loss and gradients are the whole model's."""
    pytest.importorskip("accelerate", reason="pip install '.[launch]'")
    pytest.importorskip(
        "transformers.distributed", reason="tensor parallelism from a config: transformers>=5"
    )
    folder = _transformers_5_0() if release == "5.0.0" else None
    plan = llm(net="llama3-8b", gpus=64, tp=2, sp=False, zero=3, microbatch=1, accumulation=4)
    out = tmp_path / "launch"
    out.mkdir()
    for name, text in TARGETS["accelerate"].files(plan, LaunchOptions()).items():
        (out / name).write_text(text)
    (out / "tp_driver.py").write_text(TP_DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if folder:
        env["PYTHONPATH"] = folder
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4"]
    launcher += ["--master-port", str(_free_port()), "tp_driver.py", str(tmp_path / "tp.json")]
    done = subprocess.run(launcher, cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads((tmp_path / "tp.json").read_text())
    assert got["mesh"] == ["dp_shard", "tp"]
    assert got["q_global"] == [64, 64] and got["q_local"] == [32, 64]  # Shard(0) over tp 2
    # rowwise: the input features split (Shard(1)), so each rank's o_proj and down_proj take the
    # activations its colwise q/k/v and gate/up produced, without a gather (DTensor would
    # compute the same loss with any placement, communicating more)
    assert got["o_local"] == [64, 32] and got["down_local"] == [64, 64]
    assert got["loss"][0] == pytest.approx(got["loss"][1], rel=1e-5)
    assert got["linears"] == 2 * 7 + 1 and got["grad_diff"] < 1e-5  # every linear's gradient
    linears = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    layers = [
        f"model.layers.{i}.{'self_attn' if p[0] in 'qkvo' else 'mlp'}.{p}.weight"
        for i in (0, 1)
        for p in linears
    ]
    if release == "5.0.0":
        # transformers 5.0 drops the causal LM's own lm_head entry when it merges the plans
        # (PreTrainedModel.post_init), so its lm_head stays whole, for accelerate to replicate
        assert got["version"] == "5.0.0" and got["sharded"] == sorted(layers)
    else:
        assert got["sharded"] == sorted([*layers, "lm_head.weight"])  # no norm, no embedding


# accelerate 1.15 turns FSDP (and so a parallelism_config) on only for an accelerator device:
# AcceleratorState.__init__ promotes MULTI_GPU, MULTI_XPU, MULTI_NPU ... to FSDP, not MULTI_CPU,
# and ParallelismConfig._validate_accelerator refuses MULTI_CPU (accelerate/state.py,
# parallelism_config.py). The driver labels the gloo world of CPU processes a GPU world (the
# device stays the CPU: ACCELERATE_TORCH_DEVICE=cpu); the rest is accelerate's own code and
# the reference script as written: _prepare_tp, _prepare_fsdp2, the accumulation loop.
ACCELERATE_CPU_DRIVER = """
import sys
import accelerate.state
from accelerate.utils import DistributedType

def _gloo_as_gpu_world(self, cpu=False, sagemaker_dp=False, backend=None):
    return "gloo", DistributedType.MULTI_GPU

accelerate.state.PartialState._prepare_backend = _gloo_as_gpu_world
import train_lm
train_lm.main(sys.argv[1:])
"""


def _transformers_5_0() -> str:
    """The folder holding transformers 5.0.0 (TRANSFORMERS_5_0), else skip."""
    folder = os.environ.get("TRANSFORMERS_5_0")
    if not folder or not Path(folder, "transformers", "integrations", "tensor_parallel.py").is_file():
        pytest.skip(
            "set TRANSFORMERS_5_0 to a folder with transformers 5.0.0, the last release accelerate 1.15 "
            "prepares tensor parallelism with (pip install --no-deps --target DIR transformers==5.0.0 "
            "tokenizers==0.22.2)"
        )
    return folder


def _launch_tp_plan(out: Path, pythonpath: str | None) -> subprocess.CompletedProcess:
    """Write the accelerate target's files for a TP 2 x dp_shard 2 plan to ``out`` and run its
    node command on 4 CPU processes (the tiny Llama, 16 tokens, one step)."""
    plan = llm(net="llama3-8b", gpus=4, gpus_per_node=4, tp=2, sp=False, zero=3, microbatch=1, accumulation=2)
    assert TARGETS["accelerate"].refusal(plan) is None and plan.dp == 2
    out.mkdir()
    for name, text in TARGETS["accelerate"].files(plan, LaunchOptions()).items():
        (out / name).write_text(text)
    (out / "cpu_driver.py").write_text(ACCELERATE_CPU_DRIVER)
    line = (out / "accelerate.sh").read_text().strip().splitlines()[-1]
    assert (
        line.startswith("accelerate launch --config_file accelerate_config.yaml ") and " train_lm.py " in line
    )
    # the plan's 8B net and 8,192-token sequence do not fit a CPU test: the tiny Llama, 16 tokens
    assert "--model-config model_config.json --seq-len 8192 " in line
    command = line.replace("accelerate launch", f"{sys.executable} -m accelerate.commands.launch", 1)
    command = command.replace(" train_lm.py ", " cpu_driver.py ").replace(
        "--model-config model_config.json --seq-len 8192", "--tiny --seq-len 16"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        ACCELERATE_TORCH_DEVICE="cpu", NODE_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port())
    )
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        ["bash", "-c", f"{command} --steps 1 --warmup 0"],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_accelerate_tp_plan_trains_one_step_under_accelerate_launch(tmp_path):
    """The accelerate target's files for a TP 2 x dp_shard 2 plan, run by `accelerate launch`
    with the written config on 4 CPU processes (gloo) with transformers 5.0.0 first on the path:
    the script shards the tiny Llama's linears over tp, accelerate replicates the rest over tp
    (transformers' ReplicateParallel) and FSDP2 shards everything over dp_shard, one optimizer
    step of 2 microbatches runs, and rank 0 logs the row `planner calibrate` reads, with the
    plan's degrees."""
    pytest.importorskip("accelerate", reason="pip install '.[launch]'")
    out = tmp_path / "launch"
    done = _launch_tp_plan(out, _transformers_5_0())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "llama3-8b: 1 steps, median" in done.stdout
    rows = list(csv.DictReader((out / "steps.csv").open()))
    assert len(rows) == 1 and rows[0]["framework"].endswith("transformers accelerate")
    assert float(rows[0]["value"]) > 0 and rows[0]["device"] == "cpu"
    (run,) = _load_as(rows, "H100_SXM", tmp_path)  # the loader refuses the CPU (check_row)
    assert (run.net, run.precision, run.gpus, run.gpus_per_node) == ("llama3-8b", "bf16", 4, 4)
    assert (run.tp, run.pp, run.cp, run.zero, run.batch_per_gpu, run.accumulation) == (2, 1, 1, 3, 1, 2)
    assert run.seq_len == 16 and run.recompute == "none"


@pytest.mark.slow
def test_accelerate_tp_plan_stops_in_one_line_on_an_incompatible_pair(tmp_path):
    """With the installed transformers lacking ReplicateParallel (5.1 and later), the same launch
    stops before training with one line naming both versions and the release that works."""
    pytest.importorskip("accelerate", reason="pip install '.[launch]'")
    try:
        from transformers.integrations.tensor_parallel import ReplicateParallel  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the installed transformers has ReplicateParallel: accelerate prepares its TP models")
    import accelerate
    import transformers

    done = _launch_tp_plan(tmp_path / "launch", None)
    assert done.returncode != 0
    line = (
        f"accelerate {accelerate.__version__} prepares a tensor-parallel model under FSDP2 with transformers' "
        f"ReplicateParallel, which transformers {transformers.__version__} does not have (transformers 4.52.2 "
        "to 5.0.0 have it; this script's tensor parallelism needs 5.0.0: pip install transformers==5.0.0)\n"
    )
    assert line in done.stderr
    assert not re.search(
        r"^\[rank\d\]: Traceback", done.stderr, re.M
    )  # no rank raised (the launcher reports exit 1)
    assert not (tmp_path / "launch" / "steps.csv").exists()
