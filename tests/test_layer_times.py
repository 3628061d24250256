"""Per-layer FLOPs and times against paleo-model.md §D.5 ("Layer-wise reference"), both rule sets.

Setting of every time in §D.5: TITAN_X, PPP_comp 0.62, GEMM only; alex_v2 (planner: alexnet) at
batch 128 and vgg16 at batch 64. Times are printed to 3 decimals, so they are checked to
0.0005 ms; FLOPs are exact integers. The worked examples at the end of §D.5 are printed to 5
decimals and checked to 5e-6 ms.
"""

from __future__ import annotations

import numpy as np
import pytest

from costs.model import evaluate, layer_times, plans
from costs.rules import get_rules
from costs.specs import layers
from planner import catalog

RULES = ("paleo-2016", "paleo-2018")
PHASES = ("fwd", "bwd_data", "bwd_filter")
PPP_COMP = 0.62  # §D.5: "PPP_comp 0.62 on TITAN_X"
TOL_3DP = 0.0005 + 1e-9  # half a unit of the printed 3rd decimal, plus float noise
TOL_5DP = 5e-6 + 1e-9  # half a unit of the printed 5th decimal

# paleo-model.md §D.5, "alex_v2, batch 128, TITAN_X, PPP_comp 0.62, GEMM only".
# Columns: layer | fwd FLOPs | bwd-data FLOPs | bwd-filter FLOPs | fwd ms | bwd-data ms |
# bwd-filter ms. Times are "paleo-2016 / paleo-2018" where they differ, one value otherwise.
ALEXNET_D5 = """
conv1 | 17342595072 | 0 | 17342595072 | 5.324 | 0.000 | 5.324
pool1 | 99680256 | 99680256 | 0 | 0.552 | 0.552 | 0.000
conv2 | 53162803200 | 53162803200 | 53162803200 | 14.357 / 14.390 | 14.357 / 14.455 | 14.357 / 14.390
pool2 | 63700992 | 63700992 | 0 | 0.377 | 0.377 | 0.000
conv3 | 24461180928 | 24461180928 | 24461180928 | 6.623 / 6.646 | 6.623 / 6.669 | 6.623 / 6.646
conv4 | 48922361856 | 48922361856 | 48922361856 | 13.119 / 13.165 | 13.119 / 13.165 | 13.119 / 13.165
conv5 | 32614907904 | 32614907904 | 32614907904 | 8.788 / 8.834 | 8.788 / 8.819 | 8.788 / 8.834
pool5 | 14745600 | 14745600 | 0 | 0.103 | 0.103 | 0.000
fc6 | 6710886400 | 167772160000 | 6710886400 | 2.254 | 44.535 / 45.284 | 2.254
dropout6 | 524288 | 524288 | 0 | 0.019 | 0.019 | 0.000
fc7 | 4294967296 | 4294967296 | 4294967296 | 1.446 | 1.446 | 1.446
dropout7 | 524288 | 524288 | 0 | 0.019 | 0.019 | 0.000
fc8 | 1048576000 | 1048576000 | 1048576000 | 0.360 | 0.360 | 0.360
sum | 188737454080 | 332456132608 | 188558278656 | 53.340 / 53.487 | 90.297 / 91.266 | 52.271 / 52.418
"""

# paleo-model.md §D.5, "vgg16, batch 64, TITAN_X, PPP_comp 0.62, GEMM only" (same columns).
# §D.5 writes conv1-1 where the zoo net has conv1_1.
VGG16_D5 = """
conv1-1 | 11098128384 | 0 | 11098128384 | 6.755 / 6.758 | 0.000 | 6.755 / 6.758
conv1-2 | 236760072192 | 236760072192 | 236760072192 | 69.494 / 69.560 | 69.494 / 69.560 | 69.494 / 69.560
pool1 | 411041792 | 411041792 | 0 | 4.695 | 4.695 | 0.000
conv2-1 | 118380036096 | 118380036096 | 118380036096 | 33.830 / 33.863 | 33.830 / 33.897 | 33.830 / 33.863
conv2-2 | 236760072192 | 236760072192 | 236760072192 | 65.826 / 65.892 | 65.826 / 65.892 | 65.826 / 65.892
pool2 | 205520896 | 205520896 | 0 | 2.348 | 2.348 | 0.000
conv3-1 | 118380036096 | 118380036096 | 118380036096 | 32.458 / 32.492 | 32.458 / 32.525 | 32.458 / 32.492
conv3-2 | 236760072192 | 236760072192 | 236760072192 | 63.999 / 64.066 | 63.999 / 64.066 | 63.999 / 64.066
conv3-3 | 236760072192 | 236760072192 | 236760072192 | 63.999 / 64.066 | 63.999 / 64.066 | 63.999 / 64.066
pool3 | 102760448 | 102760448 | 0 | 1.174 | 1.174 | 0.000
conv4-1 | 118380036096 | 118380036096 | 118380036096 | 31.786 / 31.820 | 31.786 / 31.854 | 31.786 / 31.820
conv4-2 | 236760072192 | 236760072192 | 236760072192 | 63.113 / 63.181 | 63.113 / 63.181 | 63.113 / 63.181
conv4-3 | 236760072192 | 236760072192 | 236760072192 | 63.113 / 63.181 | 63.113 / 63.181 | 63.113 / 63.181
pool4 | 51380224 | 51380224 | 0 | 0.587 | 0.587 | 0.000
conv5-1 | 59190018048 | 59190018048 | 59190018048 | 15.810 / 15.845 | 15.810 / 15.845 | 15.810 / 15.845
conv5-2 | 59190018048 | 59190018048 | 59190018048 | 15.810 / 15.845 | 15.810 / 15.845 | 15.810 / 15.845
conv5-3 | 59190018048 | 59190018048 | 59190018048 | 15.810 / 15.845 | 15.810 / 15.845 | 15.810 / 15.845
pool5 | 12845056 | 12845056 | 0 | 0.147 | 0.147 | 0.000
fc6 | 13153337344 | 644513529856 | 13153337344 | 5.321 | 171.064 / 171.850 | 5.321
dropout6 | 262144 | 262144 | 0 | 0.009 | 0.009 | 0.000
fc7 | 2147483648 | 2147483648 | 2147483648 | 0.873 | 0.873 | 0.873
dropout7 | 262144 | 262144 | 0 | 0.009 | 0.009 | 0.000
fc8 | 524288000 | 524288000 | 524288000 | 0.217 | 0.217 | 0.217
sum | 1980977905664 | 2601239969792 | 1980193832960 | 557.182 / 557.792 | 716.170 / 717.663 | 548.213 / 548.823
"""


