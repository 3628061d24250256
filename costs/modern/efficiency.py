"""Efficiency parameters of the ``modern`` rule set as one value object.

The modern model (see :mod:`costs.modern.evaluator`) turns datasheet peaks into achievable rates with
these parameters. Their defaults are data (``configs/efficiencies.toml``, loaded by the
catalog); here they are only arrays aligned with a :class:`~costs.hardware.DeviceTable` and a
:class:`~costs.hardware.LinkTable`, so a calibration step can vary them.

Parameters (units SI):

==================  ========  ==============================================================
name                shape     meaning
==================  ========  ==============================================================
gemm                (D, P)    achieved fraction of the precision's peak in GEMM/convolution
                              (fp32 runs on the non-tensor fp32 peak, tf32/fp16/bf16 on the
                              tensor peaks)
vector              (D,)      achieved fraction of the fp32 peak in elementwise arithmetic
memory              (D,)      achieved fraction of the datasheet memory bandwidth
link                (N,)      achieved fraction of a link's per-direction bandwidth (NCCL
                              bus bandwidth over the link's peak)
kernel_min_s        scalar    shortest GPU time of one kernel (s)
host_per_kernel_s   scalar    host (framework + launch) time to dispatch one kernel (s)
iteration_s         scalar    framework time per iteration outside the kernels (s)
multiplier          (D, P)    calibration multiplier on a (device, precision)'s GPU time
winograd            (D,)      effective FLOP reduction of cuDNN's Winograd algorithm on 3x3
                              stride-1 convolutions (fp32, and fp16 without tensor cores);
                              1 = none, 2.25 = F(2x2,3x3), 4 = F(4x4,3x3) (Lavin & Gray 2016)
attention           (D,)      fused (flash) attention's matmul rate relative to the GEMM rate
                              of the same device and precision; 1 = as fast as a large GEMM
straggler_cv        scalar    coefficient of variation of one GPU's step time; a synchronous
                              step waits for the slowest of its data-parallel GPUs
                              (:func:`costs.comm.overlap.straggler_wait`); 0 = no jitter
overlap_slowdown    scalar    fraction of the hidden (overlapped) gradient AllReduce time the
                              backward loses to the NCCL kernels running beside it (they take
                              SMs and memory bandwidth); 0 = free overlap
==================  ========  ==============================================================

:meth:`Efficiency.to_vector` lists them as one flat vector with names and bounds;
:meth:`Efficiency.from_vector` rebuilds the object. :meth:`Efficiency.ideal` is the pure
roofline (every fraction 1, no overheads): the bound the cited defaults are measured against.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from costs.hardware import PRECISIONS, DeviceTable, LinkTable

# Bounds used by calibration: fractions stay in (0, 1]; overheads in [0, a generous maximum].
_FRACTION = (0.01, 1.0)
_BOUNDS = {
    "gemm": _FRACTION,
    "vector": _FRACTION,
    "memory": _FRACTION,
    "link": _FRACTION,
    "kernel_min_s": (0.0, 1e-4),
    "host_per_kernel_s": (0.0, 2e-4),
    "iteration_s": (0.0, 0.1),
    "multiplier": (0.2, 5.0),
    # Winograd never slows a layer (cuDNN would pick another algorithm) and reduces the
    # multiplications at most 4x (F(4x4,3x3): 144 / 36; Lavin & Gray, arXiv:1509.09308).
    "winograd": (1.0, 4.0),
    "attention": (0.05, 1.5),
    # a GPU's step time varies by at most a fifth of its mean; overlap at worst costs as much as
    # the communication it hides (no overlap)
    "straggler_cv": (0.0, 0.2),
    "overlap_slowdown": (0.0, 1.0),
}
_SCALARS = ("kernel_min_s", "host_per_kernel_s", "iteration_s", "straggler_cv", "overlap_slowdown")


@dataclass(frozen=True)
class Efficiency:
    """Achievable-rate parameters; arrays indexed like the device and link tables."""

    devices: tuple[str, ...]
    links: tuple[str, ...]
    gemm: np.ndarray = field(repr=False)  # (D, P)
    vector: np.ndarray = field(repr=False)  # (D,)
    memory: np.ndarray = field(repr=False)  # (D,)
    link: np.ndarray = field(repr=False)  # (N,)
    kernel_min_s: float = 0.0
    host_per_kernel_s: float = 0.0
    iteration_s: float = 0.0
    multiplier: np.ndarray | None = field(default=None, repr=False)  # (D, P), None = ones
    winograd: np.ndarray | None = field(default=None, repr=False)  # (D,), None = ones (no Winograd)
    attention: np.ndarray | None = field(default=None, repr=False)  # (D,), None = ones (GEMM rate)
    straggler_cv: float = 0.0
    overlap_slowdown: float = 0.0

    def __post_init__(self) -> None:
        d, n = len(self.devices), len(self.links)
        shapes = {"gemm": (d, len(PRECISIONS)), "vector": (d,), "memory": (d,), "link": (n,)}
        for name, shape in shapes.items():
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise ValueError(f"efficiency '{name}' has shape {value.shape}, expected {shape}")
            object.__setattr__(self, name, value)
        mult = np.ones((d, len(PRECISIONS))) if self.multiplier is None else self.multiplier
        object.__setattr__(self, "multiplier", np.asarray(mult, dtype=float).reshape(d, len(PRECISIONS)))
        for name in ("winograd", "attention"):
            value = getattr(self, name)
            object.__setattr__(
                self, name, np.asarray(np.ones(d) if value is None else value, dtype=float).reshape(d)
            )

    @classmethod
    def ideal(cls, devices: DeviceTable, links: LinkTable) -> Efficiency:
        """The pure roofline: datasheet peaks and bandwidths reached, no overheads, direct
        convolution (no Winograd)."""
        d, n = len(devices.names), len(links.names)
        return cls(
            devices.names,
            links.names,
            np.ones((d, len(PRECISIONS))),
            np.ones(d),
            np.ones(d),
            np.ones(n),
        )

    def with_multiplier(self, device: int, precision: int, value: float) -> Efficiency:
        """A copy whose (device, precision) GPU time is scaled by ``value`` (cheap: one cell)."""
        mult = self.multiplier.copy()
        mult[device, precision] = value
        return replace(self, multiplier=mult)

    def names(self) -> list[str]:
        """Flat parameter names, in :meth:`to_vector` order, e.g. ``gemm[H100_SXM,bf16]``."""
        out: list[str] = []
        for f in _vector_fields():
            if f in _SCALARS:
                out.append(f)
            elif f in ("gemm", "multiplier"):
                out += [f"{f}[{d},{p}]" for d in self.devices for p in PRECISIONS]
            elif f == "link":
                out += [f"link[{x}]" for x in self.links]
            else:
                out += [f"{f}[{d}]" for d in self.devices]
        return out

    def to_vector(self) -> tuple[np.ndarray, list[str], np.ndarray]:
        """(values, names, bounds (n, 2)): every parameter as one flat float vector."""
        parts = [np.atleast_1d(np.asarray(getattr(self, f), dtype=float)).ravel() for f in _vector_fields()]
        values = np.concatenate(parts)
        bounds = np.concatenate(
            [np.tile(_BOUNDS[f], (p.size, 1)) for f, p in zip(_vector_fields(), parts)], axis=0
        )
        return values, self.names(), bounds

    def from_vector(self, values) -> Efficiency:
        """A copy with every parameter taken from a vector laid out as :meth:`to_vector`."""
        values = np.asarray(values, dtype=float)
        out, i = {}, 0
        for f in _vector_fields():
            current = np.asarray(getattr(self, f), dtype=float)
            size = max(current.size, 1)
            chunk = values[i : i + size]
            out[f] = float(chunk[0]) if f in _SCALARS else chunk.reshape(current.shape)
            i += size
        if i != values.size:
            raise ValueError(f"expected {i} efficiency values, got {values.size}")
        return replace(self, **out)


def _vector_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Efficiency) if f.name not in ("devices", "links"))
