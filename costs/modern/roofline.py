"""Per-layer work of the ``modern`` rule set: FLOPs by operation class, bytes and kernels.

Every layer that costs time on a GPU is counted, per phase (forward, backward-data,
backward-weights), as affine functions of the batch ``n`` like PALEO's terms, but split by
what limits it on a real GPU (Williams, Waterman, Patterson, "Roofline", CACM 2009):

- ``tc``     GEMM/convolution FLOPs per sample: tensor cores in tf32/fp16/bf16, the fp32 peak
             in fp32 (cuDNN/cuBLAS implicit GEMM; 2 FLOPs per multiply-add);
- ``vec``    elementwise FLOPs per sample (fp32 CUDA-core rate);
- ``act``    elements read + written at the activation element size (4 B fp32, 2 B mixed);
             ``act_a`` is the per-step part (weights read by a GEMM, weight gradients written);
- ``fixed``  bytes per sample whose size does not follow the precision: the loss in fp32
             (autocast runs softmax / cross-entropy in fp32), dropout's 1-byte mask, the fp32
             input batch;
- ``mixed``  bytes per step only under mixed precision: autocast casts each fp32 weight to a
             16-bit copy in the forward (read 4 B, write 2 B) and the 16-bit weight gradient
             back to the fp32 ``.grad`` (read 2 B, write 4 B) (PyTorch AMP; Micikevicius et al.
             2018 keep fp32 master weights the same way);
- ``kernels`` / ``mixed_kernels``  CUDA kernels launched (the cast kernels only when mixed).

Each convolution / InnerProduct phase also carries its GEMM's shape (``gm_n`` x batch +
``gm_0`` rows, ``gn`` columns; :mod:`costs.modern.tiling`), whether its tiles run in waves over the SMs
(``waves``: not for backward-weights, which cuDNN and cuBLAS split along its long K = batch x
pixels, the split-K of CUTLASS's ``GemmSplitKParallel``) and whether cuDNN's Winograd algorithm
applies (``wino``: 3x3 stride-1 convolutions, not the one reading the image, which Gray & Koster
leave to direct convolution; https://ai.intel.com/winograd-3/ (2016-07)).

Activations are not layers in PALEO's specs: a ReLU is implied after every Convolution,
Deconvolution and InnerProduct (after its BatchNorm when one follows), and after a residual
Elementwise sum instead of before it, unless an explicit activation or Softmax follows. A
convolution not followed by BatchNorm adds its bias in a separate kernel (PyTorch's cuDNN path);
InnerProduct fuses it into the GEMM (addmm). Per-layer traffic (elements per sample):

==============  ==========================  ============================  =====================
layer           forward                     backward-data                 backward-weights
==============  ==========================  ============================  =====================
conv / fc       read x, w; write y          read dy, w; write dx          read x, dy; write dw
bias (conv)     read y, write y             -                             read dy
activation      read x, write y             read y, dy; write dx          -
BatchNorm       read x twice (statistics,   read x, dy; write dx          read x, dy (dgamma,
                normalise), write y                                       dbeta reductions)
Elementwise     read k inputs, write y      gradient sum at the fork:     -
                                            read 2, write 1
pooling         read x, write y             read dy, write dx             -
Concatenate     read inputs, write y        - (gradients are views)       -
Softmax + loss  fp32: read, write, read     fp32: read, write             -
Dropout         read x, write y, mask       read dy, mask; write dx       -
Input           read the fp32 batch, write  -                             -
                it at activation size
Reshape         - (a view)                  -                             -
==============  ==========================  ============================  =====================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costs.modern import tiling
from costs.specs import transformer, vision
from costs.specs.graph import Net, ShapedLayer
from costs.specs.layers import PHASES
from costs.specs.nodes import prod

FWD, BWD_DATA, BWD_W = range(len(PHASES))
_WEIGHTED = ("Convolution", "Deconvolution", "InnerProduct")
_ACTIVATIONS = ("ReLU", "Sigmoid", "Tanh")
_CAST_BYTES = 6.0  # one cast reads 4 B and writes 2 B (or reads 2 B and writes 4 B)
_FIELDS = ("tc", "vec", "act_a", "act_b", "fixed", "mixed", "kernels", "mixed_kernels")
_SHAPE = ("gm_n", "gm_0", "gn", "waves", "wino")  # GEMM shape per layer and phase


@dataclass(frozen=True)
class ModernTerms:
    """(L, 3) arrays per layer and phase; ``*_b``/``tc``/``vec``/``fixed`` are per sample."""

    tc: np.ndarray
    vec: np.ndarray
    act_a: np.ndarray
    act_b: np.ndarray
    fixed: np.ndarray
    mixed: np.ndarray
    kernels: np.ndarray
    mixed_kernels: np.ndarray
    param_tensors: np.ndarray  # (L,) parameter tensors per layer (weight and bias: 2)
    gm_n: np.ndarray  # GEMM rows per sample (M = gm_n x batch + gm_0)
    gm_0: np.ndarray  # GEMM rows independent of the batch
    gn: np.ndarray  # GEMM columns; 0 where the phase runs no GEMM
    waves: np.ndarray  # 1 where the GEMM's tiles run in waves over the SMs
    wino: np.ndarray  # 1 where cuDNN's Winograd algorithm applies
    fp8: np.ndarray  # (L,) 1 where the layer's GEMMs run in FP8 under fp8 (linear and expert layers)
    attn: np.ndarray  # (L,) 1 where the layer is fused (flash) attention


class _Acc:
    """Accumulates one layer's terms."""

    def __init__(self) -> None:
        self.v = {f: np.zeros(len(PHASES)) for f in _FIELDS + _SHAPE}

    def add(self, phase: int, **kw) -> None:
        for k, x in kw.items():
            self.v[k][phase] += x


