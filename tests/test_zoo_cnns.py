"""The CNNs added to the zoo for transformer-era coverage: resnet101, resnet152, googlenet, vgg_a.

Parameter counts and forward multiply-adds are checked against torchvision's documented values
(the ``num_params`` and ``GFLOPS`` of each model's IMAGENET1K_V1 weights; read 2026-11-23):

- resnet50:  num_params 25,557,032, _ops 4.089  -- ResNet50_Weights meta, torchvision/models/resnet.py
             (https://github.com/pytorch/vision/blob/main/torchvision/models/resnet.py)
- resnet101: num_params 44,549,160, _ops 7.801  -- ResNet101_Weights meta, same file
- resnet152: num_params 60,192,808, GFLOPS 11.51 --
             https://docs.pytorch.org/vision/stable/models/generated/torchvision.models.resnet152.html
- googlenet: num_params 6,624,904, GFLOPS 1.50 (no auxiliary heads) --
             https://pytorch.org/vision/stable/models/generated/torchvision.models.googlenet.html
- vgg11 (= configuration A): num_params 132,863,336, _ops 7.609 -- VGG11_Weights meta,
             torchvision/models/vgg.py (https://github.com/pytorch/vision/blob/main/torchvision/models/vgg.py)

Counting conventions.

- Parameters. planner follows PALEO: weights plus one bias per output channel for every
  convolution and fully connected layer, BatchNorm not counted. torchvision's ResNets and
  GoogLeNet have bias-free convolutions, each followed by a BatchNorm with two parameters
  (scale, shift) per channel. The tests recount our specs in torchvision's convention and match
  its figures exactly; PALEO's own count is then torchvision's minus one per BatchNorm channel.
- FLOPs. torchvision's "GFLOPS" (``_ops``) are giga multiply-adds of the convolution and linear
  layers at 224x224, batch 1. planner counts a multiply-add as 2 FLOPs, so the comparison is
  (forward FLOPs of Convolution + InnerProduct) / 2, which must agree to the digits printed
  (within half a unit of the last one). planner's forward FLOPs also count pooling and dropout;
  those add well under 0.5 % (checked below).
- GoogLeNet. The zoo's net follows the paper (5x5 kernels, LRN, conv biases); torchvision's has
  3x3 kernels in the 5x5 branch (a documented bug in torchvision/models/googlenet.py), BatchNorm
  instead of LRN and biases. The torchvision figures are matched by recounting our spec with those
  differences; the paper-faithful net has 6,998,552 parameters (PALEO convention) and 1.583 G
  multiply-adds.
"""

from __future__ import annotations

import math

import pytest

from costs.errors import SpecError
from costs.modern import roofline
from costs.rules import get_rules
from costs.specs import layers
from planner import catalog

NEW = ("resnet101", "resnet152", "googlenet", "vgg_a")
RULES_OK = ("paleo-2018", "planner", "modern")

# net -> (torchvision num_params, torchvision GFLOPS as printed, decimals printed); sources above.
TORCHVISION = {
    "resnet50": (25_557_032, 4.089, 3),
    "resnet101": (44_549_160, 7.801, 3),
    "resnet152": (60_192_808, 11.51, 2),
    "googlenet": (6_624_904, 1.50, 2),
    "vgg_a": (132_863_336, 7.609, 3),
}

# PALEO-convention parameter counts (weights + a bias per conv/FC channel, no BatchNorm): follow
# from the torchvision counts above (see test_paleo_params_are_torchvision_minus_batchnorm).
PALEO_PARAMS = {
    "resnet101": 44_496_488,
    "resnet152": 60_117_096,
    "googlenet": 6_998_552,
    "vgg_a": 132_863_336,
}


def _children(net) -> dict[str, list]:
    kids: dict[str, list] = {s.name: [] for s in net.layers}
    for s in net.layers:
        for p in s.layer.parents:
            kids[p].append(s)
    return kids


def _conv_dims(s) -> tuple[int, int, int, int]:
    kh, kw, _, cout = (int(v) for v in s.layer.spec["filter"])
    return kh, kw, int(s.in_shapes[0][2]), cout


def _torchvision_params(net, googlenet_variant: bool = False) -> int:
    """Parameters in torchvision's convention: conv weights, a conv bias only where no BatchNorm
    follows, 2 per BatchNorm channel, FC weights and biases. ``googlenet_variant`` recounts the
    paper's GoogLeNet as torchvision builds it: 3x3 kernels in the 5x5 branch, every convolution
    bias-free and followed by a BatchNorm."""
    kids = _children(net)
    total = 0
    for s in net.layers:
        if s.type == "Convolution":
            kh, kw, cin, cout = _conv_dims(s)
            if googlenet_variant:
                k = 3 if s.name.endswith("/5x5") else kh
                total += k * k * cin * cout + 2 * cout
            else:
                has_bn = any(c.type == "BatchNorm" for c in kids[s.name])
                total += kh * kw * cin * cout + (0 if has_bn else cout)
        elif s.type == "BatchNorm":
            total += 2 * int(s.out_shape[-1])
        elif s.type == "InnerProduct":
            total += math.prod(s.in_shapes[0]) * int(s.out_shape[0]) + int(s.out_shape[0])
    return total


