"""PyTorch modules for the CNN layer types of :mod:`costs.specs.layers` (imports torch).

Spec shapes are per sample and channels-last, ``(H, W, C)``; tensors here are PyTorch's
``(N, C, H, W)`` (in channels-last memory format when asked). Paddings are derived from the
spec's input and output shapes, so the measured layer has exactly the modelled shape: a
symmetric padding goes into the module, an asymmetric one (TensorFlow's SAME with an odd total)
is an explicit ``F.pad`` in front of it.
"""

from __future__ import annotations

from costs.errors import UnsupportedError
from costs.specs.nodes import ShapedLayer, prod
from planner.profile import lazy


def _defined() -> dict:
    """This module's names, defined on first use: PyTorch, the optional extra of `planner
    profile`, is imported here and not when planner starts."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def _pads(s: ShapedLayer, kh: int, kw: int, sh: int, sw: int) -> tuple[int, int, int, int]:
        """(top, bottom, left, right) so that a (kh, kw) window at stride (sh, sw) gives the
        spec's output size (extra rows go after, as in TensorFlow)."""
        (h, w), (oh, ow) = s.in_shapes[0][:2], s.out_shape[:2]
        th = max((oh - 1) * sh + kh - h, 0)
        tw = max((ow - 1) * sw + kw - w, 0)
        return th // 2, th - th // 2, tw // 2, tw - tw // 2

    def _strides(s: ShapedLayer, default) -> tuple[int, int]:
        st = s.layer.spec.get("strides", default)
        return int(st[1]), int(st[2])

    class Padded(nn.Module):
        """A window module with its padding: symmetric inside, asymmetric by ``F.pad`` first."""

        def __init__(self, inner: nn.Module, pads: tuple[int, int, int, int], fill: float = 0.0):
            super().__init__()
            self.inner, self.pads, self.fill = inner, (pads[2], pads[3], pads[0], pads[1]), fill

        def forward(self, x):
            return self.inner(F.pad(x, self.pads, value=self.fill))

    def _windowed(make, s: ShapedLayer, kh: int, kw: int, sh: int, sw: int, fill: float = 0.0) -> nn.Module:
        t, b, left, r = _pads(s, kh, kw, sh, sw)
        symmetric = t == b and left == r and 2 * t <= kh and 2 * left <= kw
        if symmetric:
            return make((t, left))
        return Padded(make((0, 0)), (t, b, left, r), fill)

    def convolution(s: ShapedLayer) -> nn.Module:
        kh, kw, _, _ = (int(v) for v in s.layer.spec["filter"])
        sh, sw = _strides(s, [1, 1, 1, 1])
        cin, cout = s.in_shapes[0][2], s.out_shape[2]
        # PALEO counts a bias for every convolution (costs.specs.layers), so the module has one.
        return _windowed(lambda p: nn.Conv2d(cin, cout, (kh, kw), (sh, sw), p, bias=True), s, kh, kw, sh, sw)

    class Deconvolution(nn.Module):
        """A transposed convolution cropped to the spec's output size where padding cannot say it."""

        def __init__(self, s: ShapedLayer):
            super().__init__()
            kh, kw, _, _ = (int(v) for v in s.layer.spec["filter"])
            sh, sw = _strides(s, [1, 1, 1, 1])
            (h, w, cin), (oh, ow, cout) = s.in_shapes[0], s.out_shape
            th, tw = (h - 1) * sh + kh - oh, (w - 1) * sw + kw - ow  # rows the padding removes
            if th < 0 or tw < 0:
                raise UnsupportedError(f"layer '{s.name}': a deconvolution output larger than its full size")
            ph, pw = th // 2, tw // 2
            self.conv = nn.ConvTranspose2d(cin, cout, (kh, kw), (sh, sw), (ph, pw), bias=True)
            self.size = (oh, ow)

        def forward(self, x):
            y = self.conv(x)
            return y[:, :, : self.size[0], : self.size[1]] if tuple(y.shape[2:]) != self.size else y

    def pooling(s: ShapedLayer) -> nn.Module:
        k = s.layer.spec["ksize"]
        kh, kw = int(k[1]), int(k[2])
        sh, sw = _strides(s, k)
        if s.type == "Pooling":
            return _windowed(lambda p: nn.MaxPool2d((kh, kw), (sh, sw), p), s, kh, kw, sh, sw, float("-inf"))
        return _windowed(
            lambda p: nn.AvgPool2d((kh, kw), (sh, sw), p, count_include_pad=False), s, kh, kw, sh, sw
        )

    class Flatten(nn.Module):
        """(N, C, H, W) -> (N, H*W*C) in the spec's (H, W, C) order, then a linear layer."""

        def __init__(self, inner: nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            if x.dim() == 4:
                x = x.permute(0, 2, 3, 1)
            return self.inner(x.reshape(x.shape[0], -1))

    def inner_product(s: ShapedLayer) -> nn.Module:
        return Flatten(nn.Linear(prod(s.in_shapes[0]), s.out_shape[0], bias=True))

    class Reshape(nn.Module):
        """A view to the spec's per-sample shape, through the (H, W, C) order of the spec."""

        def __init__(self, s: ShapedLayer):
            super().__init__()
            self.shape = tuple(s.out_shape)

        def forward(self, x):
            if x.dim() == 4:
                x = x.permute(0, 2, 3, 1)
            y = x.reshape(x.shape[0], *self.shape)
            return y.permute(0, 3, 1, 2) if y.dim() == 4 else y

    class Concat(nn.Module):
        def __init__(self, s: ShapedLayer):
            super().__init__()
            axis = int(s.layer.spec.get("dim", 3)) - 1  # the spec's dims count the batch axis
            self.dim = (2, 3, 1)[axis] if len(s.out_shape) == 3 else axis + 1

        def forward(self, *xs):
            return torch.cat(xs, dim=self.dim)

    class Elementwise(nn.Module):
        def __init__(self, s: ShapedLayer):
            super().__init__()
            self.op = s.layer.spec.get("operation", "sum")
            if self.op not in ("sum", "add", "mul", "prod", "max"):
                raise UnsupportedError(f"Elementwise operation '{self.op}' (profile knows: sum, mul, max)")

        def forward(self, *xs):
            out = xs[0]
            for x in xs[1:]:
                if self.op in ("sum", "add"):
                    out = out + x
                else:
                    out = torch.maximum(out, x) if self.op == "max" else out * x
            return out

    def batch_norm(s: ShapedLayer) -> nn.Module:
        # The spec counts no parameters for BatchNorm (costs.specs.layers), so no learned scale and shift.
        c = s.out_shape[2] if len(s.out_shape) == 3 else s.out_shape[0]
        return (nn.BatchNorm2d if len(s.out_shape) == 3 else nn.BatchNorm1d)(c, affine=False)

    def generic(s: ShapedLayer) -> nn.Module:
        op = str(s.layer.spec.get("operation", "")).upper()
        if op != "LRN":
            raise UnsupportedError(
                f"layer '{s.name}': Generic operation '{op}' is not profiled (profile knows: LRN)"
            )
        spec = s.layer.spec
        return nn.LocalResponseNorm(int(spec["local_size"]), float(spec["alpha"]), float(spec["beta"]))

    def upsampling(s: ShapedLayer) -> nn.Module:
        k = s.layer.spec.get("ksize", [1, 2, 2, 1])
        return nn.Upsample(scale_factor=(int(k[1]), int(k[2])), mode="nearest")

    def dropout(s: ShapedLayer) -> nn.Module:
        return nn.Dropout(p=1.0 - float(s.layer.spec.get("dropout_keep_prob", 0.5)))

    BUILDERS = {
        "Convolution": convolution,
        "Deconvolution": Deconvolution,
        "InnerProduct": inner_product,
        "Pooling": pooling,
        "AvgPool": pooling,
        "Dropout": dropout,
        "Concatenate": Concat,
        "Elementwise": Elementwise,
        "BatchNorm": batch_norm,
        "Generic": generic,
        "Reshape": Reshape,
        "UpSampling2D": upsampling,
        "ReLU": lambda s: nn.ReLU(),
        "Tanh": lambda s: nn.Tanh(),
        "Sigmoid": lambda s: nn.Sigmoid(),
    }
    return locals()


_defined, __getattr__ = lazy.names(_defined)
