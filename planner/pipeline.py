"""The pipeline: one request flows one way through the stages, each handing a typed value on.

    OptimizeRequest --validate--> Problem --build--> Space --Scorer.of--> Scorer
      --search_and_certify--> Outcome --result--> Result          (`planner optimize`)
                                      --pareto_report--> files    (`planner pareto`)

The CLI (:mod:`planner.cli`) and the sweep workers (:mod:`planner.sweep`) call these functions
and print or store what they return; `planner estimate` has its own short path
(:mod:`planner.estimate`): request, evaluator, records.
"""

from __future__ import annotations

from planner.errors import BadInput
from planner.metrics.scorer import Scorer
from planner.request.bounds import MAX_PARETO_PLANS
from planner.request.optimize import OptimizeRequest, validate
from planner.result.optimize import Result, needs, result
from planner.search import valid
from planner.search.certify import search_and_certify
from planner.search.stream import Keep
from planner.space.space import build as build_space

PARETO_KEEP_ALL = 1_000_000  # valid plans of a space whose every plan a Pareto report keeps


def build(req: OptimizeRequest) -> tuple[Scorer, tuple[str, ...]]:
    """Request -> Space -> Evaluator/Metrics: the scorer of ``req`` and its objectives.
    Every bad option raises :class:`~planner.errors.BadInput` here, before any search."""
    problem = validate(req)
    space = build_space(problem)
    return Scorer.of(problem, space), problem.objectives


def optimize(req: OptimizeRequest) -> Result:
    """`planner optimize`: search, certify and explain."""
    scorer, objectives = build(req)
    outcome = search_and_certify(scorer, objectives, req, keep=needs(scorer, objectives, req))
    return result(outcome, req)


def pareto(req: OptimizeRequest) -> tuple[dict, dict[str, str]]:
    """`planner pareto`: a two- or three-objective search written up as report files.
    Raises :class:`~planner.errors.InfeasibleError` before anything is written when no plan is
    feasible."""
    from planner.report.pareto_files import (
        check_objectives,
        pareto_report,
    )  # only `planner pareto` writes them

    check_objectives(req.objective)
    scorer, objectives = build(req)
    # An enumerated space keeps every plan (trials.csv lists them, the chart draws them) up to
    # PARETO_KEEP_ALL valid plans; a larger one keeps its exact front and the search's plans,
    # so memory stays bounded whatever the space.
    count = valid.core(scorer.space).count
    if count > MAX_PARETO_PLANS:
        raise BadInput(
            f"planner pareto: the space has {count:,} valid plans, over the bound of {MAX_PARETO_PLANS:,} "
            "(a report keeps every plan it scores); narrow --budget or --gpu, or use "
            "`planner optimize --objective time,cost`, which keeps the front alone"
        )
    keep = None if count <= PARETO_KEEP_ALL else Keep()
    outcome = search_and_certify(scorer, objectives, req, keep=keep)
    return pareto_report(outcome, req)
