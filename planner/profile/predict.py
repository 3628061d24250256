"""The modern rules' prediction of one profiled configuration, per layer and in total, with
the same cost model options as ``planner estimate`` (the default or a given calibration
profile, the optimizer). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costs.hardware import PRECISIONS
from costs.model import evaluate
from costs.modern import evaluator as modern
from costs.plans import plans
from costs.rules import get_rules
from costs.specs import coefficients
from costs.specs.graph import Net
from planner import catalog
from planner.errors import BadInput
from planner.metrics.model import CostModel
from planner.profile.nets import RULES


@dataclass(frozen=True)
class Prediction:
    """Seconds: per layer (L,) forward and backward; the optimizer step; the host overhead."""

    forward: np.ndarray
    backward: np.ndarray
    update: float
    overhead: float

    @property
    def step(self) -> float:
        return float(self.forward.sum() + self.backward.sum()) + self.update + self.overhead


def predict(
    net: Net, device_key: str, precision: str, batch: int, optimizer: str, calibration: str | None
) -> Prediction:
    info = catalog.device(device_key)
    if precision not in info.device.peak_flops:
        have = ", ".join(info.device.peak_flops)
        raise BadInput(f"device {device_key} has no {precision} peak in the catalog (has: {have})")
    costs = coefficients.build(net, get_rules(RULES), "gemm")
    devices = catalog.device_table([device_key])
    link = info.device.intra_link or next(iter(catalog.networks()))
    links = catalog.link_table([link])
    model = CostModel.of(RULES, calibration, optimizer).for_net(net.meta)  # as `estimate`: the family's stack
    kw = model.kwargs(devices, links)
    prec = PRECISIONS.index(precision)
    p = plans(costs.n_layers, workers=1, batch=batch, scheme=0, device=0, network=0, precision=prec)
    r = evaluate(costs, p, devices, links, **kw)
    fwd, bwd = modern.layer_seconds(costs, devices, kw["efficiency"], 0, prec, batch)
    return Prediction(fwd, bwd, float(r.update[0]), float(r.overhead[0]))