def _children(net: Net) -> dict[str, list[ShapedLayer]]:
    out: dict[str, list[ShapedLayer]] = {s.name: [] for s in net.layers}
    for s in net.layers:
        for p in s.layer.parents:
            if p in out:
                out[p].append(s)
    return out


def _after_bn(name: str, kids: dict) -> list[ShapedLayer]:
    """Consumers of a layer, looking through one BatchNorm."""
    out = []
    for c in kids[name]:
        out += kids[c.name] if c.type == "BatchNorm" else [c]
    return out


def _implied_activation(s: ShapedLayer, kids: dict) -> bool:
    nxt = _after_bn(s.name, kids)
    if not nxt or any(c.type in _ACTIVATIONS or c.type == "Softmax" for c in nxt):
        return False
    if s.type in _WEIGHTED:
        return not any(c.type == "Elementwise" for c in nxt)  # the ReLU follows the sum
    return s.type == "Elementwise"


def _gemm(acc: _Acc, s: ShapedLayer, params: int, kids: dict) -> None:
    x, y = sum(prod(i) for i in s.in_shapes), prod(s.out_shape)
    if s.type == "InnerProduct":
        bias, positions = s.out_shape[0], 1
    elif s.type == "Convolution":
        bias, positions = s.out_shape[2], s.out_shape[0] * s.out_shape[1]
    else:  # Deconvolution: the data gradient of a convolution over the output
        bias, positions = s.out_shape[2], s.in_shapes[0][0] * s.in_shapes[0][1]
    w = params - bias
    flops = 2.0 * w * positions
    _gemm_shape(acc, s, w)
    acc.add(FWD, tc=flops, act_b=x + y, act_a=w, kernels=1, mixed=_CAST_BYTES * w, mixed_kernels=1)
    if "data" not in s.layer.parents:
        acc.add(BWD_DATA, tc=flops, act_b=x + y, act_a=w, kernels=1)
    acc.add(BWD_W, tc=flops, act_b=x + y, act_a=w, kernels=1, mixed=_CAST_BYTES * w, mixed_kernels=1)
    followed_by_bn = any(c.type == "BatchNorm" for c in kids[s.name])
    if not followed_by_bn:
        if s.type != "InnerProduct":
            acc.add(FWD, act_b=2 * y, vec=y, kernels=1)
        acc.add(BWD_W, act_b=y, vec=y, kernels=1)


def _gemm_shape(acc: _Acc, s: ShapedLayer, w: int) -> None:
    """The implicit-GEMM shape of each phase (see :mod:`costs.modern.tiling`)."""
    if s.type == "InnerProduct":
        x, y = sum(prod(i) for i in s.in_shapes), prod(s.out_shape)
        rows = ((1, 0, y), (1, 0, x), (0, y, x))  # (M per sample, fixed M, N) per phase
    elif s.type == "Convolution":
        kh, kw, cin, cout = (int(v) for v in s.layer.spec["filter"])
        pin = s.in_shapes[0][0] * s.in_shapes[0][1]
        pout = s.out_shape[0] * s.out_shape[1]
        rows = ((pout, 0, cout), (pin, 0, cin), (0, cout, kh * kw * cin))
        strides = [int(v) for v in s.layer.spec.get("strides", [1, 1, 1, 1])]
        if (kh, kw) == (3, 3) and strides[1:3] == [1, 1] and "data" not in s.layer.parents:
            acc.add(FWD, wino=1)
            acc.add(BWD_DATA, wino=1)
            acc.add(BWD_W, wino=1)
    else:  # Deconvolution: left at full utilisation
        return
    for phase, (mn, m0, n) in enumerate(rows):
        acc.add(phase, gm_n=mn, gm_0=m0, gn=n, waves=1 if phase != BWD_W else 0)


