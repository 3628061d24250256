"""Layer types of today's vision nets (EfficientNet, ConvNeXt, ViT, Swin): shapes, parameters, costs.

Feature maps are ``(H, W, C)`` per sample, token sequences ``(seq, d)`` as in
:mod:`costs.specs.transformer`, whose types (``Linear``, ``LayerNorm``, ``Attention``, ``GELU``,
``Add``) the token nets reuse. Every type states its work once, per phase and per sample, as a
:class:`~costs.specs.transformer.Cost`; the ``planner`` rules read it as fp32
:class:`~costs.specs.conv.Work` and the ``modern`` rules as roofline terms, so both count the
same FLOPs (2 per multiply-add; a weight GEMM's two gradients each cost its forward).

Parameters are those the module holds in PyTorch (torchvision's ``num_params`` convention):
a convolution carries a bias only when its spec says ``"bias": true``, a normalisation layer
its scale and shift. This differs on purpose from PALEO's convention of the older zoo specs
(a bias on every convolution, BatchNorm not counted), which those specs keep.

A depthwise convolution (one input channel per group) does too little work per weight for a
GEMM: its FLOPs are counted at the CUDA-core rate (``vec``), not on tensor cores.
Stochastic depth costs nothing and is not a layer.
"""

from __future__ import annotations

from costs.errors import SpecError
from costs.specs.conv import F32, Work
from costs.specs.nodes import Layer, Shape, ShapedLayer, one_input, prod
from costs.specs.transformer import Cost


def _int(layer: Layer, key: str, default: int | None = None, low: int = 1) -> int:
    value = layer.spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise SpecError(f"'{key}' must be an integer >= {low}, got {value!r}", layer=layer.name)
    return value


def _map(layer: Layer, in_shapes) -> Shape:
    shape = one_input(layer, in_shapes)
    if len(shape) != 3:
        raise SpecError(f"{layer.type} needs an H x W x C input, got {list(shape)}", layer=layer.name)
    return shape


def _tokens(layer: Layer, in_shapes) -> Shape:
    shape = one_input(layer, in_shapes)
    if len(shape) != 2:
        raise SpecError(f"{layer.type} needs a (seq, d) input, got {list(shape)}", layer=layer.name)
    return shape


def _pointwise(x: float, fwd: float, bwd: float) -> dict[str, Cost]:
    """An elementwise op on ``x`` elements: forward reads x, writes y; backward reads x, dy."""
    return {
        "fwd": Cost(vec=fwd * x, act=2 * x, kernels=1),
        "bwd_data": Cost(vec=bwd * x, act=3 * x, kernels=1),
    }


# ---- Conv2D: dense, grouped and depthwise convolution -------------------------------------


def _conv(layer: Layer, c: int) -> tuple[int, int, int, int, int]:
    k, s = _int(layer, "kernel"), _int(layer, "stride", 1)
    p, g = _int(layer, "padding", 0, low=0), _int(layer, "groups", 1)
    cout = _int(layer, "out_channels")
    if c % g or cout % g:
        raise SpecError(f"groups {g} must divide the {c} input and {cout} output channels", layer=layer.name)
    return k, s, p, g, cout


