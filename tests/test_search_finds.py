"""The default search finds what exists (issue: a search that finds what exists).

Under deadlines, budgets and memory limits the default search never calls a request
infeasible while a feasible plan exists, and where one exists it answers the optimum (search
gap 0.00%) against an independent enumeration: the raw grid of every combination
(:func:`planner.search.scored.exhaustive`) for CNN spaces, ``--exhaustive always`` for
transformer spaces too large for the grid. Deadlines are set from each request's fastest plan
(found by enumeration): just above it (few plans meet it), 1.5x and 4x it, and below it (no
plan can meet it: both must say so).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from planner import catalog
from planner.errors import InfeasibleError
from planner.pipeline import build, optimize
from planner.request.optimize import OptimizeRequest
from planner.result.optimize import _certified
from planner.search import certify, valid
from planner.search.scored import Scored, best_index, exhaustive

CNNS = sorted(
    set(catalog.zoo())
    - set(catalog.zoo_transformers())
    - {n for n, spec in catalog.zoo_info().items() if "vision" in spec}
)
LLM_GPUS = "H100_SXM,A100_80GB,MI300X"
FACTORS = (0.9, 1.02, 1.5, 4.0)  # deadlines as multiples of the fastest plan's time to train


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.6f}h"


def _grid_answer(scorer, objectives) -> float | None:
    """The answer by the raw grid (every combination decoded and tested, without
    planner.search.valid): its first-ranked feasible plan's objective (within a 0.5% tie step
    the ranking prefers the cheaper or faster plan, as the answer does)."""
    full = exhaustive(scorer, objectives)
    j = best_index(full)
    return None if j is None else float(full.objectives[0, j])


def _answer(req: OptimizeRequest) -> float | None:
    try:
        return float(optimize(req).best["objective"])
    except InfeasibleError:
        return None


@pytest.mark.slow
@pytest.mark.parametrize("net", CNNS)
def test_cnn_default_search_finds_the_optimum_under_deadlines(net):
    """Every zoo CNN, a GPU and a dollar budget, four deadlines: the default answer is the raw
    grid's optimum, and "impossible" exactly when the grid has no feasible plan."""
    for budget in (("64gpus",), ("256gpus", "$2000")):
        base = dict(net=net, budget=budget, gpu="A100,H100,L4,T4")
        fastest = optimize(OptimizeRequest(**base)).best["time_to_train_s"]
        for f in FACTORS:
            req = OptimizeRequest(**base, deadline=_hours(fastest * f), objective="cost")
            scorer, objectives = build(req)
            want = _grid_answer(scorer, objectives)
            got = _answer(req)
            assert (got is None) == (want is None), (net, budget, f, got, want)
            if want is not None:
                assert math.isclose(got, want, rel_tol=1e-12), (net, budget, f, got, want)


# Transformer spaces: a few hundred thousand valid plans each. The default search enumerates a
# space of at most certify.ENUMERATE_LIMIT valid plans outright; the limit is lowered here so
# that these spaces go through the search proper (Optuna, the valid-plan sample, the group
# search, refinement), which is what answers for larger spaces.
LLM_CASES = [
    ("llama3-8b", "64gpus", 1024),
    ("llama3-70b", "512gpus", 1024),
    ("gpt3-175b", "512gpus", 1024),
    ("bert-large", "64gpus", None),
    ("gpt2-xl", "512gpus", None),
    ("mixtral-8x7b", "64gpus", 1024),
]