def _elementwise_like(acc: _Acc, s: ShapedLayer) -> None:
    x, y = sum(prod(i) for i in s.in_shapes), prod(s.out_shape)
    t = s.type
    if t == "BatchNorm":
        acc.add(FWD, act_b=2 * x + y, vec=5 * x, kernels=2)
        acc.add(BWD_DATA, act_b=3 * x, vec=4 * x, kernels=1)
        acc.add(BWD_W, act_b=2 * x, vec=3 * x, kernels=1)
    elif t == "Elementwise":
        acc.add(FWD, act_b=x + y, vec=max(len(s.in_shapes) - 1, 1) * y, kernels=1)
        acc.add(BWD_DATA, act_b=3 * y, vec=y, kernels=1)
    elif t in ("Pooling", "AvgPool"):
        k = s.layer.spec.get("ksize", [1, 1, 1, 1])
        acc.add(FWD, act_b=x + y, vec=int(k[1]) * int(k[2]) * y, kernels=1)
        acc.add(BWD_DATA, act_b=x + y, vec=x, kernels=1)
    elif t == "Concatenate":
        acc.add(FWD, act_b=x + y, kernels=1)
    elif t == "Softmax":
        acc.add(FWD, fixed=12.0 * y, vec=4 * y, kernels=2)
        acc.add(BWD_DATA, fixed=8.0 * y, vec=y, kernels=2)
    elif t == "Dropout":
        acc.add(FWD, act_b=2 * x, fixed=x, vec=x, kernels=1)
        acc.add(BWD_DATA, act_b=2 * x, fixed=x, vec=x, kernels=1)
    elif t in _ACTIVATIONS or t == "Generic":
        acc.add(FWD, act_b=2 * x, vec=4 * x if t != "ReLU" else x, kernels=1)
        acc.add(BWD_DATA, act_b=3 * x, vec=x, kernels=1)
    elif t == "UpSampling2D":
        acc.add(FWD, act_b=x + y, kernels=1)
        acc.add(BWD_DATA, act_b=x + y, vec=x, kernels=1)
    elif t == "Input":
        acc.add(FWD, act_b=y, fixed=4.0 * y, kernels=1)
    # Reshape: a view, no kernel


def _transformer(acc: _Acc, s: ShapedLayer, costs=transformer.costs) -> None:
    """A transformer (or vision, :mod:`costs.specs.vision`) layer's counts as roofline terms;
    weights are cast to 16 bits for the forward and their gradients back to fp32, as for
    InnerProduct."""
    for name, c in costs(s).items():
        p = PHASES.index(name)
        acc.add(p, tc=c.tc, vec=c.vec, act_b=c.act, act_a=c.weights, fixed=c.fixed, kernels=c.kernels)
        if c.gemm is not None:
            acc.add(p, gm_n=c.gemm[0], gm_0=c.gemm[1], gn=c.gemm[2], waves=1 if p != BWD_W else 0)
        if c.weights and c.tc and p != BWD_DATA:
            acc.add(p, mixed=_CAST_BYTES * c.weights, mixed_kernels=1)


def build(net: Net, params: np.ndarray) -> ModernTerms:
    """The modern per-layer terms of ``net`` (``params`` per layer, PALEO's convention)."""
    kids = _children(net)
    rows = []
    tensors = np.zeros(len(net.layers))
    for i, s in enumerate(net.layers):
        acc = _Acc()
        if s.type in _WEIGHTED:
            _gemm(acc, s, int(params[i]), kids)
            tensors[i] = 2
        elif s.type in transformer.TYPES:
            _transformer(acc, s)
            tensors[i] = transformer.param_tensors(s)
        elif s.type in vision.TYPES:
            _transformer(acc, s, vision.costs)
            tensors[i] = vision.param_tensors(s)
        else:
            _elementwise_like(acc, s)
        if _implied_activation(s, kids):
            y = prod(s.out_shape)
            acc.add(FWD, act_b=2 * y, vec=y, kernels=1)
            acc.add(BWD_DATA, act_b=3 * y, vec=y, kernels=1)
        rows.append(acc.v)
    arrays = {
        f: np.array([r[f] for r in rows], dtype=float).reshape(len(rows), len(PHASES))
        for f in _FIELDS + _SHAPE
    }
    fp8 = np.array([s.type in transformer.FP8_TYPES for s in net.layers], dtype=float)
    attn = np.array([transformer.fused_attention(s) for s in net.layers], dtype=float)
    return ModernTerms(**arrays, param_tensors=tensors, fp8=fp8, attn=attn)