def _gemm_macs(net, googlenet_variant: bool = False) -> int:
    """Forward multiply-adds of the convolutions and FC layers at batch 1 (torchvision's "ops")."""
    total = 0
    for s in net.layers:
        if s.type == "Convolution":
            kh, kw, cin, cout = _conv_dims(s)
            if googlenet_variant and s.name.endswith("/5x5"):
                kh = kw = 3
            total += kh * kw * cin * cout * int(s.out_shape[0]) * int(s.out_shape[1])
        elif s.type == "InnerProduct":
            total += math.prod(s.in_shapes[0]) * int(s.out_shape[0])
    return total


def _fwd_flops_by_type(net, rules_name: str) -> dict[str, float]:
    rules = get_rules(rules_name)
    out: dict[str, float] = {}
    for s in net.layers:
        w = layers.work(s, 1, rules, "gemm")
        if "fwd" in w:
            out[s.type] = out.get(s.type, 0.0) + sum(w["fwd"].flops)
    return out


@pytest.mark.parametrize("rules_name", RULES_OK)
@pytest.mark.parametrize("net", sorted(TORCHVISION))
def test_params_match_torchvision(net, rules_name):
    shaped = catalog.load_net(net, rules_name)
    assert _torchvision_params(shaped, googlenet_variant=net == "googlenet") == TORCHVISION[net][0]


@pytest.mark.parametrize("rules_name", RULES_OK)
@pytest.mark.parametrize("net", NEW)
def test_paleo_params_are_torchvision_minus_batchnorm(net, rules_name):
    """planner's own count (summary's totals.params), exact, in every rule set that reads the net."""
    shaped = catalog.load_net(net, rules_name)
    total = sum(layers.params(s) for s in shaped.layers)
    assert total == PALEO_PARAMS[net]
    assert catalog.net_costs(net, rules_name).total_params == PALEO_PARAMS[net]
    if net.startswith("resnet"):
        # every conv is followed by one BatchNorm: torchvision trades its bias for 2 BN parameters
        bn_channels = sum(int(s.out_shape[-1]) for s in shaped.layers if s.type == "BatchNorm")
        assert total + bn_channels == TORCHVISION[net][0]
    if net == "vgg_a":
        assert total == TORCHVISION[net][0]  # no BatchNorm: the conventions agree


@pytest.mark.parametrize("rules_name", RULES_OK)
@pytest.mark.parametrize("net", sorted(TORCHVISION))
def test_forward_macs_match_torchvision_gflops(net, rules_name):
    """(Convolution + InnerProduct forward FLOPs) / 2 agrees with torchvision's GFLOPS to the
    digits it prints; for googlenet, on the torchvision variant (3x3 in the 5x5 branch)."""
    _, gflops, decimals = TORCHVISION[net]
    shaped = catalog.load_net(net, rules_name)
    by_type = _fwd_flops_by_type(shaped, rules_name)
    macs = (by_type.get("Convolution", 0.0) + by_type.get("InnerProduct", 0.0)) / 2
    assert macs == _gemm_macs(shaped)  # planner's FLOPs are exactly 2 per multiply-add
    tolerance = 0.5 * 10.0**-decimals
    variant = _gemm_macs(shaped, googlenet_variant=net == "googlenet")
    assert abs(variant / 1e9 - gflops) <= tolerance, (net, variant / 1e9)


@pytest.mark.parametrize("net", ["resnet101", "resnet152", "vgg_a"])
def test_whole_forward_within_half_a_percent_of_torchvision(net):
    """All forward FLOPs (pooling and dropout included) / 2 stay within 0.5 % of torchvision's."""
    shaped = catalog.load_net(net, "planner")
    total = sum(_fwd_flops_by_type(shaped, "planner").values())
    assert math.isclose(total / 2 / 1e9, TORCHVISION[net][1], rel_tol=5e-3)


def test_googlenet_paper_vs_torchvision_variant():
    """The paper's 5x5 kernels cost 16/25 more per 5x5 conv than torchvision's 3x3 ones."""
    shaped = catalog.load_net("googlenet", "planner")
    five = [s for s in shaped.layers if s.name.endswith("/5x5")]
    assert len(five) == 9 and all(s.layer.spec["filter"][:2] == [5, 5] for s in five)
    extra = sum(16 * _conv_dims(s)[2] * _conv_dims(s)[3] * s.out_shape[0] * s.out_shape[1] for s in five)
    assert _gemm_macs(shaped) - _gemm_macs(shaped, googlenet_variant=True) == extra
    assert round(_gemm_macs(shaped) / 1e9, 3) == 1.583