@pytest.mark.slow
@pytest.mark.parametrize("net,budget,global_batch", LLM_CASES)
def test_llm_search_finds_the_optimum_under_deadlines(net, budget, global_batch, monkeypatch):
    monkeypatch.setattr(certify, "ENUMERATE_LIMIT", 20_000)
    base = dict(net=net, budget=(budget,), gpu=LLM_GPUS, global_batch=global_batch)
    fastest = optimize(OptimizeRequest(**base, exhaustive="always"))
    assert fastest.search["method"] == "search" and fastest.search["gap"] == 0.0, fastest.search
    for f, objective in [(f, "cost") for f in FACTORS] + [(1.02, "time")]:
        deadline = _hours(fastest.best["time_to_train_s"] * f)
        req = OptimizeRequest(**base, deadline=deadline, objective=objective, exhaustive="always")
        try:
            r = optimize(req)
        except InfeasibleError:
            assert f < 1, (net, budget, f, objective)  # the enumeration found none either
            continue
        # the search (the default's, run first under "always") found the optimum itself
        assert f >= 1 and r.search["gap"] == 0.0, (net, budget, f, objective, r.search)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw",
    [
        # issue: "no plan finishes within 30.0 days", while 1024 x H100 takes 22.1 days
        dict(
            net="llama3-8b",
            budget=("1024gpus",),
            deadline="30d",
            objective="cost",
            gpu="H100,A100",
            network="ib_ndr",
            global_batch=512,
        ),
        # issue: "closest misses 'deadline' by 809.5%", while a 90.5-day plan exists
        dict(net="llama3-70b", budget=("2048gpus",), global_batch=1024, deadline="120d", objective="cost"),
    ],
)
def test_issue_deadline_requests_answer_the_optimum(kw):
    r = optimize(OptimizeRequest(**kw, exhaustive="always"))
    s = r.search
    assert s["gap"] == 0.0, s
    default = optimize(OptimizeRequest(**kw))
    # the optimum, or a plan within the ranking's 0.5% tie that the tie rule prefers (faster for cost)
    assert s["exhaustive_optimum"] <= default.best["objective"] <= s["exhaustive_optimum"] * 1.005
    assert default.best["time_to_train_s"] <= 120 * 86400


@pytest.mark.parametrize(
    "kw",
    [
        dict(net="alexnet", budget=("16gpus",)),
        dict(net="vgg16", budget=("32",), objective="time,cost", gpu="V100,T4,A10G"),
        dict(net="resnet50", budget=("64gpus",), precision="any", axes=(("accumulation", "1,2,4"),)),
        dict(net="llama3-8b", budget=("64gpus",), global_batch=512, gpu=LLM_GPUS),
        dict(net="llama3-8b", budget=("32gpus",), gpu="H100_SXM"),
        dict(net="mixtral-8x7b", budget=("64gpus",), global_batch=256, gpu="H100_SXM"),
    ],
)
def test_valid_enumeration_equals_the_raw_one(kw):
    """The valid-plan enumeration yields exactly the valid combinations of the raw one, in the
    same order; the count and uniform draws agree with it."""
    scorer, _ = build(OptimizeRequest(**kw))
    space = scorer.space
    raw = np.concatenate([f for f, _ in space.chunks(1 << 18)])
    got = [(f, c) for f, c in valid.chunks(space, 5000)]
    flat = np.concatenate([f for f, _ in got])
    assert np.array_equal(flat, raw)
    assert valid.core(space).count == raw.size
    for f, c in got[:3]:
        assert np.array_equal(valid.numbers(space, c), f)
    draw = valid.core(space).draw(space, 4000, np.random.default_rng(0))
    assert space.valid(draw).all() and np.isin(valid.numbers(space, draw), raw).all()


def test_gap_is_never_negative():
    """Issue: "-0.32% from the exhaustive optimum". Within a 0.5% tie step the ranking prefers
    the cheaper plan, so the space's first-ranked plan (the answer) can score above a plan the
    search ranked first; the gap compares lowest values, never the first-ranked plans."""
    cols = {"gpu": np.array([0, 1])}
    # plan 0: objective 100.0, dearer; plan 1: objective 100.3 (within 0.5%), cheaper: ranked first
    full = Scored(cols, np.array([[100.0, 100.3]]), np.zeros((1, 2)), np.array([[2.0, 1.0], [1, 1], [0, 0]]))
    found = Scored({"gpu": np.array([0])}, np.array([[100.0]]), np.zeros((1, 1)), np.array([[2.0], [1], [0]]))
    out = SimpleNamespace(found=found, full=full, search={}, enumerated=None)
    _certified(out)
    assert out.search["exhaustive_optimum"] == 100.3 and out.search["gap"] == 0.0
    worse = Scored({"gpu": np.array([1])}, np.array([[100.3]]), np.zeros((1, 1)), np.array([[1.0], [1], [0]]))
    out = SimpleNamespace(found=worse, full=full, search={}, enumerated=None)
    _certified(out)
    assert math.isclose(out.search["gap"], 0.003, rel_tol=1e-9)


