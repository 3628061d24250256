"""Tornado rows of costs.sensitivity on real plans of the modern model: signs and magnitudes."""

from __future__ import annotations

import pytest

from costs.model import evaluate, plans
from costs.modern import Options
from costs.sensitivity import tornado
from planner import catalog

BF16 = 3


def _seconds(costs, p, devices, links):
    return lambda eff: float(evaluate(costs, p, devices, links, efficiency=eff, options=Options()).total[0])


@pytest.mark.parametrize("net", ["resnet50", "alexnet", "vgg16"])
def test_compute_bound_single_gpu(net):
    costs = catalog.net_costs(net, "modern")
    devices = catalog.device_table(["A100_80GB"])
    links = catalog.link_table(["ib_hdr", "nvlink3"])
    eff = catalog.efficiency(devices.names, links.names)
    p = plans(
        costs.n_layers,
        device=0,
        batch=256,
        workers=1,
        gpus_per_node=1,
        network=0,
        intra_link=1,
        precision=BF16,
    )
    rows = tornado(
        _seconds(costs, p, devices, links), eff, {"device": 0, "precision": BF16, "intra": 1, "inter": 0}
    )
    by = {r["parameter"]: r for r in rows}
    # one GPU: the links cannot matter
    assert by["link inside a node"]["swing"] == 0 and by["link between nodes"]["swing"] == 0
    # rates: faster when higher; overheads: slower when higher
    for name in ("GEMM/convolution rate", "memory bandwidth"):
        assert by[name]["plus"] <= by[name]["base"] <= by[name]["minus"]
    # +-20% on one rate spans at most base x (1/0.8 - 1/1.2) (time fully bound by it), and the
    # two rate terms together explain a large part of the time
    for r in rows:
        assert r["swing"] <= (1 / 0.8 - 1 / 1.2) * r["base"] + 1e-12
    assert by["GEMM/convolution rate"]["swing"] + by["memory bandwidth"]["swing"] > 0.15 * rows[0]["base"]
    assert rows == sorted(rows, key=lambda r: -r["swing"])


def test_communication_bound_plan_moves_with_the_network():
    costs = catalog.net_costs("alexnet", "modern")
    devices = catalog.device_table(["H100_SXM"])
    links = catalog.link_table(["eth25", "nvlink4"])
    eff = catalog.efficiency(devices.names, links.names)
    p = plans(
        costs.n_layers,
        device=0,
        batch=32,
        workers=64,
        gpus_per_node=8,
        network=0,
        intra_link=1,
        precision=BF16,
    )
    rows = tornado(
        _seconds(costs, p, devices, links), eff, {"device": 0, "precision": BF16, "intra": 1, "inter": 0}
    )
    assert rows[0]["parameter"] == "link between nodes"
    assert rows[0]["plus"] < rows[0]["base"] < rows[0]["minus"]
