"""Epochs to a target accuracy by global batch (planner.epochs), against the cited values.

- Goyal et al. 2017 (arXiv:1706.02677): ResNet-50, 90 epochs, no accuracy loss up to a global
  batch of 8,192; past it the rule keeps the 8k run's step count (Shallue et al. 2019).
- MLPerf Training reference convergence points, ResNet-50 v1.5 to 75.9% top-1 with LARS
  (mlcommons/logging rcp_checker/training_4.0.0/rcps_resnet.json @0a0a659): mean epochs to
  converge, e.g. 1,632: 595/17 = 35.0; 8,192: 420/10 = 42.0; 32,768: 560/10 = 56.0;
  67,840: 2,404/28 = 85.86.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner import api
from planner.epochs import GOYAL_EPOCHS, MLPERF_RCP_EPOCHS, rule_for


def test_goyal_rule_holds_90_epochs_to_8k_then_keeps_the_steps():
    rule = rule_for("resnet50", "momentum")
    assert rule.name == "goyal-2017"
    e = rule.epochs(np.array([256, 1024, 8192, 16384, 65536]))
    np.testing.assert_allclose(e, [90, 90, 90, 180, 720])
    steps = e * 1_281_167 / np.array([256, 1024, 8192, 16384, 65536])
    assert steps[3] == pytest.approx(steps[2]) and steps[4] == pytest.approx(steps[2])
    assert GOYAL_EPOCHS == 90


def test_mlperf_rule_reads_the_reference_convergence_points():
    rule = rule_for("resnet50", "momentum", "mlperf-lars")
    assert len(MLPERF_RCP_EPOCHS[67840]) == 28 and len(MLPERF_RCP_EPOCHS[1632]) == 17
    e = rule.epochs(np.array([1632, 8192, 32768, 67840]))
    np.testing.assert_allclose(e, [595 / 17, 42.0, 56.0, 2404 / 28])
    between = rule.epochs(np.array([16384]))[0]  # log-linear between 13,056 (45.4) and 32,768
    assert 45.4 < between < 56.0
    assert rule.epochs(np.array([512, 200_000])) == pytest.approx([595 / 17, 2404 / 28])  # flat outside
    assert "outside the reference batches" in rule.describe(200_000)


def test_nets_and_optimizers_without_a_cited_schedule_keep_fixed_epochs():
    assert rule_for("resnet101", "sgd").name == "goyal-2017"
    assert rule_for("resnet101", "momentum", "mlperf-lars") is None  # MLPerf's references: ResNet-50
    assert rule_for("vgg16", "momentum") is None
    assert rule_for("resnet50", "adam") is None


def test_answer_states_the_rule_and_a_larger_batch_is_not_free():
    best = api.optimize("resnet50", budget="64gpus", gpu="A100_80GB", max_global_batch=65536).best
    rec = best.record
    assert rec["epochs"] == 90.0 and best.global_batch <= 8192  # past 8k the steps stop falling
    assert rec["epochs_basis"].startswith("goyal-2017") and "1706.02677" in rec["epochs_source"]
    fixed = api.optimize("resnet50", budget="64gpus", gpu="A100_80GB", epochs=40).best.record
    assert fixed["epochs"] == 40.0 and fixed["epochs_basis"].startswith("fixed")
