"""Convolution geometry and PALEO's GEMM and FFT cost models (paleo-model.md §A.4).

All functions work on plain integers for one batch size ``n``; :mod:`costs.specs.coefficients`
evaluates them at two batch sizes to get costs as affine functions of the batch. A cost is a
:class:`Work`: a list of FLOP counts and a list of byte counts, each converted to time
separately (PALEO floors every term at one clock cycle on its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from costs.errors import SpecError

F32 = 4  # bytes per element: PALEO costs every tensor in fp32 (§A.3)
C64 = 8  # bytes per complex element in the FFT model (§A.4.5)


@dataclass
class Work:
    """FLOP terms and memory-traffic terms (bytes) of one layer phase."""

    flops: list[float] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class ConvGeom:
    """One convolution: input H x W x C, kernel kh x kw, C -> K channels, stride, padding."""

    h: int
    w: int
    c: int
    kh: int
    kw: int
    k: int
    sh: int
    sw: int
    oh: int
    ow: int
    ph: int
    pw: int
    valid: bool


def conv_geometry(in_shape, filt, strides, padding, tf_same: bool) -> ConvGeom:
    """Output size and per-side padding of a convolution (§A.4.1)."""
    h, w, c = in_shape
    kh, kw, cin, k = (int(v) for v in filt)
    if cin not in (-1, c):
        raise SpecError(f"filter expects {cin} input channels but the input has {c}")
    sh, sw = int(strides[1]), int(strides[2])
    if padding == "VALID":
        oh, ow = math.ceil((h - kh + 1) / sh), math.ceil((w - kw + 1) / sw)
        return ConvGeom(h, w, c, kh, kw, k, sh, sw, oh, ow, 0, 0, True)
    if padding == "SAME":
        oh, ow = math.ceil(h / sh), math.ceil(w / sw)
        if tf_same:  # TensorFlow's rule (paleo-2018)
            ph, pw = ((oh - 1) * sh + kh - h) // 2, ((ow - 1) * sw + kw - w) // 2
        else:  # paleo-2016's rule: wrong for strided convolutions, kept on purpose
            ph, pw = ((h - 1) * sh + kh - h) // 2, ((w - 1) * sw + kw - w) // 2
        return ConvGeom(h, w, c, kh, kw, k, sh, sw, oh, ow, ph, pw, False)
    if isinstance(padding, list) and len(padding) == 2:
        ph, pw = int(padding[0]), int(padding[1])
        oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        return ConvGeom(h, w, c, kh, kw, k, sh, sw, oh, ow, ph, pw, False)
    raise SpecError(f"padding must be 'VALID', 'SAME' or [ph, pw], not {padding!r}")


def gemm(
    n: int,
    h: int,
    w: int,
    c: int,
    kh: int,
    kw: int,
    k: int,
    oh: int,
    ow: int,
    ph: int,
    pw: int,
    rules,
    *,
    holes_in: float = 0.0,
    holes_filter: float = 0.0,
) -> Work:
    """PALEO's GEMM convolution: one FLOP term and three memory terms (§A.4.2)."""
    flops = 2.0 * kh * kw * c * oh * ow * k * n * (1.0 - holes_filter)
    if holes_in > 0 and rules.count_input_holes:
        flops += 2.0 * n * h * w * c * (1.0 - holes_in)
    if rules.read_padded_input:
        read_in = n * (h + 2 * ph) * (w + 2 * pw) * c * F32
    else:
        read_in = n * h * w * c * F32
    filt = kh * kw * c * k * (1.0 - holes_filter) * F32
    out = n * oh * ow * k * F32
    return Work([flops], [float(read_in), filt, float(out)])


def _fft_flops(tile: int, half: bool) -> float:
    """FLOPs of one 2-D FFT of a tile x tile block: 10 T^2 log2 T, halved for real input."""
    t = 2 ** math.ceil(math.log2(max(tile, 1))) if tile > 1 else 1
    f = 10.0 * t * t * math.log2(t) if t > 1 else 0.0
    return f / 2 if half else f


def fft(n: int, g: ConvGeom, *, ph: int | None = None, pw: int | None = None) -> Work:
    """PALEO's approximate FFT convolution model (§A.4.5), tiled above 64 x 64."""
    ph = g.ph if ph is None else ph
    pw = g.pw if pw is None else pw
    padded_h, padded_w = max(g.h + 2 * ph, g.kh), max(g.w + 2 * pw, g.kw)
    if max(padded_h, padded_w) > 64:  # FFT_TILING: 32 x 32 tiles
        tiles, size, tile = math.ceil(g.h / 32) * math.ceil(g.w / 32), 32 * 32, 32
    else:
        tiles, size, tile = 1, padded_h * padded_w, max(padded_h, padded_w)
    one_d = g.kh == 1 or g.kw == 1
    f_r2c = _fft_flops(tile, half=True)
    f_filter = f_r2c / 2 if one_d else f_r2c
    f_c2r = _fft_flops(tile, half=False)
    flops = [
        tiles * n * g.c * f_r2c,
        g.c * g.k * f_filter,
        tiles * 4.0 * n * g.c * g.k * size,
        tiles * n * g.k * f_c2r,
    ]
    filter_size = tile if one_d else size
    nbytes = [
        n * g.c * g.h * g.w * F32 + tiles * n * g.c * size * C64,
        g.kh * g.kw * g.c * g.k * F32 + g.c * g.k * filter_size * C64,
        tiles * (n * g.c * size + g.c * g.k * filter_size) * C64,
        tiles * n * g.k * size * C64,
        n * g.k * size * C64 + n * g.oh * g.ow * g.k * F32,
    ]
    return Work(flops, nbytes)