def _parse(table: str) -> dict[str, tuple[tuple[int, ...], dict[str, tuple[float, ...]]]]:
    """{layer: ((fwd, bwd_data, bwd_filter) FLOPs, {rules: (fwd, bwd_data, bwd_filter) ms})}."""
    out = {}
    for line in table.strip().splitlines():
        name, *cells = (c.strip() for c in line.split("|"))
        flops = tuple(int(c) for c in cells[:3])
        pairs = [[float(v) for v in c.split("/")] for c in cells[3:]]
        ms = {r: tuple(p[i] if len(p) == 2 else p[0] for p in pairs) for i, r in enumerate(RULES)}
        out[name.replace("-", "_")] = (flops, ms)
    return out


CASES = {"alexnet": (128, _parse(ALEXNET_D5)), "vgg16": (64, _parse(VGG16_D5))}


def _titan_x_times(net: str, rules_name: str, batch: int) -> np.ndarray:
    """(L, 3) ms per layer and phase on TITAN_X at PPP_comp 0.62, GEMM."""
    costs = catalog.net_costs(net, rules_name, "gemm")
    devices = catalog.device_table(["TITAN_X"])
    t = layer_times(
        costs,
        devices,
        np.array([0]),
        np.array([0]),
        np.array([PPP_COMP]),
        np.array([False]),
        np.array([batch]),
    )
    return t[:, :, 0] * 1e3


def _flops(shaped, rules_name: str, n: int) -> tuple[int, ...]:
    """Per-phase FLOPs rounded to integers (the float holes fraction of §A.4.3 leaves 1e-7 noise)."""
    w = layers.work(shaped, n, get_rules(rules_name), "gemm")
    return tuple(round(sum(w[p].flops)) if p in w else 0 for p in PHASES)


@pytest.mark.parametrize("rules_name", RULES)
@pytest.mark.parametrize("net", CASES)
def test_layer_flops(net, rules_name):
    """§D.5 per-layer FLOPs, the same in both rule sets; the layer list is the net minus
    data and softmax, which cost 0."""
    batch, table = CASES[net]
    shaped = catalog.load_net(net, rules_name).layers
    costed = [s for s in shaped if s.type not in ("Input", "Softmax")]
    assert [s.name for s in costed] == [k for k in table if k != "sum"]
    sums = np.zeros(3, dtype=np.int64)
    for s in shaped:
        got = _flops(s, rules_name, batch)
        if s.type in ("Input", "Softmax"):
            assert got == (0, 0, 0), s.name
            continue
        assert got == table[s.name][0], s.name
        sums += got
    assert tuple(int(x) for x in sums) == table["sum"][0]