def test_small_space_is_enumerated_and_says_so(capsys, tmp_path):
    from planner.cli import main

    assert main(["optimize", "nin", "--budget", "8gpus", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "Search: exhaustive: every one of the" in out and "no sampler" in out
    assert (
        main(["optimize", "nin", "--budget", "8gpus", "--exhaustive", "never", "--out", str(tmp_path / "s")])
        == 0
    )
    assert "TPESampler seed 0, 200 trials" in capsys.readouterr().out


def test_search_line_says_what_answered():
    """The "Search:" line names what found the answer: the enumeration alone, the search
    certified by it (its gap), or the enumeration where the search found no feasible plan."""
    from planner.report.text import _search_line

    common = {"sampler": "TPESampler", "seed": 0, "trials": 200, "evaluated_plans": 900, "seconds": 0.5}
    line = _search_line(
        {**common, "method": "search", "exhaustive_optimum": 1.0, "exhaustive_plans": 800, "gap": 0.0}
    )
    assert "exhaustive optimum over 800 plans: the search was 0.00% from it" in line
    line = _search_line(
        {**common, "method": "search", "exhaustive_optimum": 1.0, "exhaustive_plans": 800, "gap": None}
    )
    assert "the search found no feasible plan, the enumeration of 800 plans did" in line
    enum = {
        **common,
        "method": "enumeration",
        "sampler": None,
        "trials": 0,
        "valid_plans": 800,
        "space_size": 2000,
    }
    line = _search_line({**enum, "exhaustive_optimum": 1.0, "gap": 0.0})
    assert line.startswith("Search: exhaustive: every one of the 800 valid plans (of 2,000 combinations)")
    assert "exact optimum" in line and "TPE" not in line


def test_refinement_repairs_a_search_that_found_no_feasible_plan():
    """A deadline just above the fastest plan leaves few feasible plans; from a pool of only
    infeasible ones, refinement descends on the constraint violation (Deb's feasibility rule)
    until it reaches a feasible plan, and then descends on the objective from there."""
    from planner.search.refine import refine, violation
    from planner.search.scored import score

    base = dict(net="bert-large", budget=("64gpus",), gpu="H100_SXM", axes=(("interleave", "1"),))
    fastest = optimize(OptimizeRequest(**base))
    req = OptimizeRequest(**base, deadline=_hours(fastest.best["time_to_train_s"] * 1.02), objective="cost")
    scorer, objectives = build(req)
    c = valid.core(scorer.space)
    rows = len(next(iter(c.cols.values())))
    every = score(
        scorer, {a: c.cols.get(a, np.zeros(rows, dtype=np.int64)) for a in scorer.space.names}, objectives
    )
    assert every.feasible.any() and not every.feasible.all()
    worst = np.flatnonzero(~every.feasible & np.isfinite(violation(every)))[-8:]  # infeasible, valid plans
    pool = Scored(
        {a: col[worst] for a, col in every.cols.items()},
        every.objectives[:, worst],
        every.constraints[:, worst],
    )
    assert best_index(pool) is None
    found = refine(scorer, objectives, pool, SimpleNamespace(refinement_rounds=0))
    j = best_index(found)
    assert j is not None and found.feasible[j]


def test_a_space_without_a_valid_plan_walks_to_an_empty_core():
    """TP 4 on at most 2 GPUs: the walk's rows run out part-way; the core is empty (no
    division by the empty probe), and optimize says no valid plan exists in one line."""
    from planner.cli import main

    scorer, _ = build(
        OptimizeRequest(net="llama3-8b", budget=("2gpus",), gpu="H100_SXM", axes=(("tp", "4"),))
    )
    assert valid.core(scorer.space).count == 0
    assert main(["optimize", "llama3-8b", "--budget", "2gpus", "--gpu", "H100_SXM", "--tp", "4"]) != 0
