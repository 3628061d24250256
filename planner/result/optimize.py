"""The Result stage of `planner optimize`: the answer as plain data, from a search's Outcome.

One objective: the best feasible plan (the certified optimum when the space was enumerated,
with the search's gap to it) and the best plans of other (GPU type, GPU count) pairs. Several
objectives: the Pareto front. Either way the winner is explained (:mod:`planner.result.explain`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from planner.errors import InfeasibleError
from planner.metrics.scorer import Scorer
from planner.request.optimize import OptimizeRequest, request_dict
from planner.result.confidence import confidence, reach
from planner.result.degrees import degrees
from planner.result.explain import baseline, diagnose, explain
from planner.result.front import FRONT_TOLERANCE, thin
from planner.result.records import plan_record
from planner.result.sensitivity import sensitivity
from planner.result.stacks import by_stack
from planner.search.certify import Outcome
from planner.search.scored import TIE, Scored, best_index, front_indices, ranked
from planner.search.stream import Keep

ALTERNATIVE_AXES = ("gpu", "gpus")  # the next best plans are the best of other (GPU type, count) pairs


@dataclass
class Result:
    """The outcome, as plain data (dicts and lists) for every renderer."""

    net: str
    objectives: tuple[str, ...]
    best: dict
    alternatives: list[dict]
    pareto: list[dict]
    constraints: dict
    search: dict
    baseline: dict
    request: dict = field(default_factory=dict)
    energy: str = ""  # the energy model's parameters in words (PUE, grid intensity, powers)

    def to_dict(self) -> dict:
        return asdict(self)


def _lowest(s: Scored) -> float | None:
    """The lowest objective value of the feasible plans of ``s`` (None when none is feasible)."""
    ok = s.feasible
    return float(s.objectives[0, ok].min()) if ok.any() else None


def _gap(found: float, opt: float) -> float:
    """The search's relative distance to the optimum: its lowest objective value against the
    space's (an optimum of 0, e.g. the cost of owned GPUs at no marginal price: 0 when found,
    else inf). Never negative: the space's lowest value is at most any value the search found.
    (Comparing the plans each ranks first would not do: within a tie step of 0.5% the ranking
    prefers the cheaper or faster plan, so the search's first plan could score lower than the
    space's and the gap read negative.)"""
    if found <= opt:
        return 0.0
    return (found - opt) / abs(opt) if opt else float("inf")


def needs(scorer: Scorer, objectives: tuple[str, ...], req: OptimizeRequest) -> Keep:
    """What :func:`result` reads of an enumerated space: the best plan, the best of
    ``req.alternatives`` other groups, and the plans the confidence Monte Carlo re-ranks."""
    return Keep(ALTERNATIVE_AXES, req.alternatives, reach(scorer, objectives))


def _certified(out: Outcome) -> Scored:
    """The plans to answer from: the enumerated space's kept plans (:func:`needs`; the search's
    gap to its optimum goes into ``out.search``), else what the search scored."""
    found, full = out.found, out.full
    if full is None:
        return found
    j = best_index(full)
    if j is None:
        return found
    out.search["exhaustive_optimum"] = float(full.objectives[0, j])
    out.search["exhaustive_plans"] = out.enumerated.valid if out.enumerated else len(full)
    low = _lowest(found)
    out.search["gap"] = _gap(low, _lowest(full)) if low is not None else None
    return full


def _single(out: Outcome, alternatives: int) -> tuple[Scored, int, dict, list[dict], list[dict]]:
    """One objective: the best plan and the best of other (GPU type, GPU count) pairs."""
    pool = _certified(out)
    if best_index(pool) is None:
        raise InfeasibleError(diagnose(out.scorer, out.parts()))
    scorer, sp = out.scorer, out.scorer.space
    order = ranked(pool)
    best = plan_record(scorer, pool.cols, int(order[0]), out.objectives)
    alts, seen = [], {tuple(best[a] for a in ALTERNATIVE_AXES)}
    for j in order[1:]:
        key = tuple(sp.choices(a)[int(pool.cols[a][j])] for a in ALTERNATIVE_AXES)
        if key in seen:
            continue
        seen.add(key)
        alts.append(plan_record(scorer, pool.cols, int(j), out.objectives))
        if len(alts) >= alternatives:
            break
    return pool, int(order[0]), best, alts, []


def _front(out: Outcome, alternatives: int) -> tuple[Scored, int, dict, list[dict], list[dict]]:
    """Several objectives: the Pareto front, fastest first."""
    src = out.evaluated
    keep = front_indices(src)
    if keep.size == 0:
        raise InfeasibleError(diagnose(out.scorer, out.parts()))
    front = [plan_record(out.scorer, src.cols, int(j), out.objectives) for j in keep]
    out.search.update(out.front_check(keep))
    listed, merged = thin(front)
    out.search.update(front_tolerance=FRONT_TOLERANCE, front_merged=merged)
    keep, front = keep[listed], [front[i] for i in listed]
    return src, int(keep[0]), front[0], front[1 : 1 + alternatives], front


def result(out: Outcome, req: OptimizeRequest) -> Result:
    """The answer to ``req`` from the search's outcome (see the module docstring)."""
    pick = _single if len(out.objectives) == 1 else _front
    pool, best_i, best, alts, front = pick(out, req.alternatives)
    base = baseline(out.scorer, pool.cols, best_i)
    best["why"] = explain(best, base)
    best["degrees"] = degrees(out.scorer, pool.cols, best_i, out.objectives[0])
    if len(out.objectives) == 1 and alts and alts[0]["objective"] <= best["objective"] * (1 + TIE):
        best["why"].append(
            f"as good as the next best within {TIE:.1%}: among plans that tie, the cheaper (for time) or faster "
            "(for cost) wins, then the one on fewer nodes, then the less communication-bound."
        )
    sure = confidence(out.scorer, pool, out.objectives, req.seed)
    if sure is not None:
        best["confidence"] = sure
    stacks = by_stack(out.scorer, pool, out.objectives) if len(out.objectives) == 1 else []
    if stacks:
        best["stacks"] = stacks
    tornado = sensitivity(out.scorer, pool.cols, best_i)
    if tornado is not None:
        best["sensitivity"] = tornado
    constraints = {
        **out.scorer.limits.summary(),
        "optimizer": out.scorer.optimizer,
        "binding": best["binding"],
    }
    return Result(
        req.net,
        out.objectives,
        best,
        alts,
        front,
        constraints,
        out.search,
        base,
        request=request_dict(req),
        energy=out.scorer.energy.describe(),
    )