def _conv2d_shape(layer, in_shapes, rules) -> Shape:
    h, w, c = _map(layer, in_shapes)
    k, s, p, _, cout = _conv(layer, c)
    return ((h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1, cout)


def _conv2d_params(s: ShapedLayer) -> int:
    k, _, _, g, cout = _conv(s.layer, s.in_shapes[0][2])
    return k * k * (s.in_shapes[0][2] // g) * cout + (cout if s.layer.spec.get("bias", False) else 0)


def _conv2d_cost(s: ShapedLayer) -> dict[str, Cost]:
    h, w, c = s.in_shapes[0]
    oh, ow, cout = s.out_shape
    k, _, _, g, _ = _conv(s.layer, c)
    f = 2.0 * k * k * (c // g) * cout * oh * ow
    weights = k * k * (c // g) * cout
    act = h * w * c + oh * ow * cout
    depthwise = c // g == 1

    def one(gemm: tuple[int, int, int]) -> Cost:
        if depthwise:
            return Cost(vec=f, act=act, weights=weights, kernels=1)
        return Cost(tc=f, act=act, weights=weights, kernels=1, gemm=gemm)

    out = {"fwd": one((oh * ow, 0, cout)), "bwd_filter": one((0, cout, k * k * c // g))}
    if "data" not in s.layer.parents:
        out["bwd_data"] = one((h * w, 0, c))
    if s.layer.spec.get("bias", False):  # added in the kernel's epilogue; its gradient is a reduction
        y = oh * ow * cout
        b = out["bwd_filter"]
        out["bwd_filter"] = Cost(b.tc, b.vec + y, b.act + y, b.weights, b.fixed, b.kernels + 1, b.gemm)
    return out


# ---- normalisation, activations, squeeze-and-excitation, layer scale ----------------------


def _same_shape(layer, in_shapes, rules) -> Shape:
    return one_input(layer, in_shapes)


def _norm_params(s: ShapedLayer) -> int:
    return 2 * s.out_shape[-1]  # scale and shift per channel


def _norm_cost(s: ShapedLayer) -> dict[str, Cost]:
    """BatchNorm (statistics over the batch and pixels) or LayerNorm over the channels: a
    statistics pass and a normalise pass forward, three reductions backward."""
    x = prod(s.out_shape)
    return {
        "fwd": Cost(vec=8 * x, act=3 * x, kernels=2),
        "bwd_data": Cost(vec=10 * x, act=3 * x, kernels=1),
        "bwd_filter": Cost(vec=4 * x, act=2 * x, kernels=1),
    }


def _norm_shape(layer, in_shapes, rules) -> Shape:
    if layer.spec.get("norm", "batch") not in ("batch", "layer"):
        raise SpecError(f"'norm' must be batch or layer, got {layer.spec.get('norm')!r}", layer=layer.name)
    return one_input(layer, in_shapes)


# FLOPs per element (forward, backward): ReLU a compare; sigmoid exp, add, divide (backward
# s (1 - s) dy); SiLU x sigmoid(x); GELU as costs.specs.transformer counts its tanh form.
ACTIVATIONS = {"relu": (1, 1), "sigmoid": (4, 3), "silu": (5, 6), "gelu": (8, 12)}


def _act_shape(layer, in_shapes, rules) -> Shape:
    if layer.spec.get("fn") not in ACTIVATIONS:
        raise SpecError(
            f"'fn' must be one of {', '.join(ACTIVATIONS)}, got {layer.spec.get('fn')!r}", layer=layer.name
        )
    return one_input(layer, in_shapes)


def _act_cost(s: ShapedLayer) -> dict[str, Cost]:
    fwd, bwd = ACTIVATIONS[s.layer.spec["fn"]]
    return _pointwise(prod(s.out_shape), fwd, bwd)


def _se_shape(layer, in_shapes, rules) -> Shape:
    _int(layer, "reduced")
    return _map(layer, in_shapes)


def _se_params(s: ShapedLayer) -> int:
    c, r = s.out_shape[2], int(s.layer.spec["reduced"])
    return 2 * c * r + r + c  # two 1x1 convolutions with biases (Hu et al. 2018)


def _se_cost(s: ShapedLayer) -> dict[str, Cost]:
    """Squeeze (global mean), two small fully connected layers with SiLU and sigmoid, then the
    map scaled per channel: the map is read twice and written once; the FCs are tiny GEMMs."""
    h, w, c = s.out_shape
    r = int(s.layer.spec["reduced"])
    x, fc = h * w * c, 2.0 * 2 * c * r
    small = ACTIVATIONS["silu"][0] * r + ACTIVATIONS["sigmoid"][0] * c
    return {
        "fwd": Cost(tc=fc, vec=2 * x + small, act=3 * x, weights=2 * c * r, kernels=5, gemm=(1, 0, c)),
        "bwd_data": Cost(tc=fc, vec=3 * x + small, act=4 * x, weights=2 * c * r, kernels=5, gemm=(1, 0, c)),
        "bwd_filter": Cost(tc=fc, vec=r + c, act=0, weights=2 * c * r, kernels=2, gemm=(0, c, r)),
    }


def _scale_params(s: ShapedLayer) -> int:
    return s.out_shape[-1]  # ConvNeXt's layer scale: one factor per channel (Touvron et al. 2021)


def _scale_cost(s: ShapedLayer) -> dict[str, Cost]:
    x = prod(s.out_shape)
    return {**_pointwise(x, 1, 1), "bwd_filter": Cost(vec=x, act=2 * x, kernels=1)}


# ---- pooling to a vector, image to tokens, tokens to a vector --------------------------------


def _gap_shape(layer, in_shapes, rules) -> Shape:
    return (_map(layer, in_shapes)[2],)


def _gap_cost(s: ShapedLayer) -> dict[str, Cost]:
    x = prod(s.in_shapes[0])
    return {
        "fwd": Cost(vec=x, act=x + s.out_shape[0], kernels=1),
        "bwd_data": Cost(vec=x, act=x + s.out_shape[0], kernels=1),
    }


def _tokens_shape(layer, in_shapes, rules) -> Shape:
    h, w, c = _map(layer, in_shapes)
    return (h * w + (1 if layer.spec.get("class_token", False) else 0), c)


def _tokens_params(s: ShapedLayer) -> int:
    seq, d = s.out_shape
    cls = d if s.layer.spec.get("class_token", False) else 0
    return cls + (seq * d if s.layer.spec.get("positions", False) else 0)  # ViT's learned table


def _tokens_cost(s: ShapedLayer) -> dict[str, Cost]:
    """Flatten the patch grid, prepend the class token, add the position table."""
    x = prod(s.out_shape)
    out = {"fwd": Cost(vec=x, act=2 * x, kernels=2), "bwd_data": Cost(act=2 * x, kernels=1)}
    if _tokens_params(s):
        out["bwd_filter"] = Cost(vec=x, act=x, weights=_tokens_params(s), kernels=1)
    return out


def _pool_tokens_shape(layer, in_shapes, rules) -> Shape:
    if layer.spec.get("mode") not in ("class", "mean"):
        raise SpecError(f"'mode' must be class or mean, got {layer.spec.get('mode')!r}", layer=layer.name)
    return (_tokens(layer, in_shapes)[1],)


def _pool_tokens_cost(s: ShapedLayer) -> dict[str, Cost]:
    if s.layer.spec["mode"] == "class":
        return {}  # the class token is a view of the sequence
    x = prod(s.in_shapes[0])
    return {"fwd": Cost(vec=x, act=x, kernels=1), "bwd_data": Cost(vec=x, act=x, kernels=1)}


# ---- Swin: patch merging and (shifted) window attention -------------------------------------


def _grid(layer: Layer, seq: int) -> tuple[int, int]:
    grid = layer.spec.get("grid")
    if not isinstance(grid, list) or len(grid) != 2 or grid[0] * grid[1] != seq:
        raise SpecError(f"'grid' must be [H, W] with H x W = {seq} tokens, got {grid!r}", layer=layer.name)
    return int(grid[0]), int(grid[1])


def _merge_shape(layer, in_shapes, rules) -> Shape:
    seq, d = _tokens(layer, in_shapes)
    h, w = _grid(layer, seq)
    if h % 2 or w % 2:
        raise SpecError(f"patch merging needs an even grid, got {h} x {w}", layer=layer.name)
    return (seq // 4, 4 * d)


def _merge_cost(s: ShapedLayer) -> dict[str, Cost]:
    x = prod(s.out_shape)  # 2 x 2 neighbours gathered into one token: a copy
    return {"fwd": Cost(act=2 * x, kernels=1), "bwd_data": Cost(act=2 * x, kernels=1)}


def _window(layer: Layer, seq: int) -> tuple[int, int, int, int]:
    h, w = _grid(layer, seq)
    win = _int(layer, "window")
    if h % win or w % win:
        raise SpecError(f"a {h} x {w} token grid does not split into {win} x {win} windows", layer=layer.name)
    return _int(layer, "n_heads"), _int(layer, "head_dim"), win, h * w // (win * win)


def _window_shape(layer, in_shapes, rules) -> Shape:
    seq, width = _tokens(layer, in_shapes)
    heads, hd, _, _ = _window(layer, seq)
    if width != 3 * heads * hd:
        raise SpecError(
            f"input width {width} is not 3 x n_heads x head_dim = {3 * heads * hd}", layer=layer.name
        )
    return (seq, heads * hd)


def _window_params(s: ShapedLayer) -> int:
    heads, _, win, _ = _window(s.layer, s.in_shapes[0][0])
    return (2 * win - 1) ** 2 * heads  # relative position bias table (Liu et al. 2021, §3.2)


def _window_cost(s: ShapedLayer) -> dict[str, Cost]:
    """Self-attention inside each win x win window: Q K^T and P V over win^2 keys per query
    (linear in the tokens, Liu et al. 2021 eq. 2), plus the relative position bias (and the
    shifted windows' mask) added to the scores; the cyclic shift and the window partition
    are copies of the map. Not a fused kernel: the scores are written and read back."""
    seq, width = s.in_shapes[0]
    heads, hd, win, _ = _window(s.layer, seq)
    y, scores = seq * heads * hd, heads * seq * win * win
    mm = 4.0 * seq * win * win * heads * hd
    copies = 2 * width + 2 * y  # partition (and shift) in, reverse out
    return {
        "fwd": Cost(tc=mm, vec=7.0 * scores, act=width + 4 * scores + y + copies, kernels=6),
        "bwd_data": Cost(tc=2 * mm, vec=3.0 * scores, act=2 * width + 2 * y + 8 * scores + copies, kernels=7),
        "bwd_filter": Cost(vec=scores, act=scores, weights=_window_params(s), kernels=1),
    }


class Kind:
    """A vision layer type: shape, parameters, per-sample cost per phase."""

    def __init__(self, shape, params, cost) -> None:
        self.shape, self.params, self.cost = shape, params, cost


_NONE = lambda s: 0  # noqa: E731

KINDS: dict[str, Kind] = {
    "Conv2D": Kind(_conv2d_shape, _conv2d_params, _conv2d_cost),
    "Norm2D": Kind(_norm_shape, _norm_params, _norm_cost),
    "Activation": Kind(_act_shape, _NONE, _act_cost),
    "SqueezeExcite": Kind(_se_shape, _se_params, _se_cost),
    "LayerScale": Kind(_same_shape, _scale_params, _scale_cost),
    "GlobalAvgPool": Kind(_gap_shape, _NONE, _gap_cost),
    "PatchTokens": Kind(_tokens_shape, _tokens_params, _tokens_cost),
    "TokenPool": Kind(_pool_tokens_shape, _NONE, _pool_tokens_cost),
    "PatchMerge": Kind(_merge_shape, _NONE, _merge_cost),
    "WindowAttention": Kind(_window_shape, _window_params, _window_cost),
}
TYPES = frozenset(KINDS)


def param_tensors(s: ShapedLayer) -> int:
    """Parameter tensors of a layer (the optimizer launches work per tensor)."""
    if s.type == "Conv2D":
        return 2 if s.layer.spec.get("bias", False) else 1
    if s.type == "PatchTokens":
        return int(bool(s.layer.spec.get("class_token"))) + int(bool(s.layer.spec.get("positions")))
    return {"Norm2D": 2, "SqueezeExcite": 4, "LayerScale": 1, "WindowAttention": 1}.get(s.type, 0)


def costs(s: ShapedLayer) -> dict[str, Cost]:
    """Per-sample :class:`~costs.specs.transformer.Cost` of each phase the layer runs."""
    return KINDS[s.type].cost(s)


def work(s: ShapedLayer, n: int, rules, algorithm: str) -> dict[str, Work]:
    """PALEO-style work at batch ``n`` under the ``planner`` rules: every tensor in fp32."""
    return {
        phase: Work([n * (c.tc + c.vec)], [F32 * (n * c.act + c.weights) + n * c.fixed])
        for phase, c in costs(s).items()
    }
