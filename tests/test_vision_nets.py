"""Today's vision nets: parameters and multiply-adds against their published figures.

Sources (each spec's ``source`` repeats its own; read 2026-11-24):

- torchvision's weights meta, ``num_params`` (exact) and ``_ops`` (giga multiply-adds of the
  convolutions, linear layers and attention matmuls at batch 1, printed to 3 decimals):
  https://github.com/pytorch/vision/blob/main/torchvision/models/{efficientnet,convnext,
  vision_transformer,swin_transformer}.py. ViT-B/16 at 384 px: ``ViT_B_16_Weights.
  IMAGENET1K_SWAG_E2E_V1``, num_params 86,859,496, _ops 55.484 (same file).
- timm's benchmark table, ``param_count`` in millions to 2 decimals:
  https://github.com/huggingface/pytorch-image-models/blob/main/results/benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv

planner counts 2 FLOPs per multiply-add, so the comparison is (forward GEMM and convolution
FLOPs) / 2, within half a unit of the last printed digit. Parameters match exactly.
"""

from __future__ import annotations

import pytest

from costs.errors import SpecError
from costs.specs import layers, transformer, vision
from costs.specs.vision_nets import MAX_IMAGE_SIZE, build_layers, check_image_size, with_image_size
from planner import catalog

NETS = (
    "efficientnet_b0",
    "efficientnet_b4",
    "convnext_tiny",
    "convnext_base",
    "vit_b_16",
    "vit_l_16",
    "swin_t",
)
# net -> (torchvision num_params, torchvision _ops GMACs, image size); sources above
TORCHVISION = {
    "efficientnet_b0": (5_288_548, 0.386, 224),
    "efficientnet_b4": (19_341_616, 4.394, 380),
    "convnext_tiny": (28_589_128, 4.456, 224),
    "convnext_base": (88_591_464, 15.355, 224),
    "vit_b_16": (86_567_656, 17.564, 224),
    "vit_l_16": (304_326_632, 61.555, 224),
    "swin_t": (28_288_354, 4.491, 224),
}
# net -> (timm model, param_count in M as printed); source above
TIMM = {
    "efficientnet_b0": ("efficientnet_b0", 5.29),
    "efficientnet_b4": ("tf_efficientnet_b4", 19.34),
    "convnext_tiny": ("convnext_tiny", 28.59),
    "convnext_base": ("convnext_base", 88.59),
    "vit_b_16": ("vit_base_patch16_224", 86.57),
    "vit_l_16": ("vit_large_patch16_224", 304.33),
    "swin_t": ("swin_tiny_patch4_window7_224", 28.29),
}
_GEMM_TYPES = ("Conv2D", "SqueezeExcite", "Linear", "Attention", "WindowAttention")


def _params(net) -> int:
    return sum(layers.params(s) for s in net.layers)


def _macs(net) -> float:
    """Forward multiply-adds of the convolutions (depthwise included), linear layers and
    attention matmuls: what torchvision's ``_ops`` counts."""
    total = 0.0
    for s in net.layers:
        if s.type == "InnerProduct":
            total += s.in_shapes[0][-1] * s.out_shape[0]
        elif s.type in _GEMM_TYPES:
            fwd = (vision.costs(s) if s.type in vision.TYPES else transformer.costs(s))["fwd"]
            total += (fwd.tc + (fwd.vec if s.type == "Conv2D" else 0.0)) / 2
    return total


@pytest.mark.parametrize("rules", ["planner", "modern"])
@pytest.mark.parametrize("name", NETS)
def test_params_match_torchvision_exactly(name, rules):
    net = catalog.load_net(name, rules)
    assert _params(net) == TORCHVISION[name][0]
    assert catalog.net_costs(name, rules).total_params == TORCHVISION[name][0]
    assert round(_params(net) / 1e6, 2) == TIMM[name][1]  # the second source, to its 2 decimals


