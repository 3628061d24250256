"""Gradient accumulation in the evaluator: microbatches per optimizer step.

Each of the ``a`` microbatches runs forward and backward; the gradients are AllReduced and the
weights updated once per step (PyTorch DDP's ``no_sync``; Li et al., VLDB 2020, §3.2.4). So
forward and backward scale by ``a``; update and gradient sync do not; samples per step scale.
Checked over every zoo CNN, every rule set and every AllReduce scheme.
"""

from __future__ import annotations

import numpy as np
import pytest

from costs import comm
from costs.model import evaluate, plans
from costs.rules import RULES
from planner import catalog

# resnet50's BatchNorm layers are not in paleo-2016's layer types
CASES = [(n, r) for n in ("alexnet", "resnet50", "inception_v3") for r in sorted(RULES)]
CASES = [(n, r) for n, r in CASES if not (n == "resnet50" and r == "paleo-2016")]
ACC = np.array([1, 2, 3, 8, 32])


@pytest.mark.parametrize(("net", "rules"), CASES)
def test_accumulation_scales_compute_not_sync(net, rules):
    costs = catalog.net_costs(net, rules)
    devices = catalog.device_table(["V100_16GB", "A100_80GB"])
    links = catalog.link_table(["eth100", "nvlink2", "nvlink3"])
    schemes = np.arange(len(comm.SCHEME_NAMES))
    a, s, d = np.meshgrid(ACC, schemes, [0, 1], indexing="ij")
    common = dict(
        device=d,
        batch=32,
        workers=16,
        gpus_per_node=8,
        scheme=s,
        network=0,
        intra_link=1 + d,
        ppp_comp=0.62,
        ppp_comm=0.72,
    )
    base = evaluate(costs, plans(costs.n_layers, accumulation=1, **common), devices, links)
    acc = evaluate(costs, plans(costs.n_layers, accumulation=a, **common), devices, links)
    af = a.ravel().astype(float)
    np.testing.assert_allclose(acc.forward, base.forward * af, rtol=1e-12)
    np.testing.assert_allclose(acc.backward, base.backward * af, rtol=1e-12)
    np.testing.assert_array_equal(acc.update, base.update)
    np.testing.assert_array_equal(acc.sync, base.sync)
    np.testing.assert_array_equal(acc.samples, base.samples * a.ravel())
    np.testing.assert_array_equal(acc.activation_bytes, base.activation_bytes)
    # more microbatches per step never lower throughput: the sync is amortised
    tput = acc.throughput.reshape(a.shape)
    assert np.all(np.diff(tput, axis=0) >= -1e-9 * tput[:-1])
