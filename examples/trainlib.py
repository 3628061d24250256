"""What the reference training scripts share: process group, data-parallel wrapping, the
training loop with gradient accumulation and mixed precision, and the step-time CSV.

Launched by torchrun (one process per GPU; RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE from
its environment), or as a single process. On a machine without a GPU everything runs on the CPU
with the gloo backend, which is how the tests run one step.

The CSV row is in the measurement format of `planner calibrate` and `planner validate`
(configs/measurements/README.md, "Columns"), so a run's step time can be checked against the
plan's prediction and fitted into a profile.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import statistics
import time

import torch
import torch.distributed as dist

COLUMNS = (
    "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,"
    "framework,data,seq_len,accumulation,tp,pp,recompute,tp_overlap,zero,sp,ep,interleave,cp,cp_comm,attention,url,date,notes"
).split(",")
AMP = {"fp16": torch.float16, "bf16": torch.bfloat16}


def common_arguments(parser: argparse.ArgumentParser) -> None:
    """Options both scripts take: batch, accumulation, precision, sharding, logging."""
    parser.add_argument("--batch", type=int, required=True, help="samples per GPU per microbatch")
    parser.add_argument("--accumulation", type=int, default=1, help="microbatches per optimizer step")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps to run")
    parser.add_argument("--warmup", type=int, default=5, help="steps left out of the median step time")
    parser.add_argument("--precision", choices=("fp32", "tf32", "fp16", "bf16"), default="bf16")
    parser.add_argument("--dist", choices=("ddp", "fsdp"), default="ddp")
    parser.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="0-1: DDP, 2-3: FSDP")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--log-csv", default=None, help="append the measured step time here (rank 0)")
    parser.add_argument("--net", default=None, help="planner's net name for the CSV row")
    parser.add_argument("--device-key", default="", help="planner's device key for the CSV row (on a GPU)")
    parser.add_argument("--network", default="", help="planner's link between nodes for the CSV row")
    parser.add_argument("--seed", type=int, default=0)


def setup() -> tuple[torch.device, int, int]:
    """Join the process group (NCCL on GPUs, gloo on the CPU); (device, rank, world size)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1 or "RANK" in os.environ:
        dist.init_process_group("nccl" if cuda else "gloo")
    return device, int(os.environ.get("RANK", "0")), world


def wrap(model: torch.nn.Module, args, device: torch.device):
    """The data-parallel model and its optimizer: DDP (ZeRO 0), DDP with a sharded optimizer
    state (ZeRO 1, PyTorch's ZeroRedundancyOptimizer), or FSDP2 (ZeRO 2 keeps parameters
    gathered after the forward pass, ZeRO 3 reshards them)."""
    model = model.to(device)
    on = dist.is_initialized()
    if mode(args) == "fsdp":
        from torch.distributed.fsdp import fully_shard

        if on:
            fully_shard(model, reshard_after_forward=args.zero >= 3)
        return model, torch.optim.AdamW(model.parameters(), lr=args.lr)
    if on:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device] if device.type == "cuda" else None
        )
    if args.zero == 1 and on:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return model, ZeroRedundancyOptimizer(
            model.parameters(), optimizer_class=torch.optim.AdamW, lr=args.lr
        )
    return model, torch.optim.AdamW(model.parameters(), lr=args.lr)


def mode(args) -> str:
    """fsdp or ddp, as :func:`wrap` chooses."""
    return "fsdp" if args.dist == "fsdp" or args.zero >= 2 else "ddp"


def _no_sync(model, last: bool):
    """Skip the gradient reduction on all but the last microbatch of a step."""
    import contextlib

    if last:
        return contextlib.nullcontext()
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return model.no_sync()
    return contextlib.nullcontext()  # FSDP2: train() sets set_requires_gradient_sync


def train(model, optimizer, batches, loss_fn, args, device: torch.device) -> list[float]:
    """Run ``args.steps`` optimizer steps; returns each step's wall time in seconds."""
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = AMP.get(args.precision)
    scaler = torch.amp.GradScaler("cuda") if args.precision == "fp16" and device.type == "cuda" else None
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        for k in range(args.accumulation):
            last = k == args.accumulation - 1
            if hasattr(model, "set_requires_gradient_sync"):
                model.set_requires_gradient_sync(last)
            inputs, targets = batches()
            with _no_sync(model, last), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = loss_fn(model, inputs, targets) / args.accumulation
            (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def log_row(args, times: list[float], world: int, seq_len: int | None, framework: str, **extra) -> dict:
    """The measurement row of this run (median step time after the warm-up steps), appended to
    ``args.log_csv`` by rank 0."""
    kept = times[args.warmup :] or times
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    gpu = torch.cuda.is_available()
    row = {c: "" for c in COLUMNS}
    row.update(
        source=f"local-{args.net}",
        net=args.net,
        device=args.device_key
        if gpu and args.device_key
        else ("cpu" if not gpu else torch.cuda.get_device_name()),
        precision=args.precision,
        gpus=world,
        gpus_per_node=per_node,
        network=args.network if world > per_node else "",
        batch_per_gpu=args.batch,
        scheme="ring",
        metric="iteration_ms",
        value=f"{statistics.median(kept) * 1e3:.3f}",
        framework=f"PyTorch {torch.__version__} {framework}",
        data="synthetic",
        seq_len=seq_len or "",
        accumulation=args.accumulation,
        zero=args.zero,
        date=datetime.date.today().isoformat(),
        notes=f"median of {len(kept)} of {len(times)} steps",
    )
    row.update(extra)
    rank = dist.get_rank() if dist.is_initialized() else 0
    if args.log_csv and rank == 0:
        new = not os.path.exists(args.log_csv) or os.path.getsize(args.log_csv) == 0
        with open(args.log_csv, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            if new:
                writer.writeheader()
            writer.writerow(row)
    return row


def finish() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
