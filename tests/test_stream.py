"""Exhaustive enumeration in chunks: the decoding covers every combination once, and chunked
enumeration answers exactly as scoring the whole space at once."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from planner.errors import InfeasibleError
from planner.pipeline import build, optimize
from planner.request.optimize import OptimizeRequest
from planner.result.explain import diagnose
from planner.result.optimize import needs, result
from planner.search import stream
from planner.search.certify import search_and_certify
from planner.search.scored import Scored, exhaustive, front_indices, merge, pareto_mask, ranked
from planner.search.stream import Keep, enumerate_space, scored_chunks

CASES = [
    OptimizeRequest("alexnet", budget=("16gpus",), trials=30),
    OptimizeRequest("nin", budget=("32gpus",), precision="any", gpu="A100,H100,T4", trials=30),
    OptimizeRequest("resnet50", budget=("$500",), objective="cost", gpu="A100,H100,L4", trials=30),
    OptimizeRequest("alexnet", budget=("16gpus",), objective="throughput", gpu="A100,V100", trials=30),
    OptimizeRequest("alexnet", budget=("8gpus",), rules="paleo-2018", precision="fp32", trials=30),
    OptimizeRequest("vgg16", budget=("32",), objective="time,cost", gpu="V100,T4,A10G", trials=30),
    OptimizeRequest("alexnet", budget=("8gpus",), objective="time,cost,memory", gpu="A100,H100", trials=30),
    # fewer (GPU type, count) groups than alternatives asked for
    OptimizeRequest("googlenet", budget=("2gpus",), gpu="A100", precision="any", trials=30),
]
IDS = [
    "alexnet-time",
    "nin-any",
    "resnet50-cost",
    "alexnet-throughput",
    "paleo",
    "vgg16-front",
    "three",
    "few",
]


def _same(a, b) -> None:
    assert list(a.cols) == list(b.cols)
    for x in a.cols:
        np.testing.assert_array_equal(a.cols[x], b.cols[x])
    np.testing.assert_array_equal(a.objectives, b.objectives)
    np.testing.assert_array_equal(a.constraints, b.constraints)
    np.testing.assert_array_equal(a.tiebreak, b.tiebreak)


def test_decoding_numbers_every_combination_once_in_grid_order():
    scorer, _ = build(OptimizeRequest("alexnet", budget=("64gpus",), precision="any", hybrid=True))
    sp = scorer.space
    shape = [len(sp.choices(a)) for a in sp.names]
    cols = sp.decode(np.arange(sp.raw_size))
    expect = np.indices(shape).reshape(len(shape), -1)
    for k, a in enumerate(sp.names):
        np.testing.assert_array_equal(cols[a], expect[k])
    # every combination once: the numbers re-encode to themselves
    flat = np.ravel_multi_index(tuple(cols[a] for a in sp.names), shape)
    np.testing.assert_array_equal(flat, np.arange(sp.raw_size))
    # chunks of an odd size: the valid combinations of grid(), in its order, each once
    parts = list(sp.chunks(997))
    assert len(parts) == -(-sp.raw_size // 997)
    numbers = np.concatenate([f for f, _ in parts])
    assert np.unique(numbers).size == numbers.size
    grid = sp.grid()
    for a in sp.names:
        np.testing.assert_array_equal(np.concatenate([c[a] for _, c in parts]), grid[a])


@pytest.mark.parametrize("req", CASES, ids=IDS)
def test_tiny_chunks_keep_the_same_plans_and_counts_as_one_chunk(req):
    scorer, objectives = build(req)
    keep = needs(scorer, objectives, req)
    one, n1 = enumerate_space(scorer, objectives, keep, size=scorer.space.raw_size)
    tiny, n2 = enumerate_space(scorer, objectives, keep, size=1000)
    _same(tiny, one)
    assert (n1.valid, n1.feasible, n1.combinations) == (n2.valid, n2.feasible, n2.combinations)
    full = exhaustive(scorer, objectives)
    assert n2.valid == len(full) and n2.feasible == int(full.feasible.sum())
    assert n2.combinations == scorer.space.raw_size
    assert len(tiny) < len(full)  # it keeps a part of the space, not all of it
    if len(objectives) > 1:  # the same front (values and plans) as over the whole space
        a, b = front_indices(tiny), front_indices(full)
        np.testing.assert_array_equal(tiny.objectives[:, a], full.objectives[:, b])
        for x in tiny.cols:
            np.testing.assert_array_equal(tiny.cols[x][a], full.cols[x][b])
    else:  # the same first-ranked plan
        i, j = ranked(tiny)[0], ranked(full)[0]
        assert tiny.key(i) == full.key(j)


@pytest.mark.parametrize("req", CASES, ids=IDS)
def test_streamed_result_equals_the_result_of_the_whole_space(req, monkeypatch):
    """Best plan, alternatives, gap, confidence and front: the same whether the whole space is
    kept or streamed in small chunks."""
    scorer, objectives = build(req)
    whole = result(search_and_certify(scorer, objectives, req), req).to_dict()
    monkeypatch.setattr(stream, "CHUNK", 777)
    scorer, objectives = build(req)
    out = search_and_certify(scorer, objectives, req, keep=needs(scorer, objectives, req))
    assert not out.enumerated.kept_all and len(out.full) < out.enumerated.valid
    streamed = result(out, req).to_dict()
    for r in (whole, streamed):
        r["search"].pop("seconds")
        r["search"].pop("evaluated_plans")
    assert streamed == whole
    assert "exhaustive_optimum" in whole["search"] or "exhaustive_front_size" in whole["search"]


def _synthetic(v, cost, h, start):
    n = len(v)
    s = Scored(
        {"g": np.zeros(n, dtype=np.int64), "h": np.asarray(h, dtype=np.int64)},
        np.asarray([v], dtype=float),
        np.zeros((1, n)),
        np.asarray([cost, np.zeros(n)], dtype=float),
    )
    return np.arange(start, start + n), s


def test_negative_objective_is_exact_even_when_its_tie_steps_widen(monkeypatch):
    """A negative objective (throughput is minimised as its negative) has absolute tie steps
    that widen as the best improves, so a cut made early can drop a plan the final ranking puts
    second: the enumeration sees it and makes a second pass with the final cut."""
    space = SimpleNamespace(choices=lambda a: range(1 if a == "g" else 10), raw_size=11, names=("g", "h"))
    scorer = SimpleNamespace(space=space)
    h = np.arange(10)
    # ten groups at -100 .. -91 (cheaper as they get slower), then one plan far better in group 0
    chunks = [_synthetic(-100.0 + h, 10.0 - h, h, 0), _synthetic([-1000.0], [50.0], [0], 10)]
    monkeypatch.setattr(stream, "scored_chunks", lambda *a, **k: iter(chunks))
    keep = Keep(("g", "h"), 1, 1.0)
    red = stream._Best(scorer, keep)
    for flat, sc in chunks:
        red.add(flat, sc)
    assert not red.exact()  # the first cut (-98) is below the final one (-89)
    pool, counts = enumerate_space(scorer, ("throughput",), keep)
    full = merge([sc for _, sc in chunks])
    # the final ranking: the -1000 plan, then group 4 (-96: same tie step as -100, and cheapest)
    top = [full.key(int(j)) for j in ranked(full)[:2]]
    assert top == [(0, 0), (0, 4)]
    assert [pool.key(int(j)) for j in ranked(pool)[:2]] == top
    assert (counts.valid, counts.feasible) == (11, 11)


def test_pareto_mask_keeps_the_first_of_equal_plans_and_drops_dominated_ones():
    v = np.array([[1.0, 2.0, 1.0, 3.0, 2.0, 1.0], [3.0, 2.0, 3.0, 1.0, 2.5, 4.0]])
    # (1,3) twice: the first; (2,2.5) dominated by (2,2); (1,4) by (1,3)
    np.testing.assert_array_equal(pareto_mask(v), [True, True, False, True, False, False])
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, (3, 300)).astype(float)
    keep = pareto_mask(x)
    for i in range(x.shape[1]):  # brute force: kept iff no other plan dominates it or equals it earlier
        beaten = ((x <= x[:, i : i + 1]).all(axis=0) & (x < x[:, i : i + 1]).any(axis=0)).any()
        first = not (x[:, :i] == x[:, i : i + 1]).all(axis=0).any()
        assert keep[i] == (not beaten and first)


def test_nothing_feasible_is_diagnosed_alike_in_chunks_and_whole():
    req = OptimizeRequest("vgg16", budget=("16gpus", "$0.01"), gpu="T4,A100", trials=20)
    scorer, objectives = build(req)
    full = exhaustive(scorer, objectives)
    assert not full.feasible.any()
    parts = [s for _, s in scored_chunks(scorer, objectives, 300)]
    assert len(parts) > 3
    text = diagnose(scorer, [full])
    assert text == diagnose(scorer, parts)
    assert text.startswith("no plan costs $0.01 or less: the cheapest costs $")
    with pytest.raises(InfeasibleError) as err:
        optimize(
            OptimizeRequest(
                "vgg16", budget=("16gpus", "$0.01"), gpu="T4,A100", trials=20, exhaustive="always"
            )
        )
    assert str(err.value) == text


def test_chunks_are_sized_by_the_bytes_a_plan_takes_to_score():
    """The probe measures what scoring a plan takes (the LLM evaluator of gpt3-175b keeps more
    per plan than alexnet's: about 1.5 kB against 0.6 kB once its shards are built): its chunks
    hold fewer plans, within the bounds."""
    sizes = {}
    for net in ("alexnet", "gpt3-175b") * 2:  # the second round: shards and caches built
        scorer, objectives = build(OptimizeRequest(net, budget=("256gpus",), precision="any"))
        sizes[net] = stream.chunk_size(scorer, objectives)
        assert stream.MIN_CHUNK <= sizes[net] <= stream.MAX_CHUNK
    assert sizes["gpt3-175b"] * 1.5 < sizes["alexnet"]
    assert sizes["alexnet"] * 400 <= stream.CHUNK_BYTES <= sizes["alexnet"] * 2000  # 0.4-2 kB a plan