@pytest.mark.parametrize("net", NEW)
def test_every_rule_set_that_can_read_them(net):
    """paleo-2018, planner and modern read all four with the same shapes, params and FLOPs;
    paleo-2016 reads only vgg_a (it has no BatchNorm, and googlenet's LRN is a Generic layer)."""
    ref = catalog.load_net(net, "paleo-2018")
    ref_flops = _fwd_flops_by_type(ref, "paleo-2018")
    for rules_name in RULES_OK[1:]:
        other = catalog.load_net(net, rules_name)
        assert [(s.name, s.out_shape) for s in other.layers] == [(s.name, s.out_shape) for s in ref.layers]
        assert _fwd_flops_by_type(other, rules_name) == ref_flops
    if net == "vgg_a":
        assert catalog.net_costs(net, "paleo-2016").total_params == PALEO_PARAMS[net]
    else:
        missing = "Generic" if net == "googlenet" else "BatchNorm"
        with pytest.raises(SpecError, match=f"'{missing}' is not supported by rules paleo-2016"):
            catalog.load_net(net, "paleo-2016")


# He et al. 2016, Table 1: bottleneck units per stage (also torchvision's resnet101/152 builders).
RESNET_UNITS = {"resnet50": [3, 4, 6, 3], "resnet101": [3, 4, 23, 3], "resnet152": [3, 8, 36, 3]}


@pytest.mark.parametrize("net", sorted(RESNET_UNITS))
def test_resnet_structure_and_v15_strides(net):
    shaped = catalog.load_net(net, "planner")
    convs = [s for s in shaped.layers if s.type == "Convolution"]
    units = RESNET_UNITS[net]
    blocks = sorted({s.name.split("/")[0] for s in convs if "/" in s.name})
    assert [sum(b.startswith(f"res{i + 2}") for b in blocks) for i in range(4)] == units
    # weight layers named in the depth: conv1, three per unit, the FC layer (projections aside)
    assert 1 + 3 * sum(units) + 1 == int(net.removeprefix("resnet"))
    assert len([s for s in convs if not s.name.endswith("/proj")]) == 1 + 3 * sum(units)
    strided = {s.name for s in convs if s.layer.spec["strides"][1] == 2}
    # v1.5: the stride sits on the 3x3 conv2 (and the projection) of each stage's first unit
    assert strided == {"conv1"} | {
        f"{b}/{c}" for b in blocks if b[4:] == "a" and b[3] in "345" for c in ("conv2", "proj")
    }
    by_name = {s.name: s for s in shaped.layers}
    assert by_name["pool5"].in_shapes[0] == (7, 7, 2048)


def test_googlenet_structure():
    """Szegedy et al. 2015, Table 1: map sizes and depths (the shapes in torchvision's comments too)."""
    shaped = catalog.load_net("googlenet", "planner")
    out = {s.name: s.out_shape for s in shaped.layers}
    assert out["conv1_7x7_s2"] == (112, 112, 64)
    assert out["conv2_3x3"] == (56, 56, 192)
    assert out["inception_3a/output"] == (28, 28, 256)
    assert out["inception_3b/output"] == (28, 28, 480)
    assert out["inception_4a/output"] == (14, 14, 512)
    assert out["inception_4d/output"] == (14, 14, 528)
    assert out["inception_4e/output"] == (14, 14, 832)
    assert out["inception_5b/output"] == (7, 7, 1024)
    # "a 22 layers deep network" (the paper's abstract), counting layers with parameters: 3 stem
    # convolutions, 2 per inception module on the longest path, the classifier
    depth: dict[str, int] = {}
    for s in shaped.layers:
        weighted = s.type in ("Convolution", "InnerProduct")
        depth[s.name] = max((depth[p] for p in s.layer.parents), default=0) + weighted
    assert depth["prob"] == 22
    types = [s.type for s in shaped.layers]
    # 57 convolutions in all; no auxiliary classifier (one InnerProduct)
    assert types.count("Convolution") == 3 + 9 * 6
    assert types.count("InnerProduct") == 1
    assert types.count("Concatenate") == 9
    lrn = [s for s in shaped.layers if s.type == "Generic"]
    assert [s.layer.spec["operation"] for s in lrn] == ["LRN", "LRN"]


def test_googlenet_lrn_is_free_under_paleo_rules_and_costed_under_modern():
    """LRN (a Generic layer) is free under PALEO's rules and an elementwise, memory-bound layer under modern."""
    shaped = catalog.load_net("googlenet", "paleo-2018")
    rules = get_rules("paleo-2018")
    for s in shaped.layers:
        if s.type == "Generic":
            assert not any(sum(w.flops) for w in layers.work(s, 8, rules, "gemm").values())
    costs = catalog.net_costs("googlenet", "modern")
    terms = roofline.terms(costs)
    rows = [i for i, s in enumerate(costs.net.layers) if s.type == "Generic"]
    assert len(rows) == 2
    assert all(terms.act_b[i, 0] > 0 and terms.kernels[i, 0] == 1 for i in rows)


def test_vgg_a_structure():
    """Simonyan & Zisserman 2015, Table 1, configuration A: 8 conv + 3 FC = 11 weight layers."""
    shaped = catalog.load_net("vgg_a", "paleo-2016")
    convs = [s for s in shaped.layers if s.type == "Convolution"]
    assert len(convs) == 11
    widths = [64, 128, 256, 256, 512, 512, 512, 512, 4096, 4096, 1000]
    assert [s.layer.spec["filter"][3] for s in convs] == widths
    assert not any(s.type == "Generic" for s in shaped.layers)  # no LRN in configuration A
