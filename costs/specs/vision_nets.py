"""Build a vision net's layer spec (the graph's JSON format) from a small description.

The description (``vision`` in a zoo file) names the family and its published choices; the
layers follow, at the description's ``image_size`` (square, pixels). Families and their fields:

- ``efficientnet``: ``width`` and ``depth`` multipliers, ``dropout`` (Tan & Le 2019,
  arXiv:1905.11946, Table 1 and eq. 3; channels rounded to multiples of 8 and repeats rounded
  up as torchvision's ``efficientnet.py`` builds them);
- ``convnext``: ``depths`` and ``dims`` of the four stages (Liu et al. 2022, arXiv:2201.03545);
- ``vit``: ``patch``, ``d_model``, ``n_layers``, ``n_heads``, ``d_ff`` (Dosovitskiy et al. 2021,
  arXiv:2010.11929, Table 1);
- ``swin``: ``patch``, ``embed_dim``, ``depths``, ``heads``, ``window`` (Liu et al. 2021,
  arXiv:2103.14030, §3.3).

Common fields: ``image_size``, ``num_classes`` (default 1000), ``batch`` (default images per
step of the Input). The token nets' layers are :mod:`costs.specs.transformer` types;
the others are :mod:`costs.specs.vision` types.

Run as ``python -m costs.specs.vision_nets FILE...`` to rewrite each file's ``layers`` from its
``vision`` description (the zoo's vision files are generated this way).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from costs.errors import SpecError

# Largest --image-size accepted: 4096 px a side, 8x the largest published training
# resolution of these families (EfficientNet-B7 at 600 px); a sample that size is still one image.
MAX_IMAGE_SIZE = 4096

# EfficientNet-B0's MBConv stages (Tan & Le 2019, Table 1): expansion, kernel, stride,
# output channels, repeats. Stem 32 channels; head 4 x the last stage's channels (1280 in B0).
_B0_STAGES = (
    (1, 3, 1, 16, 1),
    (6, 3, 2, 24, 2),
    (6, 5, 2, 40, 2),
    (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3),
    (6, 5, 2, 192, 4),
    (6, 3, 1, 320, 1),
)


def _divisible8(v: float) -> int:
    """Channels rounded to a multiple of 8, never more than 10% down (torchvision's
    ``_make_divisible``, the rule of the reference TensorFlow code)."""
    new = max(8, int(v + 4) // 8 * 8)
    return new + 8 if new < 0.9 * v else new


def _conv(parent: str, cout: int, k: int, stride: int = 1, groups: int = 1, bias: bool = False) -> dict:
    return {
        "type": "Conv2D",
        "parents": [parent] if parent else [],
        "out_channels": cout,
        "kernel": k,
        "stride": stride,
        "padding": 0 if k == stride else (k - 1) // 2,  # patchify stems and downsamplers: none
        "groups": groups,
        "bias": bias,
    }


def _conv_bn_act(
    layers: dict, prefix: str, parent: str, cout: int, k: int, stride=1, groups=1, act=True
) -> str:
    layers[f"{prefix}conv"] = _conv(parent, cout, k, stride, groups)
    layers[f"{prefix}bn"] = {"type": "Norm2D", "parents": [f"{prefix}conv"], "norm": "batch"}
    if not act:
        return f"{prefix}bn"
    layers[f"{prefix}act"] = {"type": "Activation", "parents": [f"{prefix}bn"], "fn": "silu"}
    return f"{prefix}act"


def _mbconv(x: str, cin: int, expand: int, k: int, stride: int, cout: int) -> dict:
    """One inverted-residual block with squeeze-and-excitation (squeeze to cin / 4)."""
    layers: dict[str, Any] = {}
    h = x
    if expand != 1:
        h = _conv_bn_act(layers, "expand_", x, cin * expand, 1)
    h = _conv_bn_act(layers, "dw_", h, cin * expand, k, stride, groups=cin * expand)
    layers["se"] = {"type": "SqueezeExcite", "parents": [h], "reduced": max(1, cin // 4)}
    last = _conv_bn_act(layers, "project_", "se", cout, 1, act=False)
    if stride == 1 and cin == cout:  # residual (stochastic depth on it costs nothing)
        layers["out"] = {"type": "Add", "parents": [last, x]}
        last = "out"
    return {"type": "Block", "parents": [x], "endpoint": last, "layers": layers}


def _efficientnet(m: dict, layers: dict) -> str:
    width, depth = float(m["width"]), float(m["depth"])
    x = _conv_bn_act(layers, "stem_", "data", _divisible8(32 * width), 3, 2)
    cin = _divisible8(32 * width)
    for si, (expand, k, stride, c, repeats) in enumerate(_B0_STAGES):
        cout = _divisible8(c * width)
        for r in range(math.ceil(repeats * depth)):
            name = f"stage{si + 1}_{r}"
            layers[name] = _mbconv(x, cin, expand, k, stride if r == 0 else 1, cout)
            x, cin = name, cout
    x = _conv_bn_act(layers, "head_", x, 4 * cin, 1)
    layers["pool"] = {"type": "GlobalAvgPool", "parents": [x]}
    layers["dropout"] = {"type": "Dropout", "parents": ["pool"], "dropout_keep_prob": 1 - float(m["dropout"])}
    return "dropout"


def _convnext_block(x: str, d: int) -> dict:
    """Depthwise 7x7, LayerNorm, 1x1 up to 4d, GELU, 1x1 down, layer scale, residual."""
    layers = {
        "dwconv": _conv("", d, 7, groups=d, bias=True),
        "norm": {"type": "Norm2D", "parents": ["dwconv"], "norm": "layer"},
        "pw1": _conv("norm", 4 * d, 1, bias=True),
        "act": {"type": "Activation", "parents": ["pw1"], "fn": "gelu"},
        "pw2": _conv("act", d, 1, bias=True),
        "scale": {"type": "LayerScale", "parents": ["pw2"]},
        "out": {"type": "Add", "parents": ["scale", x]},
    }
    return {"type": "Block", "parents": [x], "endpoint": "out", "layers": layers}


def _convnext(m: dict, layers: dict) -> str:
    dims = m["dims"]
    layers["stem_conv"] = _conv("data", dims[0], 4, 4, bias=True)
    layers["stem_norm"] = {"type": "Norm2D", "parents": ["stem_conv"], "norm": "layer"}
    x = "stem_norm"
    for si, (depth, d) in enumerate(zip(m["depths"], dims)):
        if si:
            layers[f"down{si}_norm"] = {"type": "Norm2D", "parents": [x], "norm": "layer"}
            layers[f"down{si}_conv"] = _conv(f"down{si}_norm", d, 2, 2, bias=True)
            x = f"down{si}_conv"
        for b in range(depth):
            layers[f"stage{si + 1}_{b}"] = _convnext_block(x, d)
            x = f"stage{si + 1}_{b}"
    layers["pool"] = {"type": "GlobalAvgPool", "parents": [x]}
    layers["head_norm"] = {"type": "Norm2D", "parents": ["pool"], "norm": "layer"}
    return "head_norm"


def _encoder_block(x: str, d: int, heads: int, d_ff: int, attention: dict) -> dict:
    """A pre-norm transformer layer with biases; ``attention`` is the attention layer's spec."""
    layers = {
        "ln1": {"type": "LayerNorm", "parents": [x]},
        "qkv": {"type": "Linear", "parents": ["ln1"], "num_outputs": 3 * d, "bias": True},
        "attn": {**attention, "parents": ["qkv"], "n_heads": heads, "head_dim": d // heads},
        "proj": {"type": "Linear", "parents": ["attn"], "num_outputs": d, "bias": True},
        "add1": {"type": "Add", "parents": ["proj", x]},
        "ln2": {"type": "LayerNorm", "parents": ["add1"]},
        "up": {"type": "Linear", "parents": ["ln2"], "num_outputs": d_ff, "bias": True},
        "act": {"type": "GELU", "parents": ["up"]},
        "down": {"type": "Linear", "parents": ["act"], "num_outputs": d, "bias": True},
        "out": {"type": "Add", "parents": ["down", "add1"]},
    }
    return {"type": "Block", "parents": [x], "endpoint": "out", "layers": layers}


def _vit(m: dict, layers: dict) -> str:
    d, p = m["d_model"], m["patch"]
    layers["patch_embed"] = _conv("data", d, p, p, bias=True)
    layers["tokens"] = {
        "type": "PatchTokens",
        "parents": ["patch_embed"],
        "class_token": True,
        "positions": True,
    }
    x = "tokens"
    # Non-causal attention in one fused kernel (PyTorch's scaled_dot_product_attention).
    attention = {"type": "Attention", "causal": False, "flash": True}
    for i in range(m["n_layers"]):
        layers[f"layer{i}"] = _encoder_block(x, d, m["n_heads"], m["d_ff"], attention)
        x = f"layer{i}"
    layers["final_norm"] = {"type": "LayerNorm", "parents": [x]}
    layers["cls"] = {"type": "TokenPool", "parents": ["final_norm"], "mode": "class"}
    return "cls"


def _swin(m: dict, layers: dict) -> str:
    d, grid = m["embed_dim"], m["image_size"] // m["patch"]
    layers["patch_embed"] = _conv("data", d, m["patch"], m["patch"], bias=True)
    layers["tokens"] = {"type": "PatchTokens", "parents": ["patch_embed"]}
    layers["embed_norm"] = {"type": "LayerNorm", "parents": ["tokens"]}
    x = "embed_norm"
    for si, (depth, heads) in enumerate(zip(m["depths"], m["heads"])):
        if si:
            layers[f"merge{si}"] = {"type": "PatchMerge", "parents": [x], "grid": [grid, grid]}
            layers[f"merge{si}_norm"] = {"type": "LayerNorm", "parents": [f"merge{si}"]}
            layers[f"merge{si}_reduce"] = {
                "type": "Linear",
                "parents": [f"merge{si}_norm"],
                "num_outputs": 2 * d,
            }
            x, grid, d = f"merge{si}_reduce", grid // 2, 2 * d
        # a grid no larger than the window is one window, and is not shifted (Swin's reference code)
        win = min(m["window"], grid)
        for b in range(depth):
            shift = win // 2 if b % 2 and grid > m["window"] else 0
            attention = {"type": "WindowAttention", "window": win, "grid": [grid, grid], "shift": shift}
            layers[f"stage{si + 1}_{b}"] = _encoder_block(x, d, heads, 4 * d, attention)
            x = f"stage{si + 1}_{b}"
    layers["final_norm"] = {"type": "LayerNorm", "parents": [x]}
    layers["pool"] = {"type": "TokenPool", "parents": ["final_norm"], "mode": "mean"}
    return "pool"


_FAMILIES = {"efficientnet": _efficientnet, "convnext": _convnext, "vit": _vit, "swin": _swin}


def size_rule(desc: dict[str, Any]) -> tuple[int, str]:
    """The multiple every image size of this net must be, and why (a one-line reason)."""
    family = desc["family"]
    if family == "vit":
        return desc["patch"], f"a multiple of the {desc['patch']} px patch"
    if family == "swin":  # the last stage's grid (size / 32) must split into whole windows
        stride = desc["patch"] * 2 ** (len(desc["depths"]) - 1)
        step = stride * desc["window"]
        return step, f"a multiple of {step} px ({stride} px total stride x {desc['window']}-token windows)"
    return 32, "a multiple of the 32 px total stride"


def check_image_size(desc: dict[str, Any], size: object, name: str) -> int:
    """``size`` if the net can take it, else a one-line :class:`SpecError` naming the bound."""
    name = name.removesuffix(".json")
    step, why = size_rule(desc)
    if not isinstance(size, int) or isinstance(size, bool) or not step <= size <= MAX_IMAGE_SIZE:
        raise SpecError(
            f"--image-size for '{name}' must be an integer from {step} to {MAX_IMAGE_SIZE}, got {size!r}"
        )
    if size % step and desc["family"] in ("vit", "swin"):
        raise SpecError(f"--image-size {size} does not suit '{name}': it must be {why}")
    return size


def build_layers(desc: dict[str, Any]) -> dict[str, Any]:
    """The ``layers`` object of a vision spec from its description."""
    if not isinstance(desc, dict) or desc.get("family") not in _FAMILIES:
        raise SpecError(f"'vision' must name a family ({', '.join(_FAMILIES)})")
    m = {"num_classes": 1000, "batch": 32, **desc}
    size = m["image_size"]
    layers: dict[str, Any] = {"data": {"type": "Input", "parents": [], "tensor": [m["batch"], size, size, 3]}}
    x = _FAMILIES[m["family"]](m, layers)
    layers["fc"] = {"type": "InnerProduct", "parents": [x], "num_outputs": m["num_classes"]}
    layers["prob"] = {"type": "Softmax", "parents": ["fc"], "num_classes": m["num_classes"]}
    return layers


def with_image_size(spec: dict[str, Any], size: int, name: str) -> dict[str, Any]:
    """A vision spec rebuilt at ``size`` px a side (its ``vision`` description's family rule);
    the description keeps the published size as ``native_image_size``."""
    name = name.removesuffix(".json")
    desc = spec.get("vision")
    if isinstance(spec.get("model"), dict):
        raise SpecError(
            f"--image-size is for vision nets; '{name}' is a transformer (its length is --seq-len)"
        )
    if not isinstance(desc, dict):
        raise SpecError(
            f"--image-size applies to the vision nets built from a description; '{name}' is a fixed-size spec"
        )
    native = desc.get("native_image_size", desc["image_size"])
    desc = {**desc, "image_size": check_image_size(desc, size, name), "native_image_size": native}
    return {**spec, "vision": desc, "layers": build_layers(desc)}


def resized(
    spec: dict[str, Any],
    name: str,
    seq_len: int | None = None,
    image_size: int | None = None,
    attention: str | None = None,
) -> dict:
    """A spec at another sequence length and attention kernel (transformers) or image size (vision
    nets); None: its own. A vision spec written as its description alone gets its layers here."""
    if isinstance(spec.get("vision"), dict) and "layers" not in spec:
        spec = {**spec, "layers": build_layers(spec["vision"])}
    if attention is not None:
        from costs.specs.transformer_spec import with_attention

        spec = with_attention(spec, attention, name)
    if seq_len is not None:  # 0 or less is refused by with_seq_len
        from costs.specs.transformer_spec import with_seq_len

        spec = with_seq_len(spec, seq_len, name)
    return spec if image_size is None else with_image_size(spec, image_size, name)


def _rewrite(path: Path) -> None:
    spec = json.loads(path.read_text())
    layers = build_layers(spec["vision"])
    head = json.dumps({k: v for k, v in spec.items() if k != "layers"}, indent=2)
    body = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in layers.items())
    path.write_text(head[:-2] + ',\n  "layers": {\n' + body + "\n  }\n}\n")


def main(argv: list[str]) -> int:
    """``python -m costs.specs.vision_nets FILE...``: regenerate each file's layers."""
    from costs.specs.transformer_spec import rewrite_files

    return rewrite_files(argv, "costs.specs.vision_nets", _rewrite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
