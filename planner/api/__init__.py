"""The Python API: `planner optimize`, `planner pareto` and `planner estimate` as functions.

    import planner
    r = planner.optimize("llama3-8b", budget="64gpus", seq_len=4096, objective="cost")
    r.best.gpu, r.best.iteration_ms, r.to_frame()

Keywords are the commands' options in Python spelling (``--seq-len 4096`` is ``seq_len=4096``;
a repeatable option takes a list, ``budget=["64gpus", "$500"]``; a list option a list or its
comma text, ``gpu=["A100", "H100"]``); they are parsed by the commands' own parser
(:mod:`planner.api.options`) and run through the same pipeline, so the API answers what the
command answers. Bad input raises :class:`~planner.errors.BadInput` with the command's one-line
message; a request no plan satisfies raises :class:`~planner.errors.InfeasibleError`. Nothing
is written unless ``out`` is given. docs/api.md has a worked example.
"""

from __future__ import annotations

from planner.api.results import EstimateResult, EstimateRow, OptimizeResult, ParetoResult, Plan

__all__ = ["optimize", "pareto", "estimate", "OptimizeResult", "ParetoResult", "EstimateResult", "Plan"]
__all__ += ["EstimateRow"]


def _request(command: str, net: str, options: dict):
    """The OptimizeRequest the command builds from ``options`` (the command's own code, so the
    two cannot drift), and the ``out`` folder. A keyword that is a field of the request but not
    yet an option of the command (e.g. ``seq_len``) sets that field."""
    from dataclasses import fields, replace

    from planner.api.options import names, parse, request_fields
    from planner.cli.optimize import _optimize_request
    from planner.request.optimize import OptimizeRequest

    cli = names(command)
    direct = {f.name for f in fields(OptimizeRequest)} - cli - {"net", "axes"}
    params = parse(command, [net], {k: v for k, v in options.items() if k not in direct})
    req = _optimize_request(params)
    extra = request_fields(OptimizeRequest, {k: v for k, v in options.items() if k in direct})
    return replace(req, **extra), params.get("out")


def optimize(net: str, **options) -> OptimizeResult:
    """The best training plan for ``net`` (a zoo name, a spec or config.json path) under the
    options of `planner optimize` (``budget``, ``deadline``, ``objective``, ``gpu``, ``seq_len``,
    ...). With ``out``, run.json is written there as the command writes it."""
    from planner.pipeline import optimize as run

    req, out = _request("optimize", net, options)
    result = OptimizeResult.of(run(req))
    if out:
        result.save(out)
    return result


def pareto(net: str, **options) -> ParetoResult:
    """The front of non-dominated plans for ``net`` under the options of `planner pareto`
    (``objectives='time,cost'`` by default). With ``out``, the report folder is written there;
    :meth:`ParetoResult.save` writes it later."""
    from planner.pipeline import pareto as run

    req, out = _request("pareto", net, options)
    result = ParetoResult.of(*run(req))
    if out:
        result.save(out)
    return result


def estimate(net: str | None = None, **options) -> EstimateResult:
    """The predicted step of ``net`` per worker count and scheme under the options of `planner
    estimate` (``device``, ``workers='1,8,64'`` or a list, ``batch``, ``tp``, ``plan=FILE``, ...)."""
    from planner.api.options import parse
    from planner.cli.estimate import _estimate_request
    from planner.estimate.estimate import estimate as run

    params = parse("estimate", [] if net is None else [net], options)
    return EstimateResult(tuple(EstimateRow.of(r) for r in run(_estimate_request(params))))
