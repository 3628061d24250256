"""The `planner` rule set: PALEO with its documented defects fixed (paleo-model.md, "Known
defects not to copy into the improved model"). Counts stay PALEO's; costs change as stated."""

from __future__ import annotations

import math

import numpy as np
import pytest

from costs.model import evaluate, plans
from costs.rules import PALEO_2018, PLANNER
from costs.specs import coefficients, layers
from planner import catalog

PALEO_NETS = ["alexnet", "alexnet_cc2", "vgg16", "nin", "overfeat", "inception_v3"]
# paleo-model.md §E.2: params and forward FLOPs at batch 1 do not depend on the rule set
E2 = {
    "alexnet": (50_303_912, 1_474_511_360),
    "alexnet_cc2": (49_566_504, 1_262_174_720),
    "vgg16": (138_357_544, 30_952_779_776),
    "nin": (7_595_176, 1_940_985_808),
    "overfeat": (145_704_424, 5_295_021_056),
    "inception_v3": (23_734_312, 11_324_039_360),
}


@pytest.mark.parametrize("net", PALEO_NETS)
def test_counts_are_paleos_and_gradients_cost_a_forward_each(net):
    n = catalog.load_net(net, "planner")
    params = sum(layers.params(s) for s in n.layers)
    fwd = bwd = expected_bwd = 0.0
    for s in n.layers:
        w = layers.work(s, 1, PLANNER)
        f = sum(w["fwd"].flops) if "fwd" in w else 0.0
        b = sum(sum(w[p].flops) for p in ("bwd_data", "bwd_filter") if p in w)
        fwd, bwd = fwd + f, bwd + b
        if s.type == "Convolution":
            # data gradient (unless fed by the input) and filter gradient: one forward's FLOPs each
            expected_bwd += f * (1 if "data" in s.layer.parents else 2)
        else:
            expected_bwd += f  # pooling and dropout: as PALEO, once
    assert (params, round(fwd)) == E2[net]
    assert math.isclose(bwd, expected_bwd, rel_tol=1e-12)


def test_no_fc_as_conv_inflation():
    """AlexNet fc6: PALEO's data gradient costs 25x its forward (§D.5); planner's costs 1x."""
    net = catalog.load_net("alexnet", "planner")
    fc6 = net["fc6"]
    w = layers.work(fc6, 128, PLANNER)
    assert w["bwd_data"].flops[0] == w["fwd"].flops[0] == 6_710_886_400
    assert layers.work(fc6, 128, PALEO_2018)["bwd_data"].flops[0] == 25 * 6_710_886_400


def test_conv2_decimal_units_and_unpadded_reads():
    """§D.5 worked example, with one decimal unit: C = 13.95613 ms as PALEO; memory terms
    22,151,168 + 1,228,800 + 66,453,504 bytes at 336.5e9 B/s and PPP 0.62."""
    costs = coefficients.build(catalog.load_net("alexnet", "planner"), PLANNER)
    names = [s.name for s in costs.net.layers]
    from costs.model import layer_times

    dev = catalog.device_table(["TITAN_X"])
    t = layer_times(
        costs, dev, np.array([0]), np.array([0]), np.array([0.62]), np.array([False]), np.array([128])
    )
    c = 53_162_803_200 / 6.144e12 / 0.62
    m = (22_151_168 + 1_228_800 + 66_453_504) / 336.5e9 / 0.62
    assert math.isclose(t[names.index("conv2"), 0, 0], c + m, rel_tol=1e-12)
    assert math.isclose((c + m) * 1e3, 14.386717, abs_tol=5e-7)  # vs 14.38991 ms in paleo-2018


def test_update_applies_ppp():
    """§D.5 weight-update example (K80, P = 50,303,912) under PPP 0.62 in decimal units."""
    costs = coefficients.build(catalog.load_net("alexnet", "planner"), PLANNER)
    dev = catalog.device_table(["K80"])
    links = catalog.link_table(["ethernet20"])
    r = evaluate(
        costs, plans(costs.n_layers, device=0, batch=1, workers=1, network=0, ppp_comp=0.62), dev, links
    )
    p = 50_303_912
    expected = (2 * p / 5.6e12 + 3 * 4 * p / 480e9) / 0.62
    assert math.isclose(r.update[0], expected, rel_tol=1e-12)


def test_optimizer_accepts_planner_rules(capsys, tmp_path):
    from planner.cli import main

    assert (
        main(["optimize", "alexnet", "--budget", "8gpus", "--rules", "planner", "--out", str(tmp_path / "r")])
        == 0
    )
    out = capsys.readouterr().out
    assert "--rules planner" in out
