"""The modern rule set's per-layer roofline: properties over every zoo net, published figures.

Reference measurements:
- sandeepkumar-skb/pytorch_experiments torchvision_exp/README.md: torchvision ResNet-50,
  batch 128, one Tesla V100-SXM2, PyTorch eager: FP32 NCHW 342.37 ms, AMP NHWC 110.93 ms per
  iteration (the faster layout of each precision).
- https://gist.github.com/Chillee/2ec89696db8b7ed1c24461159e325405: H100 bf16 GEMM
  4224 x 8192 x 2048 at 780.2 TFLOP/s.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from costs.hardware import PRECISIONS, auto_precision
from costs.model import evaluate, plans
from costs.modern import roofline
from costs.rules import MODERN
from costs.specs import transformer, vision
from costs.specs.graph import build_net
from costs.specs.layers import KINDS
from planner import catalog

DEVICES = ["K80", "P100", "V100_16GB", "T4", "A100_80GB", "H100_SXM", "MI300X"]
LINKS = ["ib_hdr", "nvlink3"]
NETS = sorted(catalog.zoo())
BATCHES = np.array([1, 2, 8, 32, 64, 128, 256, 512])


@pytest.fixture(scope="module")
def tables():
    return catalog.device_table(DEVICES), catalog.link_table(LINKS), catalog.efficiency(DEVICES, LINKS)


def _grid(c, devices, precision=None):
    d, b = np.meshgrid(np.arange(len(DEVICES)), BATCHES, indexing="ij")
    prec = auto_precision(devices.peak, d) if precision is None else precision
    return plans(c.n_layers, device=d, batch=b, precision=prec, workers=1, network=0, intra_link=1)


@pytest.mark.parametrize("net", NETS)
def test_time_monotone_in_batch_bandwidth_and_peak(net, tables):
    devices, links, eff = tables
    c = catalog.net_costs(net, "modern")
    p = _grid(c, devices)
    base = evaluate(c, p, devices, links, efficiency=eff).total.reshape(len(DEVICES), -1)
    assert np.all(np.isfinite(base)) and np.all(base > 0)
    assert np.all(np.diff(base, axis=1) >= -1e-12 * base[:, 1:])
    for field in ("mem_bandwidth", "peak"):
        faster = replace(devices, **{field: getattr(devices, field) * 1.5})
        t = evaluate(c, p, faster, links, efficiency=eff).total.reshape(base.shape)
        assert np.all(t <= base * (1 + 1e-12)), field
    # a higher efficiency never slows a plan either
    t = evaluate(c, p, devices, links, efficiency=replace(eff, memory=eff.memory * 1.2)).total
    assert np.all(t <= base.ravel() * (1 + 1e-12))


@pytest.mark.parametrize("net", NETS)
def test_mixed_precision_beats_fp32_on_tensor_core_gpus(net, tables):
    devices, links, eff = tables
    c = catalog.net_costs(net, "modern")
    tc = [DEVICES.index(k) for k in ("V100_16GB", "T4", "A100_80GB", "H100_SXM", "MI300X")]
    p32 = plans(c.n_layers, device=tc, batch=128, precision=0, workers=1, network=0, intra_link=1)
    pmix = replace(p32, precision=auto_precision(devices.peak, p32.device))
    t32 = evaluate(c, p32, devices, links, efficiency=eff).total
    tmix = evaluate(c, pmix, devices, links, efficiency=eff).total
    assert np.all(tmix < t32)


def test_auto_precision_per_device(tables):
    devices = tables[0]
    got = [PRECISIONS[i] for i in auto_precision(devices.peak, np.arange(len(DEVICES)))]
    # K80 and P100 have no tensor cores (P100's fp16 is 2x fp32 on CUDA cores); V100 and T4
    # have fp16 tensor cores but no bf16; Ampere, Hopper and CDNA3 support bf16.
    assert got == ["fp32", "fp32", "fp16", "fp16", "bf16", "bf16", "bf16"]


def _every_type_net():
    conv = {"filter": [3, 3, 8, 8], "strides": [1, 1, 1, 1], "padding": "SAME"}
    spec = {
        "name": "all",
        "layers": {
            "data": {"type": "Input", "parents": [], "tensor": [4, 8, 8, 8]},
            "c1": {"type": "Convolution", "parents": ["data"], **conv},
            "bn": {"type": "BatchNorm", "parents": ["c1"]},
            "relu": {"type": "ReLU", "parents": ["bn"]},
            "c2": {"type": "Convolution", "parents": ["relu"], **conv},
            "add": {"type": "Elementwise", "parents": ["c2", "relu"], "operation": "sum"},
            "sig": {"type": "Sigmoid", "parents": ["add"]},
            "tanh": {"type": "Tanh", "parents": ["sig"]},
            "gen": {"type": "Generic", "parents": ["tanh"]},
            "up": {"type": "UpSampling2D", "parents": ["gen"]},
            "pool": {"type": "Pooling", "parents": ["up"], "ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1]},
            "dc": {
                "type": "Deconvolution",
                "parents": ["pool"],
                "filter": [2, 2, 8, 8],
                "strides": [1, 2, 2, 1],
                "padding": "SAME",
            },
            "cat": {"type": "Concatenate", "parents": ["dc", "up"], "dim": 3},
            "avg": {"type": "AvgPool", "parents": ["cat"], "ksize": [1, 16, 16, 1], "strides": [1, 1, 1, 1]},
            "flat": {"type": "Reshape", "parents": ["avg"], "output_shape": [-1, 16]},
            "drop": {"type": "Dropout", "parents": ["flat"], "dropout_keep_prob": 0.5},
            "fc": {"type": "InnerProduct", "parents": ["drop"], "num_outputs": 10},
            "prob": {"type": "Softmax", "parents": ["fc"], "num_classes": 10},
        },
    }
    return build_net(spec, "all.json", MODERN)


def test_every_registered_layer_type_costs_time():
    net = _every_type_net()
    types = {s.type for s in net.layers}
    # Every type but the transformer and vision ones (tests/test_transformer_counts.py and
    # tests/test_vision_nets.py cover those).
    assert types == (set(KINDS) & MODERN.layer_types) - transformer.TYPES - vision.TYPES
    from costs.specs.coefficients import build

    t = roofline.build(net, build(net, MODERN).params)
    for i, s in enumerate(net.layers):
        moved = t.act_b[i].sum() + t.fixed[i].sum()
        if s.type == "Reshape":  # a view: no kernel, no bytes
            assert t.kernels[i].sum() == 0 and moved == 0
        else:
            assert t.kernels[i].sum() > 0 and moved > 0, s.type


def test_batchnorm_traffic_is_hand_counted():
    net = _every_type_net()
    from costs.specs.coefficients import build

    t = roofline.build(net, build(net, MODERN).params)
    i = [s.name for s in net.layers].index("bn")
    x = 8 * 8 * 8
    # forward: read x twice (statistics, normalise), write y; backward-data: read x, dy,
    # write dx; backward-weights: read x, dy for dgamma and dbeta
    assert list(t.act_b[i]) == [3 * x, 3 * x, 2 * x]


def test_gemm_fraction_reproduces_published_h100_matmul():
    """An InnerProduct of 8192 -> 2048 at batch 4224 (the gist's GEMM) on H100 in bf16 runs
    at the default GEMM fraction, 780 TFLOP/s within 2% (the forward GEMM is compute-bound)."""
    spec = {
        "name": "mm",
        "layers": {
            "data": {"type": "Input", "parents": [], "tensor": [1, 8192]},
            "fc": {"type": "InnerProduct", "parents": ["data"], "num_outputs": 2048},
        },
    }
    from costs.specs.coefficients import build

    net = build_net(spec, "mm.json", MODERN)
    c = build(net, MODERN)
    devices = catalog.device_table(["H100_SXM"])
    eff = catalog.efficiency(["H100_SXM"], ["nvlink4"])
    t = roofline.build(net, c.params)
    times, _ = roofline.phase_times(
        t,
        0,
        np.array([4224.0]),
        devices.peak[:, 3] * eff.gemm[:, 3],
        devices.peak[:, 0] * eff.vector,
        devices.mem_bandwidth * eff.memory,
        np.array([2.0]),
        np.array([0.0]),
        0.0,
    )
    fwd = times[1, 0, 0]  # the fc layer's forward (no bias kernel: addmm fuses it)
    tflops = 2 * 4224 * 8192 * 2048 / fwd / 1e12
    assert tflops == pytest.approx(780.2, rel=0.02)


def test_resnet50_v100_iteration_near_published_eager_measurement():
    devices = catalog.device_table(["V100_16GB"])
    links = catalog.link_table(["ib_edr", "nvlink2"])
    eff = catalog.efficiency(["V100_16GB"], ["ib_edr", "nvlink2"])
    c = catalog.net_costs("resnet50", "modern")
    p = plans(c.n_layers, device=0, precision=[0, 2], batch=128, workers=1, network=0, intra_link=1)
    ms = evaluate(c, p, devices, links, efficiency=eff).total * 1e3
    assert ms[0] == pytest.approx(342.37, rel=0.25)  # fp32
    assert ms[1] == pytest.approx(110.93, rel=0.25)  # AMP
