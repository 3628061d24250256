"""Achievable peaks of the local device (imports torch): dense matmul FLOP/s per precision and
memory bandwidth from a large device-to-device copy (bytes read + written), as the reference
loop (benchmarks/torch_reference_loop.py) measures them. CPU sizes are small, GPU sizes large
enough to fill the device (8192^3 matmuls, a 2 GiB copy).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.profile import lazy


def _defined() -> dict:
    """This module's names, defined on first use: PyTorch, the optional extra of `planner
    profile`, is imported here and not when planner starts."""
    import torch

    from planner.profile.timing import Clock

    _DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

    @dataclass(frozen=True)
    class Peak:
        kind: str  # matmul_tflops | copy_gbs
        precision: str  # empty for the copy
        value: float
        size: str  # what was run, e.g. "8192^3" or "2.0 GiB"

    def _timed(clock: Clock, fn, reps: int) -> float:
        for _ in range(2):
            fn()
        clock.sync()
        a = clock.mark()
        for _ in range(reps):
            fn()
        b = clock.mark()
        clock.sync()
        return clock.seconds(a, b) / reps

    def matmul(device: torch.device, precision: str, m: int) -> Peak:
        """TFLOP/s of an m x m x m matmul (2 m^3 FLOPs) in ``precision``."""
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        a = torch.randn(m, m, device=device, dtype=_DTYPES[precision])
        b = torch.randn(m, m, device=device, dtype=_DTYPES[precision])
        sec = _timed(Clock(device), lambda: a @ b, 10 if device.type == "cuda" else 3)
        return Peak("matmul_tflops", precision, 2.0 * m**3 / sec / 1e12, f"{m}^3")

    def copy(device: torch.device, nbytes: int) -> Peak:
        """GB/s (read + write) of a device-to-device copy of ``nbytes``."""
        x = torch.empty(nbytes, dtype=torch.uint8, device=device)
        y = torch.empty_like(x)
        sec = _timed(Clock(device), lambda: y.copy_(x), 10)
        return Peak("copy_gbs", "", 2.0 * nbytes / sec / 1e9, f"{nbytes / 2**30:.2f} GiB")

    def measure(device: torch.device, precisions=("fp32", "tf32", "bf16", "fp16")) -> list[Peak]:
        big = device.type == "cuda"
        out = [matmul(device, p, 8192 if big else 512) for p in precisions]
        out.append(copy(device, 2 * 2**30 if big else 64 * 2**20))
        torch.backends.cuda.matmul.allow_tf32 = False
        return out

    return locals()


_defined, __getattr__ = lazy.names(_defined)