def fft_applies(kh: int, kw: int, stride: int) -> bool:
    """FFT convolution needs unit stride; 1x1 filters always run as GEMM (§A.4.4)."""
    return stride == 1 and not (kh == 1 and kw == 1)


@dataclass(frozen=True)
class GradGeom:
    """The two "dummy" convolutions PALEO costs the backward pass with (§A.4.3)."""

    exp_h: int
    exp_w: int
    pad_h: int
    pad_w: int
    holes: float
    filt_pad_h: int
    filt_pad_w: int


def grad_geometry(g: ConvGeom, rules, layer: str = "") -> GradGeom:
    """Zero-inserted output gradient size, gradient padding and hole fraction (§A.4.3)."""

    def axis(size: int, k: int, s: int, o: int, p: int) -> tuple[int, int]:
        expanded = (o - 1) * s + 1
        padded_out = size + k - 1
        before = k - 1 - p
        after = padded_out - expanded - before
        if rules.symmetric_odd_fix:
            if abs(before - after) == 1:
                expanded += 1
            return expanded, min(before, after)
        if before == after - 1:
            expanded += 1
        return expanded, before

    exp_h, pad_h = axis(g.h, g.kh, g.sh, g.oh, g.ph)
    exp_w, pad_w = axis(g.w, g.kw, g.sw, g.ow, g.pw)
    if exp_h + 2 * pad_h - g.kh + 1 != g.h or exp_w + 2 * pad_w - g.kw + 1 != g.w:
        raise SpecError(
            f"rules {rules.name} cannot cost the data gradient of this convolution "
            f"(stride {g.sh}x{g.sw} with its padding); try --rules paleo-2018",
            layer=layer or None,
        )
    holes = (exp_h * exp_w - g.oh * g.ow) / (exp_h * exp_w)
    if g.valid and rules.valid_filter_grad:
        fph, fpw = 0, 0
    elif rules.valid_filter_grad:
        fph, fpw = pad_h, pad_w
    else:
        fph, fpw = g.ph, g.pw
    return GradGeom(exp_h, exp_w, pad_h, pad_w, holes, fph, fpw)


def conv_forward(n: int, g: ConvGeom, rules, algorithm: str) -> Work:
    if algorithm == "fft":
        return fft(n, g)
    return gemm(n, g.h, g.w, g.c, g.kh, g.kw, g.k, g.oh, g.ow, g.ph, g.pw, rules)


def _gemm_grad(n: int, g: ConvGeom, reads: tuple[float, float], write: float) -> Work:
    """A gradient as one GEMM with the forward's FLOPs: two operands read, one written."""
    flops = 2.0 * g.kh * g.kw * g.c * g.oh * g.ow * g.k * n
    return Work([flops], [float(reads[0]), float(reads[1]), float(write)])


def conv_backward_data(n: int, g: ConvGeom, gg: GradGeom, rules, algorithm: str) -> Work:
    """Data gradient: a stride-1 convolution of the zero-inserted output gradient (PALEO), or
    dX = dY . W^T as a GEMM with col2im (rules with ``gemm_backward``)."""
    if rules.gemm_backward and algorithm != "fft":
        dy, w, dx = n * g.oh * g.ow * g.k * F32, g.kh * g.kw * g.c * g.k * F32, n * g.h * g.w * g.c * F32
        return _gemm_grad(n, g, (dy, w), dx)
    if algorithm == "fft":
        dummy = ConvGeom(gg.exp_h, gg.exp_w, g.k, g.kh, g.kw, g.c, 1, 1, g.h, g.w, gg.pad_h, gg.pad_w, False)
        return fft(n, dummy)
    return gemm(
        n,
        gg.exp_h,
        gg.exp_w,
        g.k,
        g.kh,
        g.kw,
        g.c,
        g.h,
        g.w,
        gg.pad_h,
        gg.pad_w,
        rules,
        holes_in=gg.holes,
    )


def conv_backward_filter(n: int, g: ConvGeom, gg: GradGeom, rules, algorithm: str) -> Work:
    """Filter gradient: batch and channel axes swapped, the output gradient as the filter
    (PALEO), or dW = X^T . dY as a GEMM over im2col (rules with ``gemm_backward``)."""
    if rules.gemm_backward and algorithm != "fft":
        x, dy, dw = n * g.h * g.w * g.c * F32, n * g.oh * g.ow * g.k * F32, g.kh * g.kw * g.c * g.k * F32
        return _gemm_grad(n, g, (x, dy), dw)
    if algorithm == "fft":
        dummy = ConvGeom(
            g.h, g.w, n, gg.exp_h, gg.exp_w, g.k, 1, 1, g.kh, g.kw, gg.filt_pad_h, gg.filt_pad_w, False
        )
        return fft(g.c, dummy)
    return gemm(
        g.c,
        g.h,
        g.w,
        n,
        gg.exp_h,
        gg.exp_w,
        g.k,
        g.kh,
        g.kw,
        gg.filt_pad_h,
        gg.filt_pad_w,
        rules,
        holes_filter=gg.holes,
    )
