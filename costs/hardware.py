"""Devices and links as value objects (SI units) and as column arrays for vectorised scoring."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# fp8 is FP8 mixed precision as NVIDIA Transformer Engine trains transformers: the GEMMs of the
# linear layers (attention projections, MLP, experts) take FP8 inputs at the FP8 tensor-core
# peak, while attention itself, norms, the LM head, stored activations and communication stay
# bf16 and the master weights fp32 (Micikevicius et al., "FP8 Formats for Deep Learning",
# arXiv:2209.05433, 2022, §4; Transformer Engine's fp8_autocast covers te.Linear and its fused
# variants only). CNNs are not trained in it.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
# Bytes per element of activations, weights and gradients. TF32 stores fp32 values; under fp8
# they are bf16 (the FP8 casts feed the GEMMs only).
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 2}
FP8 = PRECISIONS.index("fp8")
FP16 = PRECISIONS.index("fp16")
BF16 = PRECISIONS.index("bf16")
# the same, indexed like PRECISIONS (plans carry a precision index)
ELEMENT_SIZE = np.array([ELEMENT_BYTES[p] for p in PRECISIONS], dtype=float)


@dataclass(frozen=True)
class Device:
    """One accelerator. ``peak_flops`` maps a precision to dense peak FLOP/s."""

    name: str
    peak_flops: dict[str, float] = field(hash=False)
    mem_bandwidth: float  # bytes/s, decimal (the catalog's GB/s x 1e9)
    clock_hz: float
    memory_bytes: float
    intra_link: str | None = None
    max_per_node: int = 8
    sm_count: int = 0  # streaming multiprocessors; 0 = not catalogued (no wave quantization)


@dataclass(frozen=True)
class Link:
    """One interconnect: per-direction bandwidth (bytes/s) and one-way latency (s)."""

    name: str
    bandwidth: float
    latency: float = 0.0


@dataclass(frozen=True)
class DeviceTable:
    """Devices as columns: index ``i`` in a plan's ``device`` array selects row ``i``."""

    names: tuple[str, ...]
    peak: np.ndarray  # (D, len(PRECISIONS)) FLOP/s, NaN where a precision is unsupported
    mem_bandwidth: np.ndarray  # (D,) bytes/s
    clock_hz: np.ndarray  # (D,)
    memory_bytes: np.ndarray  # (D,)
    sm_count: np.ndarray | None = None  # (D,) SMs, 0 = unknown; None = all unknown

    def __post_init__(self) -> None:
        sm = np.zeros(len(self.names)) if self.sm_count is None else self.sm_count
        object.__setattr__(self, "sm_count", np.asarray(sm, dtype=float).reshape(len(self.names)))

    @classmethod
    def of(cls, devices: list[Device] | tuple[Device, ...]) -> DeviceTable:
        peak = np.array(
            [[d.peak_flops.get(p, np.nan) for p in PRECISIONS] for d in devices], dtype=float
        ).reshape(len(devices), len(PRECISIONS))
        return cls(
            tuple(d.name for d in devices),
            peak,
            np.array([d.mem_bandwidth for d in devices], dtype=float),
            np.array([d.clock_hz for d in devices], dtype=float),
            np.array([d.memory_bytes for d in devices], dtype=float),
            np.array([d.sm_count for d in devices], dtype=float),
        )


@dataclass(frozen=True)
class LinkTable:
    """Links as columns: index ``i`` in a plan's link arrays selects row ``i``."""

    names: tuple[str, ...]
    bandwidth: np.ndarray  # (N,) bytes/s
    latency: np.ndarray  # (N,) s

    @classmethod
    def of(cls, links: list[Link] | tuple[Link, ...]) -> LinkTable:
        return cls(
            tuple(x.name for x in links),
            np.array([x.bandwidth for x in links], dtype=float),
            np.array([x.latency for x in links], dtype=float),
        )


# A device has fp16 tensor cores when its fp16 peak is at least this multiple of its fp32 peak:
# V100 8x, T4 8x; P100's 2x comes from packed fp16 on its CUDA cores, not tensor cores.
TENSOR_FP16_RATIO = 4.0


def auto_precision(peak: np.ndarray, device) -> np.ndarray:
    """Precision index per device index: bf16 mixed precision where the device supports bf16,
    else fp16 where it has fp16 tensor cores, else fp32. ``peak`` is DeviceTable.peak."""
    p = peak[np.asarray(device)]
    fp32, fp16, bf16 = (PRECISIONS.index(x) for x in ("fp32", "fp16", "bf16"))
    has_bf16 = np.isfinite(p[..., bf16])
    has_tc16 = np.isfinite(p[..., fp16]) & (p[..., fp16] >= TENSOR_FP16_RATIO * p[..., fp32])
    return np.where(has_bf16, bf16, np.where(has_tc16, fp16, fp32)).astype(np.int64)