_CACHE: dict[int, tuple[Net, ModernTerms]] = {}


def terms(costs) -> ModernTerms:
    """The modern terms of a :class:`~costs.specs.coefficients.NetCosts` (built once per net)."""
    hit = _CACHE.get(id(costs.net))
    if hit is not None and hit[0] is costs.net:
        return hit[1]
    out = build(costs.net, costs.params)
    _CACHE[id(costs.net)] = (costs.net, out)
    return out


_UTIL: dict[tuple, tuple[ModernTerms, np.ndarray]] = {}
_UTIL_ENTRIES = 16  # a calibration re-scores the same (net, batches, SMs) for every trial


def _utilisation(t: ModernTerms, first: int, n: np.ndarray, sm: np.ndarray) -> np.ndarray:
    """Tile and wave utilisation (L - first, 3, U) of every GEMM phase; cached, since it
    depends only on the net, the batches and the SM counts, not on the efficiencies."""
    key = (id(t), first, n.tobytes(), sm.tobytes())
    hit = _UTIL.get(key)
    if hit is not None and hit[0] is t:
        return hit[1]
    sl = slice(first, None)
    util = np.ones((t.gn.shape[0] - first, t.gn.shape[1], n.shape[-1]))
    li, pi = np.nonzero(t.gn[sl] > 0)  # only the GEMM phases (about a third of the rows)
    rows = t.gm_n[sl][li, pi, None] * n[0, 0] + t.gm_0[sl][li, pi, None]
    util[li, pi] = tiling.utilisation(rows, t.gn[sl][li, pi, None], t.waves[sl][li, pi, None], sm[None, :])
    if len(_UTIL) >= _UTIL_ENTRIES:
        _UTIL.pop(next(iter(_UTIL)))
    _UTIL[key] = (t, util)
    return util


def phase_times(
    t: ModernTerms,
    first: int,
    n,
    peak_tc,
    peak_vec,
    bw,
    elem,
    mixed,
    kernel_min,
    sm=None,
    winograd=None,
    peak_tc_other=None,
    attention=None,
):
    """GPU seconds per layer (from ``first``) and phase, (L - first, 3, U), for U combinations.

    Each layer-phase is a roofline: the larger of its FLOPs at the achievable compute rates
    and its bytes at the achievable bandwidth, and at least ``kernel_min`` per kernel it
    launches. All rate arrays are (U,); ``mixed`` is a (U,) 0/1 array. GEMM FLOPs run at
    ``peak_tc`` times the tile and wave utilisation of their shape on ``sm`` SMs (U,; None or
    0: no wave quantization), divided by ``winograd`` (U,; None: 1) where Winograd applies.
    ``peak_tc_other`` (U,; None: ``peak_tc``) is the GEMM rate of the layers outside ``t.fp8``:
    under fp8 only the linear layers run at the FP8 rate, attention and the LM head at bf16's.
    ``attention`` (U,; None: 1) scales the rate of the fused attention layers (``t.attn``).
    """
    sl = slice(first, None)
    if peak_tc_other is not None:
        peak_tc = np.where(t.fp8[sl, None, None] > 0, peak_tc, peak_tc_other)
    if attention is not None and t.attn[sl].any():  # CNNs: no fused attention layer
        peak_tc = peak_tc * np.where(t.attn[sl, None, None] > 0, attention, 1.0)
    n = n[None, None, :]
    sm = np.zeros(n.shape[-1]) if sm is None else np.asarray(sm, dtype=float)
    util = _utilisation(t, first, n, sm)
    if winograd is not None:
        util = util * np.where(t.wino[sl, :, None] > 0, winograd, 1.0)
    comp = t.tc[sl, :, None] * n / (peak_tc * util) + t.vec[sl, :, None] * n / peak_vec
    nbytes = (t.act_a[sl, :, None] + t.act_b[sl, :, None] * n) * elem + t.fixed[sl, :, None] * n
    nbytes = nbytes + t.mixed[sl, :, None] * mixed
    kernels = t.kernels[sl, :, None] + t.mixed_kernels[sl, :, None] * mixed
    gpu = np.maximum(np.maximum(comp, nbytes / bw), kernels * kernel_min)
    return np.where(kernels > 0, gpu, 0.0), kernels


def implied_activations(net: Net) -> frozenset[str]:
    """Names of the layers whose output the modern rules follow by an implied ReLU (counted
    on that layer; see the module docstring), for builders that run the net for real."""
    kids = _children(net)
    return frozenset(s.name for s in net.layers if _implied_activation(s, kids))
