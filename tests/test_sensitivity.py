"""Tornado rows of costs.fit.sensitivity on real plans of the modern model: signs and magnitudes."""

from __future__ import annotations

import pytest

from costs.fit.sensitivity import tornado
from costs.model import evaluate, plans
from costs.modern.evaluator import Options
from planner import catalog

BF16 = 3


def _tornado(net: str, device: str, links: list[str], batch: int, workers: int, per_node: int) -> list[dict]:
    """Tornado rows of one bf16 data-parallel plan: links[0] between nodes, links[1] inside."""
    costs = catalog.net_costs(net, "modern")
    devices = catalog.device_table([device])
    table = catalog.link_table(links)
    eff = catalog.efficiency(devices.names, table.names)
    p = plans(
        costs.n_layers,
        device=0,
        batch=batch,
        workers=workers,
        gpus_per_node=per_node,
        network=0,
        intra_link=1,
        precision=BF16,
    )

    def seconds(e):
        return float(evaluate(costs, p, devices, table, efficiency=e, options=Options()).total[0])

    return tornado(seconds, eff, {"device": 0, "precision": BF16, "intra": 1, "inter": 0})


@pytest.mark.parametrize("net", ["resnet50", "alexnet", "vgg16"])
def test_compute_bound_single_gpu(net):
    rows = _tornado(net, "A100_80GB", ["ib_hdr", "nvlink3"], batch=256, workers=1, per_node=1)
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
    rows = _tornado("alexnet", "H100_SXM", ["eth25", "nvlink4"], batch=32, workers=64, per_node=8)
    assert rows[0]["parameter"] == "link between nodes"
    assert rows[0]["plus"] < rows[0]["base"] < rows[0]["minus"]