@pytest.mark.parametrize("name", NETS)
def test_macs_match_torchvision_ops(name):
    _, gmacs, size = TORCHVISION[name]
    net = catalog.load_net(name, "planner")
    assert net.layers[0].out_shape == (size, size, 3)
    assert abs(_macs(net) / 1e9 - gmacs) <= 0.5e-3, _macs(net) / 1e9


@pytest.mark.parametrize("name", NETS)
def test_spec_files_are_generated_from_their_description(name):
    spec = catalog.zoo_info()[name]
    assert spec["layers"] == build_layers(spec["vision"])
    assert spec["published"]["params"] == TORCHVISION[name][0]
    assert spec["published"]["gmacs"] == TORCHVISION[name][1]
    assert "github.com/pytorch/vision" in spec["source"] and "read 2026-11-24" in spec["source"]


def test_vit_b_16_at_384_matches_torchvision_swag_e2e():
    """The position table grows with the tokens (24^2 + 1 = 577), attention quadratically."""
    spec = with_image_size(catalog.net_spec("vit_b_16"), 384, "vit_b_16")
    from costs.rules import get_rules
    from costs.specs.graph import build_net

    net = build_net(spec, "vit_b_16", get_rules("planner"))
    assert _params(net) == 86_859_496
    assert abs(_macs(net) / 1e9 - 55.484) <= 0.5e-3


def _at(name: str, size: int):
    from costs.rules import get_rules
    from costs.specs.graph import build_net

    return build_net(with_image_size(catalog.net_spec(name), size, name), name, get_rules("planner"))


@pytest.mark.parametrize("name", ["efficientnet_b0", "convnext_tiny"])
def test_convnet_work_scales_with_pixels(name):
    """Fully convolutional up to a global pool: parameters do not change, convolution work and
    activations scale with the pixels (exactly 4x at twice the side, all strides dividing it)."""
    small, big = _at(name, 224), _at(name, 448)
    assert _params(small) == _params(big)
    conv = lambda net: sum(_macs_of(s) for s in net.layers if s.type == "Conv2D")  # noqa: E731
    assert conv(big) == 4 * conv(small)
    acts = lambda net: sum(s.out_shape[0] * s.out_shape[1] for s in net.layers if len(s.out_shape) == 3)  # noqa: E731
    assert acts(big) == 4 * acts(small)


def _macs_of(s) -> float:
    fwd = vision.costs(s)["fwd"]
    return (fwd.tc + fwd.vec) / 2


