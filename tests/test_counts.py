"""Parameter, FLOP, layer and activation counts of the PALEO zoo nets, in both rule sets.

Every number is from paleo-model.md §E.2 ("Shipped nets", the table and its notes); they are
exact integers, so the comparisons are exact. FLOPs are at batch 1 and count 2 per MAC.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from costs.rules import get_rules
from costs.specs import layers
from planner import catalog

RULES = ("paleo-2016", "paleo-2018")

# paleo-model.md §E.2, table "Shipped nets": params, params bytes, fwd FLOPs @b1 and its conv /
# pool / dropout split, bwd FLOPs @b1 as (paleo-2016, paleo-2018). Planner's zoo names:
# alexnet = alex_v2.json, alexnet_cc2 = alex_v2_1gpu.json.
E2_TABLE = {
    "alexnet": (
        50_303_912,
        201_215_648,
        1_474_511_360,
        1_473_111_552,
        1_391_616,
        8_192,
        (4_070_425_088, 4_070_425_088),
    ),
    "alexnet_cc2": (
        49_566_504,
        198_266_016,
        1_262_174_720,
        1_260_774_912,
        1_391_616,
        8_192,
        (3_645_751_808, 3_645_751_808),
    ),
    "vgg16": (
        138_357_544,
        553_430_176,
        30_952_779_776,
        30_940_528_640,
        12_242_944,
        8_192,
        (71_584_903_168, 71_584_903_168),
    ),
    "nin": (
        7_595_176,
        30_380_704,
        1_940_985_808,
        1_938_921_728,
        2_054_480,
        9_600,
        (3_676_674_000, 3_676_674_000),
    ),
    "overfeat": (
        145_704_424,
        582_817_696,
        5_295_021_056,
        5_294_022_656,
        991_232,
        7_168,
        (18_540_960_768, 18_540_960_768),
    ),
    # Inception's bwd differs between the rule sets: 25,016,089,792 (paleo-2016) vs
    # 25,016,432,768 (paleo-2018) (§E.2 table; §A.4.3 last bullet).
    "inception_v3": (
        23_734_312,
        94_937_248,
        11_324_039_360,
        11_274_976_448,
        49_060_864,
        2_048,
        (25_016_089_792, 25_016_432_768),
    ),
}

# paleo-model.md §E.2, notes: "`summary` at the JSON batch reports activation bytes".
# (alex_v2_1gpu has no value there, so alexnet_cc2 is not checked.)
ACTIVATION_BYTES = {
    "alexnet": 363_569_152,
    "vgg16": 3_903_180_800,
    "nin": 959_770_624,
    "overfeat": 520_766_976,
    "inception_v3": 3_713_243_904,
}

# paleo-model.md §E.2, table column "input tensor (default batch)".
DEFAULT_BATCH = {
    "alexnet": 128,
    "alexnet_cc2": 128,
    "vgg16": 64,
    "nin": 128,
    "overfeat": 128,
    "inception_v3": 64,
}

POOL_TYPES = ("Pooling", "AvgPool")  # §A.4.6: max and average pooling share the formula


def _phase_flops(shaped, rules, phase: str, n: int = 1) -> int:
    """FLOPs of one phase, rounded to an integer: the holes fraction of the gradient dummies
    (§A.4.3 step 6) is a float, so e.g. 135489024 arrives as 135489023.99999997."""
    w = layers.work(shaped, n, rules, "gemm")
    return round(sum(w[phase].flops)) if phase in w else 0


@pytest.fixture(params=RULES)
def rules_name(request) -> str:
    return request.param


@pytest.mark.parametrize("net", E2_TABLE)
def test_params(net, rules_name):
    params, params_bytes, *_ = E2_TABLE[net]
    shaped = catalog.load_net(net, rules_name).layers
    total = sum(layers.params(s) for s in shaped)
    assert total == params
    assert 4 * total == params_bytes
    assert catalog.net_costs(net, rules_name).total_params == params


@pytest.mark.parametrize("net", E2_TABLE)
def test_forward_flops_batch1(net, rules_name):
    _, _, fwd, conv, pool, dropout, _ = E2_TABLE[net]
    rules = get_rules(rules_name)
    by_type = Counter()
    for s in catalog.load_net(net, rules_name).layers:
        by_type[s.type] += _phase_flops(s, rules, "fwd")
    assert sum(by_type.values()) == fwd
    assert by_type["Convolution"] == conv
    assert sum(by_type[t] for t in POOL_TYPES) == pool
    assert by_type["Dropout"] == dropout
    # Nothing else has forward work (§A.4.6: concat, softmax, input cost 0).
    assert set(k for k, v in by_type.items() if v) <= {"Convolution", "Dropout", *POOL_TYPES}


@pytest.mark.parametrize("net", E2_TABLE)
def test_backward_flops_batch1(net, rules_name):
    expected = E2_TABLE[net][6][RULES.index(rules_name)]
    rules = get_rules(rules_name)
    bwd = sum(
        _phase_flops(s, rules, phase)
        for s in catalog.load_net(net, rules_name).layers
        for phase in ("bwd_data", "bwd_filter")
    )
    assert bwd == expected


@pytest.mark.parametrize("net", E2_TABLE)
def test_flops_are_linear_in_batch(net, rules_name):
    """§E.2 notes: "FLOPs are linear in the batch"."""
    rules = get_rules(rules_name)
    for s in catalog.load_net(net, rules_name).layers:
        for phase in ("fwd", "bwd_data", "bwd_filter"):
            assert _phase_flops(s, rules, phase, 3) == 3 * _phase_flops(s, rules, phase, 1), (s.name, phase)


@pytest.mark.parametrize("net", E2_TABLE)
def test_default_batch(net, rules_name):
    assert catalog.load_net(net, rules_name).default_batch == DEFAULT_BATCH[net]


@pytest.mark.parametrize("net", ACTIVATION_BYTES)
def test_activation_bytes_at_json_batch(net, rules_name):
    """Σ over all layers (incl. data) of output elements x batch x 4 bytes (§E.2 notes)."""
    shaped = catalog.load_net(net, rules_name)
    elems = sum(math.prod(s.out_shape) for s in shaped.layers)
    assert elems * shaped.default_batch * 4 == ACTIVATION_BYTES[net]


def test_inception_layer_counts(rules_name):
    """§E.2 notes, "Layer counts": 94 conv, 4 max-pool, 10 avg-pool, 15 concat, 1 dropout;
    126 layers after expansion, including data and softmax."""
    shaped = catalog.load_net("inception_v3", rules_name).layers
    counts = Counter(s.type for s in shaped)
    assert counts["Convolution"] == 94
    assert counts["Pooling"] == 4
    assert counts["AvgPool"] == 10
    assert counts["Concatenate"] == 15
    assert counts["Dropout"] == 1
    assert counts["Input"] == 1
    assert counts["Softmax"] == 1
    assert len(shaped) == 126
