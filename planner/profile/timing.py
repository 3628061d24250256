"""Timed training steps (imports torch): forward, backward and optimizer step, each the median
over ``steps`` timed steps after ``warmup`` untimed ones (cuDNN autotuning, allocator warm-up).

On a GPU, CUDA events recorded on the stream around each phase (no synchronisation inside a
step); on the CPU, ``time.perf_counter`` (CPU kernels finish before they return). Mixed
precision is ``torch.autocast`` with fp32 master weights (fp16 with a gradient scaler), CNNs in
channels-last memory format, ``cudnn.benchmark`` on, as the reference loop in benchmarks/torch_reference_loop.py does.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from dataclasses import dataclass

from costs.specs.graph import Net
from planner.profile import lazy


def _defined() -> dict:
    """This module's names, defined on first use: PyTorch, the optional extra of `planner
    profile`, is imported here and not when planner starts."""
    import torch

    from planner.profile.builder import SpecModel, batch

    OPTIMIZERS = ("sgd", "momentum", "adam")
    OOM = "out of memory"

    class MemoryLimit(RuntimeError):
        """The tensors saved for the backward exceeded ``--max-memory-gb`` on the CPU."""

    class Clock:
        """Time marks: CUDA events on a GPU, perf_counter seconds on the CPU."""

        def __init__(self, device: torch.device):
            self.cuda = device.type == "cuda"

        def mark(self):
            if not self.cuda:
                return time.perf_counter()
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e

        def seconds(self, a, b) -> float:
            return a.elapsed_time(b) / 1e3 if self.cuda else b - a

        def sync(self) -> None:
            if self.cuda:
                torch.cuda.synchronize()

    @dataclass(frozen=True)
    class Options:
        precision: str = "fp32"
        optimizer: str = "momentum"
        steps: int = 10
        warmup: int = 3
        max_memory_gb: float | None = None

    @dataclass(frozen=True)
    class Step:
        """Median seconds of one batch size; ``status`` is "ok" or "out of memory"."""

        batch: int
        status: str
        forward: float = 0.0
        backward: float = 0.0
        optimizer: float = 0.0
        step: float = 0.0
        peak_memory_bytes: float = 0.0
        params: int = 0

    def autocast(device: torch.device, precision: str):
        """A context factory for the precision; sets TF32 for fp32 (off) and tf32 (on)."""
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        if precision in ("bf16", "fp16"):
            dtype = torch.bfloat16 if precision == "bf16" else torch.float16
            return lambda: torch.autocast(device.type, dtype=dtype)
        return contextlib.nullcontext

    def make_optimizer(name: str, params, device: torch.device):
        foreach = device.type == "cuda"
        if name == "adam":
            return torch.optim.Adam(params, lr=1e-4, foreach=foreach)
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9 if name == "momentum" else 0.0, foreach=foreach)

    def channels_last(net: Net, precision: str) -> bool:
        return "model" not in net.meta and precision in ("bf16", "fp16")

    def _saved_bytes_limit(limit_gb: float | None, device: torch.device):
        """On the CPU, stop a forward whose saved tensors pass the limit (a stand-in for a GPU's
        out-of-memory error); on a GPU the allocator's own limit applies instead."""
        if limit_gb is None or device.type == "cuda":
            return contextlib.nullcontext()
        total = [0]

        def pack(t):
            total[0] += t.numel() * t.element_size()
            if total[0] > limit_gb * 1e9:
                raise MemoryLimit(f"{OOM}: saved tensors exceed --max-memory-gb {limit_gb}")
            return t

        return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)

    def is_oom(exc: BaseException) -> bool:
        oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None), MemoryLimit) if t)
        if isinstance(exc, (MemoryError, *oom_types)):
            return True
        text = str(exc).lower()
        return isinstance(exc, RuntimeError) and (OOM in text or "can't allocate memory" in text)

    class Trainer:
        """The model, its optimizer and one batch on a device: ``step()`` runs one training step."""

        def __init__(self, net: Net, n: int, device: torch.device, opts: Options):
            self.device, self.opts = device, opts
            torch.backends.cudnn.benchmark = True  # autotuned convolutions (the warm-up steps pay)
            cl = channels_last(net, opts.precision)
            self.model = SpecModel(net).to(device)
            if cl:
                self.model = self.model.to(memory_format=torch.channels_last)
            self.model.train()
            self.opt = make_optimizer(opts.optimizer, self.model.parameters(), device)
            self.scaler = torch.amp.GradScaler(device.type, enabled=opts.precision == "fp16")
            self.ctx = autocast(device, opts.precision)
            self.x, self.y = batch(net, n, device, cl)
            self.clock = Clock(device)

        def step(self) -> tuple:
            """Four time marks: before forward, after forward, after backward, after the update."""
            c = self.clock
            m0 = c.mark()
            with self.ctx(), _saved_bytes_limit(self.opts.max_memory_gb, self.device):
                loss = self.model(self.x, self.y)
            m1 = c.mark()
            self.scaler.scale(loss).backward()
            m2 = c.mark()
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
            m3 = c.mark()
            return m0, m1, m2, m3

    def free(device: torch.device) -> None:
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

    def measure(net: Net, n: int, device: torch.device, opts: Options) -> Step:
        """Median phase times of ``opts.steps`` training steps at batch ``n``; an out-of-memory
        error (or the CPU's ``--max-memory-gb``) gives a Step with status "out of memory"."""
        trainer = None
        try:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            trainer = Trainer(net, n, device, opts)
            marks = [trainer.step() for _ in range(opts.warmup + opts.steps)][opts.warmup :]
            trainer.clock.sync()
            c = trainer.clock
            med = lambda i, j: statistics.median(c.seconds(m[i], m[j]) for m in marks)  # noqa: E731
            peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0.0
            params = sum(p.numel() for p in trainer.model.parameters())
            return Step(n, "ok", med(0, 1), med(1, 2), med(2, 3), med(0, 3), float(peak), params)
        except (RuntimeError, MemoryError) as exc:
            if not is_oom(exc):
                raise
            return Step(n, OOM)
        finally:
            del trainer
            free(device)

    return locals()


_defined, __getattr__ = lazy.names(_defined)
