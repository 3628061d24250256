"""Layer types: output shapes, parameter counts and per-phase work, in one registry.

Each registered type is a :class:`LayerKind`. Its ``work`` gives, for one batch size ``n``,
the :class:`~costs.specs.conv.Work` of the three phases PALEO costs: ``fwd``, ``bwd_data`` and
``bwd_filter`` (paleo-model.md §A.4). Zero-cost types (concatenation, softmax, ...) have no
work: PALEO charges them only cross-device fetches (§A.4.6).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from costs.errors import SpecError
from costs.specs import conv, transformer, vision
from costs.specs.conv import F32, Work
from costs.specs.nodes import Layer, Shape, ShapedLayer, one_input, prod

PHASES = ("fwd", "bwd_data", "bwd_filter")
ALGORITHMS = ("gemm", "fft", "best")


@dataclass(frozen=True)
class LayerKind:
    """How one layer type is shaped and costed."""

    shape: Callable[[Layer, tuple[Shape, ...], object], Shape]
    params: Callable[[ShapedLayer], int] = lambda s: 0
    # work(shaped, n, rules, algorithm) -> {phase: Work}; algorithm is "gemm" or "fft"
    work: Callable[[ShapedLayer, int, object, str], dict[str, Work]] | None = None
    # whether the type has an FFT variant for some phase
    has_fft: bool = False


def _spatial(layer: Layer, in_shapes) -> Shape:
    shape = one_input(layer, in_shapes)
    if len(shape) != 3:
        raise SpecError(f"{layer.type} needs an H x W x C input, got {list(shape)}", layer=layer.name)
    return shape


def _split_channels(layer: Layer, k: int) -> int:
    """A ModelParallel copy holds 1/splits of the output channels (paleo-model.md §B.3)."""
    return k // layer.splits if layer.splits > 1 else k


# ---- Input -------------------------------------------------------------------------------


def _input_shape(layer, in_shapes, rules) -> Shape:
    tensor = layer.spec["tensor"]
    if not isinstance(tensor, list) or len(tensor) < 2 or any(int(d) <= 0 for d in tensor):
        raise SpecError(f"'tensor' must be [N, H, W, C] of positive sizes, got {tensor!r}", layer=layer.name)
    return tuple(int(d) for d in tensor[1:])


# ---- Convolution -------------------------------------------------------------------------


def _conv_geom(s: ShapedLayer, rules) -> conv.ConvGeom:
    spec = s.layer.spec
    filt = list(spec["filter"])
    filt[3] = _split_channels(s.layer, int(filt[3]))
    try:
        return conv.conv_geometry(
            s.in_shapes[0],
            filt,
            spec.get("strides", [1, 1, 1, 1]),
            spec.get("padding", "SAME"),
            rules.tf_same_padding,
        )
    except SpecError as exc:
        raise SpecError(str(exc), layer=s.name) from None


def _conv_shape(layer, in_shapes, rules) -> Shape:
    shaped = ShapedLayer(layer, (_spatial(layer, in_shapes),), ())
    g = _conv_geom(shaped, rules)
    return (g.oh, g.ow, g.k)


def _conv_params(s: ShapedLayer) -> int:
    kh, kw, _, k = s.layer.spec["filter"]
    k = _split_channels(s.layer, int(k))
    c = s.in_shapes[0][2]
    return kh * kw * c * k + k  # PALEO counts a bias for every convolution (§A.5)


def _from_data(s: ShapedLayer) -> bool:
    """PALEO skips the data gradient of a layer fed by the input (§A.4.3)."""
    return "data" in s.layer.parents


def _conv_work(s: ShapedLayer, n: int, rules, algorithm: str) -> dict[str, Work]:
    g = _conv_geom(s, rules)
    gg = conv.grad_geometry(g, rules, s.name)
    # cuDNN's FFT algorithms need unit stride in every phase (the gradients of a strided
    # convolution are strided too), so the layer's own stride decides for all three phases.
    fwd_alg = grad_alg = algorithm if conv.fft_applies(g.kh, g.kw, g.sh * g.sw) else "gemm"
    work = {
        "fwd": conv.conv_forward(n, g, rules, fwd_alg),
        "bwd_filter": conv.conv_backward_filter(n, g, gg, rules, grad_alg),
    }
    if not _from_data(s):
        work["bwd_data"] = conv.conv_backward_data(n, g, gg, rules, grad_alg)
    return work


# ---- Deconvolution (transposed convolution) ------------------------------------------------


def _deconv_equivalent(s_layer: Layer, in_shape: Shape, rules) -> tuple[conv.ConvGeom, Shape]:
    """The convolution whose data gradient this deconvolution is: output -> input shape."""
    spec = s_layer.spec
    kh, kw, cin, cout = (int(v) for v in spec["filter"])
    cout = _split_channels(s_layer, cout)
    h, w, c = in_shape
    if cin not in (-1, c):
        raise SpecError(f"filter expects {cin} input channels but the input has {c}", layer=s_layer.name)
    strides = spec.get("strides", [1, 1, 1, 1])
    sh, sw = int(strides[1]), int(strides[2])
    padding = spec.get("padding", "SAME")
    if "output_shape" in spec:
        out_h, out_w = int(spec["output_shape"][1]), int(spec["output_shape"][2])
    elif padding == "SAME":
        out_h, out_w = h * sh, w * sw
    else:
        out_h, out_w = (h - 1) * sh + kh, (w - 1) * sw + kw
    g = conv.conv_geometry((out_h, out_w, cout), [kh, kw, cout, c], strides, padding, rules.tf_same_padding)
    if (g.oh, g.ow) != (h, w):
        raise SpecError(
            f"output_shape {out_h}x{out_w} does not invert to the input {h}x{w} "
            f"with a {kh}x{kw} stride-{sh} filter",
            layer=s_layer.name,
        )
    return g, (out_h, out_w, cout)


def _deconv_shape(layer, in_shapes, rules) -> Shape:
    return _deconv_equivalent(layer, _spatial(layer, in_shapes), rules)[1]


def _deconv_params(s: ShapedLayer) -> int:
    kh, kw, _, cout = (int(v) for v in s.layer.spec["filter"])
    cout = _split_channels(s.layer, cout)
    return kh * kw * s.in_shapes[0][2] * cout + cout


def _deconv_work(s: ShapedLayer, n: int, rules, algorithm: str) -> dict[str, Work]:
    """Forward = data gradient of the equivalent conv, and vice versa (paleo-model.md §A.4.6)."""
    g, _ = _deconv_equivalent(s.layer, s.in_shapes[0], rules)
    gg = conv.grad_geometry(g, rules, s.name)
    # As for convolutions: FFT only when the (equivalent) convolution has unit stride.
    alg = fwd_alg = algorithm if conv.fft_applies(g.kh, g.kw, g.sh * g.sw) else "gemm"
    work = {
        "fwd": conv.conv_backward_data(n, g, gg, rules, alg),
        "bwd_filter": conv.conv_backward_filter(n, g, gg, rules, alg),
    }
    if not _from_data(s):
        work["bwd_data"] = conv.conv_forward(n, g, rules, fwd_alg)
    return work


# ---- Inner product -------------------------------------------------------------------------


def _ip_shape(layer, in_shapes, rules) -> Shape:
    one_input(layer, in_shapes)
    m = int(layer.spec["num_outputs"])
    if m <= 0:
        raise SpecError("num_outputs must be positive", layer=layer.name)
    return (_split_channels(layer, m),)


def _ip_params(s: ShapedLayer) -> int:
    d, m = prod(s.in_shapes[0]), s.out_shape[0]
    return d * m + m


def _ip_work(s: ShapedLayer, n: int, rules, algorithm: str) -> dict[str, Work]:
    """Three GEMMs of X[n,D] . W[D,M]; each reads two operands and writes one (§A.4.6)."""
    d, m = prod(s.in_shapes[0]), s.out_shape[0]
    x, wt, y = float(n * d * F32), float(d * m * F32), float(n * m * F32)
    work = {
        "fwd": Work([2.0 * n * d * m], [x, wt, y]),
        "bwd_filter": Work([2.0 * d * n * m], [x, y, wt]),
    }
    if not _from_data(s):
        work["bwd_data"] = Work([2.0 * n * m * d], [y, wt, x])
    return work


# ---- Pooling, dropout ----------------------------------------------------------------------


def _pool_geom(layer, in_shape, rules) -> conv.ConvGeom:
    ksize = layer.spec["ksize"]
    c = in_shape[2]
    return conv.conv_geometry(
        in_shape,
        [ksize[1], ksize[2], c, c],
        layer.spec.get("strides", ksize),
        layer.spec.get("padding", "VALID"),
        rules.tf_same_padding,
    )


def _pool_shape(layer, in_shapes, rules) -> Shape:
    g = _pool_geom(layer, _spatial(layer, in_shapes), rules)
    return (g.oh, g.ow, g.c)


def _pool_work(s: ShapedLayer, n: int, rules, algorithm: str) -> dict[str, Work]:
    """Max and average pooling cost alike: 2 kh kw C oh ow N, read input, write output."""
    g = _pool_geom(s.layer, s.in_shapes[0], rules)
    one = Work(
        [2.0 * g.kh * g.kw * g.c * g.oh * g.ow * n],
        [float(n * prod(s.in_shapes[0]) * F32), float(n * prod(s.out_shape) * F32)],
    )
    return {"fwd": one, "bwd_data": Work(list(one.flops), list(one.bytes))}


def _dropout_work(s: ShapedLayer, n: int, rules, algorithm: str) -> dict[str, Work]:
    elems = n * prod(s.in_shapes[0])
    one = Work([float(elems)], [float(elems * F32), float(elems * F32)])
    return {"fwd": one, "bwd_data": Work(list(one.flops), list(one.bytes))}


# ---- Zero-cost types -----------------------------------------------------------------------


def _same_shape(layer, in_shapes, rules) -> Shape:
    return one_input(layer, in_shapes)


def _concat_shape(layer, in_shapes, rules) -> Shape:
    dim = int(layer.spec.get("dim", 3))
    axis = dim - 1  # dims count the batch axis; shapes here do not
    first = in_shapes[0]
    if not 0 <= axis < len(first):
        raise SpecError(f"concat dim {dim} is out of range for {list(first)}", layer=layer.name)
    for shape in in_shapes[1:]:
        if len(shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(shape, first)) if i != axis):
            raise SpecError(
                f"cannot concatenate shapes {[list(s) for s in in_shapes]} along dim {dim}",
                layer=layer.name,
            )
    return tuple(sum(s[axis] for s in in_shapes) if i == axis else d for i, d in enumerate(first))


def _elementwise_shape(layer, in_shapes, rules) -> Shape:
    first = in_shapes[0]
    if any(s != first for s in in_shapes[1:]):
        raise SpecError(
            f"elementwise inputs differ in shape: {[list(s) for s in in_shapes]}", layer=layer.name
        )
    return first


def _softmax_shape(layer, in_shapes, rules) -> Shape:
    one_input(layer, in_shapes)
    return (int(layer.spec.get("num_classes", prod(in_shapes[0]))),)


def _reshape_shape(layer, in_shapes, rules) -> Shape:
    shape = one_input(layer, in_shapes)
    target = [int(d) for d in layer.spec["output_shape"]][1:]
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = prod(shape) // known
    if prod(target) != prod(shape):
        raise SpecError(f"cannot reshape {list(shape)} to {target}", layer=layer.name)
    return tuple(target)


def _upsample_shape(layer, in_shapes, rules) -> Shape:
    h, w, c = _spatial(layer, in_shapes)
    k = layer.spec.get("ksize", [1, 2, 2, 1])
    return (h * int(k[1]), w * int(k[2]), c)


KINDS: dict[str, LayerKind] = {
    "Input": LayerKind(_input_shape),
    "Convolution": LayerKind(_conv_shape, _conv_params, _conv_work, has_fft=True),
    "Deconvolution": LayerKind(_deconv_shape, _deconv_params, _deconv_work, has_fft=True),
    "InnerProduct": LayerKind(_ip_shape, _ip_params, _ip_work),
    "Pooling": LayerKind(_pool_shape, work=_pool_work),
    "AvgPool": LayerKind(_pool_shape, work=_pool_work),
    "Dropout": LayerKind(_same_shape, work=_dropout_work),
    "Concatenate": LayerKind(_concat_shape),
    "Elementwise": LayerKind(_elementwise_shape),
    "Softmax": LayerKind(_softmax_shape),
    "Sigmoid": LayerKind(_same_shape),
    "Tanh": LayerKind(_same_shape),
    "ReLU": LayerKind(_same_shape),
    "BatchNorm": LayerKind(_same_shape),
    "Generic": LayerKind(_same_shape),
    "Reshape": LayerKind(_reshape_shape),
    "UpSampling2D": LayerKind(_upsample_shape),
    # Transformers (costs/specs/transformer.py): the planner and modern rule sets only.
    **{name: LayerKind(k.shape, k.params, transformer.work) for name, k in transformer.KINDS.items()},
    # Today's vision nets (costs/specs/vision.py): the planner and modern rule sets only.
    **{name: LayerKind(k.shape, k.params, vision.work) for name, k in vision.KINDS.items()},
}


def kind(layer_type: str) -> LayerKind:
    return KINDS[layer_type]


def output_shape(layer: Layer, in_shapes: tuple[Shape, ...], rules) -> Shape:
    """Per-sample output shape of ``layer`` given its parents' shapes."""
    return KINDS[layer.type].shape(layer, in_shapes, rules)


def params(s: ShapedLayer) -> int:
    """Trainable parameters of one layer (weights plus a bias, PALEO's convention)."""
    return KINDS[s.type].params(s)


def work(s: ShapedLayer, n: int, rules, algorithm: str = "gemm") -> dict[str, Work]:
    """Per-phase work of one layer at batch ``n`` with a "gemm" or "fft" convolution."""
    k = KINDS[s.type]
    if k.work is None:
        return {}
    return k.work(s, n, rules, algorithm if k.has_fft else "gemm")