def test_swin_attention_is_linear_in_tokens_and_vit_quadratic():
    def attention(net, kind):
        return sum(
            transformer.costs(s)["fwd"].tc if kind == "Attention" else vision.costs(s)["fwd"].tc
            for s in net.layers
            if s.type == kind
        )

    assert attention(_at("swin_t", 448), "WindowAttention") == 4 * attention(
        _at("swin_t", 224), "WindowAttention"
    )
    seq = lambda size: (size // 16) ** 2 + 1  # noqa: E731
    ratio = attention(_at("vit_b_16", 448), "Attention") / attention(_at("vit_b_16", 224), "Attention")
    assert ratio == pytest.approx(seq(448) ** 2 / seq(224) ** 2)


@pytest.mark.parametrize(
    ("name", "size", "message"),
    [
        ("swin_t", 256, r"multiple of 224 px \(32 px total stride x 7-token windows\)"),
        ("vit_b_16", 200, "multiple of the 16 px patch"),
        ("convnext_tiny", 0, "integer from 32 to 4096"),
        ("efficientnet_b0", -224, "integer from 32 to 4096"),
        ("efficientnet_b0", MAX_IMAGE_SIZE + 1, "integer from 32 to 4096"),
        ("vit_b_16", 224.5, "integer from 16 to 4096"),
    ],
)
def test_bad_sizes_are_refused_in_one_line(name, size, message):
    with pytest.raises(SpecError, match=message) as err:
        check_image_size(catalog.net_spec(name)["vision"], size, name)
    assert "\n" not in str(err.value)


def test_odd_sizes_suit_convnets():
    assert _at("efficientnet_b4", 381).layers[0].out_shape == (381, 381, 3)


def test_paleo_rules_refuse_the_vision_layer_types():
    with pytest.raises(SpecError, match="'Conv2D' is not supported by rules paleo-2018"):
        catalog.load_net("convnext_tiny", "paleo-2018")


def test_every_vision_type_is_used_and_costed():
    used = {s.type for name in NETS for s in catalog.load_net(name, "modern").layers}
    assert vision.TYPES <= used
    net = catalog.load_net("efficientnet_b0", "modern")
    dw = [s for s in net.layers if s.type == "Conv2D" and s.layer.spec["groups"] > 1]
    assert dw and all(vision.costs(s)["fwd"].tc == 0 and vision.costs(s)["fwd"].vec > 0 for s in dw)


@pytest.mark.parametrize("name", NETS)
def test_parameters_match_timm_models_when_installed(name):
    """A check against the models themselves; timm is optional (not a dependency)."""
    timm = pytest.importorskip(
        "timm", reason="timm is not installed: parameter check against its models skipped"
    )
    model = timm.create_model(TIMM[name][0], pretrained=False)
    assert sum(p.numel() for p in model.parameters()) == TORCHVISION[name][0]


@pytest.mark.parametrize("name", NETS)
def test_every_layer_costs_time_under_the_modern_rules(name):
    """Each vision layer moves bytes in its forward (the class token, a view, excepted), and
    the FLOPs the roofline sees are the layer's own."""
    from costs.modern import roofline

    costs = catalog.net_costs(name, "modern")
    t = roofline.terms(costs)
    for i, s in enumerate(costs.net.layers):
        if s.type in vision.TYPES and not (s.type == "TokenPool" and s.layer.spec["mode"] == "class"):
            assert t.act_b[i, 0] > 0 and t.kernels[i, 0] >= 1, s.name
            fwd = vision.costs(s)["fwd"]
            assert (t.tc[i, 0], t.vec[i, 0]) == (fwd.tc, fwd.vec), s.name


@pytest.mark.parametrize("name", NETS)
def test_auto_optimizer_is_the_published_recipes(name):
    """torchvision's recipes train ViT-B/16, ConvNeXt and Swin with AdamW (its spec cites
    ``--opt adamw``); the others state none and keep the CNN default, momentum."""
    from planner.request import defaults

    published = catalog.training(name).optimizer
    assert published == ("adam" if name in ("vit_b_16", "convnext_tiny", "convnext_base", "swin_t") else "")
    if published:
        assert "--opt adamw" in catalog.zoo_info()[name]["training"]["source"]
    assert defaults.optimizer("auto", False, published) == (published or "momentum")
    assert defaults.optimizer("sgd", False, published) == "sgd"


def test_a_bad_published_optimizer_is_refused_in_one_line():
    from planner import training_defaults
    from planner.errors import CatalogError

    with pytest.raises(
        CatalogError, match=r"net 'x': training.optimizer = 'lamb' \(want one of sgd, momentum, adam\)"
    ):
        training_defaults.parse("x", {"training": {"optimizer": "lamb"}})


def test_a_description_alone_is_a_spec_file(tmp_path, capsys):
    """A user's vision spec needs no generated layers: ConvNeXt-T from six lines."""
    import json

    from planner.cli import main

    desc = {"family": "convnext", "depths": [3, 3, 9, 3], "dims": [96, 192, 384, 768], "image_size": 224}
    path = tmp_path / "my_convnext.json"
    path.write_text(json.dumps({"name": "mine", "vision": desc}))
    assert _params(catalog.load_net(str(path), "modern")) == TORCHVISION["convnext_tiny"][0]
    assert main(["estimate", str(path), "--workers", "1", "--image-size", "288", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["image_size"] == 288
