"""Gradient accumulation in the evaluator: microbatches per optimizer step.

Each of the ``a`` microbatches runs forward and backward; the gradients are AllReduced and the
weights updated once per step (PyTorch DDP's ``no_sync``; Li et al., VLDB 2020, §3.2.4). So
forward and backward scale by ``a``; update and gradient sync do not; samples per step scale.
Checked over every zoo CNN, every rule set and every AllReduce scheme.
"""

from __future__ import annotations

import numpy as np
import pytest

from costs.comm import schemes as comm
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


# ---- the search axis (planner/space/axes.py) ---------------------------------------------------

from planner.cli import main  # noqa: E402
from planner.pipeline import build, optimize, pareto  # noqa: E402
from planner.request.optimize import OptimizeRequest  # noqa: E402
from planner.search.scored import best_index, exhaustive  # noqa: E402

# vgg16 on 16 GB V100s at a global batch of at least 4,096: at one microbatch per step the
# batch per GPU that reaches it does not fit, so accumulation is what makes it feasible.
MEMORY_BOUND = dict(budget=("8gpus",), gpu="V100_16", min_global_batch=4096, hybrid=False)


def test_default_is_one_step_and_records_show_it():
    scorer, _ = build(OptimizeRequest("alexnet", budget=("8gpus",)))
    assert scorer.space.choices("accumulation") == (1,)
    best = optimize(OptimizeRequest("alexnet", budget=("8gpus",))).best
    assert best["accumulation"] == 1
    assert best["global_batch"] == best["batch_per_worker"] * best["gpus"]


def test_searched_optimum_never_worse_and_uses_accumulation_when_memory_binds():
    one = OptimizeRequest("vgg16", **MEMORY_BOUND)
    many = OptimizeRequest("vgg16", **MEMORY_BOUND, axes=(("accumulation", "1,2,4,8"),))
    s1, obj = build(one)
    s8, _ = build(many)
    assert s8.space.choices("accumulation") == (1, 2, 4, 8)
    assert s8.space.raw_size == 4 * s1.space.raw_size
    f1, f8 = exhaustive(s1, obj), exhaustive(s8, obj)
    i8 = best_index(f8)
    assert i8 is not None
    i1 = best_index(f1)
    if i1 is not None:  # the larger space contains the smaller one
        assert f8.objectives[0, i8] <= f1.objectives[0, i1]
    best = optimize(many).best
    assert best["accumulation"] > 1
    assert best["global_batch"] == best["batch_per_worker"] * best["gpus"] * best["accumulation"]
    assert best["global_batch"] >= 4096
    assert f"--accumulation {best['accumulation']}" in best["estimate_command"]


def test_fixed_global_batch_is_split_into_microbatches():
    req = OptimizeRequest("alexnet", budget=("16gpus",), global_batch=1024, axes=(("accumulation", "1,2,4"),))
    scorer, obj = build(req)
    full = exhaustive(scorer, obj)
    m = scorer.metrics(full.cols)
    k = np.asarray(scorer.space.choices("gpus"))[full.cols["gpus"]]
    a = np.asarray(scorer.space.choices("accumulation"))[full.cols["accumulation"]]
    assert (k * a <= 1024).all()  # the axis's constraint: no empty microbatch
    np.testing.assert_array_equal(m["batch_per_worker"], np.ceil(1024 / (k * a)))
    np.testing.assert_array_equal(m["global_batch"], m["batch_per_worker"] * k * a)


def test_estimate_reproduces_an_accumulated_plan(capsys):
    best = optimize(OptimizeRequest("vgg16", **MEMORY_BOUND, axes=(("accumulation", "1,2,4,8"),))).best
    args = best["estimate_command"].split()[2:]
    assert main(["estimate", *args, "--format", "json"]) == 0
    import json

    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["accumulation"] == best["accumulation"]
    assert rec["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-12)
    assert rec["effective_batch"] == best["global_batch"]


def test_cli_option_and_bad_value(capsys, tmp_path):
    code = main(
        ["optimize", "alexnet", "--budget", "8gpus", "--accumulation", "1,2", "--out", str(tmp_path / "r")]
    )
    out = capsys.readouterr().out
    assert code == 0 and ", accumulation " in out
    assert (
        main(
            ["optimize", "alexnet", "--budget", "8gpus", "--accumulation", "0", "--out", str(tmp_path / "x")]
        )
        == 2
    )
    assert "--accumulation" in capsys.readouterr().err
    assert main(["estimate", "alexnet", "--accumulation", "0"]) == 2


def test_pareto_trials_and_plan_files_carry_the_axis():
    req = OptimizeRequest(
        "alexnet", budget=("8gpus",), objective="time,cost", gpu="A100", axes=(("accumulation", "1,2"),)
    )
    data, files = pareto(req)
    header = files["trials.csv"].splitlines()[0].split(",")
    assert "accumulation" in header
    col = header.index("accumulation")
    values = {line.split(",")[col] for line in files["trials.csv"].splitlines()[1:]}
    assert values == {"1", "2"}
    import json

    plan = json.loads(files["plan_0.json"])
    assert plan["accumulation"] == data["front"][0]["accumulation"]


def test_sweep_grid_takes_the_axis(tmp_path):
    from planner.sweep.spec import load

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: acc\ngrid:\n  net: [alexnet]\n  accumulation: [1, [1, 2, 4]]\noptions:\n  budget: 8gpus\n"
    )
    cells = load(spec, tmp_path).cells()
    assert [dict(c.request.axes) for c in cells] == [{"accumulation": "1"}, {"accumulation": "1,2,4"}]
