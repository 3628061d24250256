"""Convolution structure of the modern roofline: implicit-GEMM tile and wave quantization and
Winograd, checked by hand on one layer and as properties over every zoo net.

Hand counts follow NVIDIA's "Matrix Multiplication Background User's Guide" (tile quantization:
a partial tile costs a whole tile; wave quantization: tiles run in waves of one per SM) and
Lavin & Gray, arXiv:1509.09308 (Winograd F(2x2,3x3): 16 multiplications instead of 36).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from costs.hardware import PRECISIONS
from costs.model import evaluate, plans
from costs.modern import roofline, tiling
from costs.rules import MODERN
from costs.specs.coefficients import build
from costs.specs.graph import build_net
from planner import catalog
from planner.calibrate import profile

FWD, BWD_DATA, BWD_W = range(3)


def _net():
    """17x17x64 input -> 1x1 conv -> BN -> 3x3 stride-1 conv 64 -> 192 -> BN (no bias kernels)."""
    spec = {
        "name": "conv",
        "layers": {
            "data": {"type": "Input", "parents": [], "tensor": [1, 17, 17, 64]},
            "c0": {"type": "Convolution", "parents": ["data"], "filter": [1, 1, 64, 64], "padding": "SAME"},
            "bn0": {"type": "BatchNorm", "parents": ["c0"]},
            "c1": {"type": "Convolution", "parents": ["bn0"], "filter": [3, 3, 64, 192], "padding": "SAME"},
            "bn1": {"type": "BatchNorm", "parents": ["c1"]},
        },
    }
    net = build_net(spec, "conv.json", MODERN)
    return net, roofline.build(net, build(net, MODERN).params)


def test_tile_and_wave_utilisation_by_hand():
    net, t = _net()
    i = [s.name for s in net.layers].index("c1")
    # forward GEMM: M = 32 x 17 x 17 = 9248 rows, N = 192 output channels, K = 64 x 9
    assert (t.gm_n[i, FWD] * 32 + t.gm_0[i, FWD], t.gn[i, FWD]) == (9248, 192)
    # 256x128 tiles: 37 x 2 = 74 tiles; 128x256: 73 x 1 = 73; either way 2 waves of 56 SMs
    useful = 9248 * 192
    assert tiling.utilisation(9248, 192, 1, 56) == pytest.approx(useful / (2 * 56 * 256 * 128))
    # without waves (SM count unknown): the better orientation's padding, 73 tiles of 128x256
    assert tiling.utilisation(9248, 192, 1, 0) == pytest.approx(useful / (73 * 128 * 256))
    # backward-weights GEMM: M = 192, N = 576, split-K over the batch (no waves)
    assert (t.gm_0[i, BWD_W], t.gn[i, BWD_W], t.waves[i, BWD_W]) == (192, 576, 0)
    assert tiling.utilisation(192, 576, 0, 56) == pytest.approx(192 * 576 / (256 * 640))
    # the H100 GEMM of efficiencies.toml's Hopper figure fills 2 waves of 128x256 tiles exactly
    assert tiling.utilisation(4224, 2048, 1, 132) == pytest.approx(1.0)
    # a phase without a GEMM is not scaled
    assert tiling.utilisation(100, 0, 1, 56) == 1.0


def test_conv_forward_time_is_padded_work_over_winograd():
    net, t = _net()
    i = [s.name for s in net.layers].index("c1")
    peak = np.array([10.6e12])
    times, _ = roofline.phase_times(
        t, 0, np.array([32.0]), peak, peak, np.array([732e9]), np.array([4.0]), np.array([0.0]), 0.0,
        sm=np.array([56.0]), winograd=np.array([2.25]),
    )  # fmt: skip
    flops = 2.0 * 9248 * 192 * 64 * 9
    util = 9248 * 192 / (2 * 56 * 256 * 128)
    assert times[i, FWD, 0] == pytest.approx(flops / (10.6e12 * util * 2.25))
    # the 1x1 convolution reading the input is never Winograd
    assert t.wino[[s.name for s in net.layers].index("c0")].sum() == 0


@pytest.mark.parametrize("name", sorted(catalog.zoo()))
def test_winograd_only_on_3x3_stride1_convolutions(name):
    net = catalog.load_net(name, "modern")
    t = roofline.terms(catalog.net_costs(name, "modern"))
    for i, s in enumerate(net.layers):
        spec = s.layer.spec
        want = (
            s.type == "Convolution"
            and [int(v) for v in spec["filter"][:2]] == [3, 3]
            and [int(v) for v in spec.get("strides", [1, 1, 1, 1])[1:3]] == [1, 1]
            and "data" not in s.layer.parents
        )
        assert np.all(t.wino[i] == (1.0 if want else 0.0)), s.name
        if s.type not in (
            "Convolution",
            "InnerProduct",
            "Linear",
            "LMHead",
            "MoE",
            "MLA",
            "Conv2D",
            "SqueezeExcite",
        ):
            assert np.all(t.gn[i] == 0), s.name  # no GEMM shape, utilisation 1


def test_zoo_has_winograd_and_non_winograd_convolutions():
    counts = {}
    for name in ("vgg16", "resnet50", "alexnet"):
        t = roofline.terms(catalog.net_costs(name, "modern"))
        counts[name] = int(t.wino[:, FWD].sum())
    # VGG-16: 12 of its 13 3x3 convolutions (the first reads the image); ResNet-50: the 16
    # bottlenecks' 3x3 convolutions, 3 of them strided; AlexNet: conv3-5 (conv1 11x11, conv2 5x5)
    assert counts == {"vgg16": 12, "resnet50": 13, "alexnet": 3}


def test_winograd_factor_moves_only_cuda_core_precisions():
    keys = ["P100", "V100_16GB", "H100_SXM"]
    devices, links = catalog.device_table(keys), catalog.link_table(["nvlink2"])
    eff = catalog.efficiency(keys, ["nvlink2"])
    c = catalog.net_costs("vgg16", "modern")
    fp32, tf32, fp16, bf16 = (PRECISIONS.index(p) for p in ("fp32", "tf32", "fp16", "bf16"))
    dev = np.array([0, 0, 1, 1, 2, 2, 2])
    prec = np.array([fp32, fp16, fp32, fp16, fp32, tf32, bf16])
    p = plans(c.n_layers, device=dev, precision=prec, batch=64, workers=1, network=0, intra_link=0)
    base = evaluate(c, p, devices, links, efficiency=eff).total
    none = evaluate(c, p, devices, links, efficiency=replace(eff, winograd=np.ones(3))).total
    faster = none > base * (1 + 1e-9)
    # fp32 everywhere and P100's CUDA-core fp16 use Winograd; tensor-core fp16/tf32/bf16 do not
    assert faster.tolist() == [True, True, True, False, True, False, False]


def test_sm_counts_and_winograd_defaults_from_the_catalog():
    table = catalog.device_table(["P100", "V100_16GB", "A100_80GB", "H100_SXM", "H200"])
    assert table.sm_count.tolist() == [56, 80, 108, 132, 0]  # H200: not catalogued
    eff = catalog.efficiency(["P100", "H100_SXM"], ["nvlink4"])
    np.testing.assert_allclose(eff.winograd, [2.25, 2.25])  # F(2x2,3x3): 36 / 16
    values, names, bounds = eff.to_vector()
    i = names.index("winograd[P100]")
    assert values[i] == 2.25 and tuple(bounds[i]) == (1.0, 4.0)
    assert np.array_equal(eff.from_vector(values).winograd, eff.winograd)


def test_profile_scales_winograd_within_its_range():
    base = catalog.efficiency(["P100", "V100_16GB"], ["nvlink2"])
    eff = profile.Profile({"winograd.Pascal": 0.8, "winograd.Volta": 3.0}, {}, {}).apply(base)
    np.testing.assert_allclose(eff.winograd, [2.25 * 0.8, 4.0])  # Volta capped at F(4x4,3x3)'s 4
    p = profile.from_dict({"profile": {}, "scale": {"winograd.Pascal": 0.9}}, "x")
    assert p.scales == {"winograd.Pascal": 0.9}