@pytest.mark.parametrize("rules_name", RULES)
@pytest.mark.parametrize("net", CASES)
def test_layer_times(net, rules_name):
    """§D.5 per-layer ms (fwd, bwd-data, bwd-filter) and the sum row, to 0.0005 ms."""
    batch, table = CASES[net]
    ms = _titan_x_times(net, rules_name, batch)
    names = [s.name for s in catalog.load_net(net, rules_name).layers]
    bad = []
    for i, name in enumerate(names):
        want = table[name][1][rules_name] if name in table else (0.0, 0.0, 0.0)
        for phase, got, exp in zip(PHASES, ms[i], want):
            if abs(got - exp) > TOL_3DP:
                bad.append(f"{name} {phase}: {got:.6f} ms, §D.5 says {exp:.3f}")
    for phase, got, exp in zip(PHASES, ms.sum(axis=0), table["sum"][1][rules_name]):
        if abs(got - exp) > TOL_3DP:
            bad.append(f"sum {phase}: {got:.6f} ms, §D.5 says {exp:.3f}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("rules_name", RULES)
@pytest.mark.parametrize(("net", "factor"), [("alexnet", 25), ("vgg16", 49)])
def test_fc6_backward_data_inflation(net, factor, rules_name):
    """§A.4.3 / §D.5: fc6 written as a VALID conv with kernel = input (5x5 on 5x5 in AlexNet,
    7x7 on 7x7 in VGG) costs kh*kw times its forward FLOPs in backward-data."""
    batch, _ = CASES[net]
    fc6 = catalog.load_net(net, rules_name)["fc6"]
    kh, kw = fc6.layer.spec["filter"][:2]
    assert kh * kw == factor
    assert fc6.in_shapes[0][:2] == (kh, kw)
    fwd, bwd_data, bwd_filter = _flops(fc6, rules_name, batch)
    assert bwd_data == factor * fwd
    assert bwd_filter == fwd


# paleo-model.md §D.5, "Worked example for a unit test: AlexNet conv2, batch 128, TITAN_X,
# PPP_comp 0.62, GEMM": FLOPs, bytes of each memory term, and their times in ms.
CONV2_FLOPS = 53_162_803_200  # 2*5*5*64*26*26*192*128
CONV2_C_MS = 13.95613
CONV2_INPUT = {"paleo-2018": (29_491_200, 0.13165), "paleo-2016": (22_151_168, 0.09888)}
CONV2_FILTERS = (1_228_800, 0.00549)
CONV2_OUTPUT = (66_453_504, 0.29665)
CONV2_TOTAL_MS = {"paleo-2018": 14.38991, "paleo-2016": 14.35714}


@pytest.mark.parametrize("rules_name", RULES)
def test_conv2_worked_example(rules_name):
    rules = get_rules(rules_name)
    conv2 = catalog.load_net("alexnet", rules_name)["conv2"]
    fwd = layers.work(conv2, 128, rules, "gemm")["fwd"]
    assert [int(f) for f in fwd.flops] == [CONV2_FLOPS]
    terms = [CONV2_INPUT[rules_name], CONV2_FILTERS, CONV2_OUTPUT]
    assert [int(b) for b in fwd.bytes] == [b for b, _ in terms]

    # §A.2: C = FLOPs / peak / PPP_comp; §A.3: M = bytes / 2**30 / bandwidth("GB/s") / PPP_comp.
    dev = catalog.device("TITAN_X").device
    c_ms = fwd.flops[0] / (dev.peak_flops["fp32"] * PPP_COMP) * 1e3
    assert abs(c_ms - CONV2_C_MS) <= TOL_5DP
    gib_per_s = dev.mem_bandwidth / 1e9 * rules.mem_bytes_per_gb  # PALEO reads GB/s as GiB/s
    for nbytes, (_, want_ms) in zip(fwd.bytes, terms):
        assert abs(nbytes / (gib_per_s * PPP_COMP) * 1e3 - want_ms) <= TOL_5DP

    ms = _titan_x_times("alexnet", rules_name, 128)
    i = [s.name for s in catalog.load_net("alexnet", rules_name).layers].index("conv2")
    assert abs(ms[i, 0] - CONV2_TOTAL_MS[rules_name]) <= TOL_5DP


# paleo-model.md §D.5, "Weight-update example: AlexNet v2 on K80, P = 50,303,912. The update
# costs 0.01797 ms of compute plus 1.17123 ms of memory, 1.18919 ms in total."
UPDATE_PARAMS = 50_303_912
UPDATE_C_MS, UPDATE_M_MS, UPDATE_MS = 0.01797, 1.17123, 1.18919


@pytest.mark.parametrize("rules_name", RULES)
def test_weight_update_example(rules_name):
    costs = catalog.net_costs("alexnet", rules_name)
    assert costs.total_params == UPDATE_PARAMS
    dev = catalog.device("K80").device
    # §A.5: update = C(2P) + 3 M(4P), at PPP_comp 1.0.
    c_ms = 2 * UPDATE_PARAMS / dev.peak_flops["fp32"] * 1e3
    m_ms = 3 * 4 * UPDATE_PARAMS / (dev.mem_bandwidth / 1e9 * 2**30) * 1e3
    assert abs(c_ms - UPDATE_C_MS) <= TOL_5DP
    assert abs(m_ms - UPDATE_M_MS) <= TOL_5DP

    # The evaluator's update, at two PPP_comp values: PALEO ignores PPP_comp here (§A.5, F.9).
    p = plans(
        costs.n_layers,
        device=0,
        batch=128,
        workers=1,
        scheme=1,
        network=0,
        ppp_comp=np.array([1.0, 0.62]),
        ppp_comm=1.0,
    )
    r = evaluate(costs, p, catalog.device_table(["K80"]), catalog.link_table(["ethernet20"]))
    update_ms = r.update * 1e3
    assert np.all(np.abs(update_ms - UPDATE_MS) <= TOL_5DP), update_ms
