"""planner: find the fastest or cheapest way to train a network, without running it.

The Python API (docs/api.md): ``planner.optimize``, ``planner.pareto`` and ``planner.estimate``
take the options of the commands of the same name as keyword arguments and return typed results.
They load on first use (PEP 562), so ``import planner`` itself imports nothing heavy.
"""

from __future__ import annotations

from planner._version import __version__

_API = ("optimize", "pareto", "OptimizeResult", "ParetoResult", "EstimateResult", "EstimateRow", "Plan")
_ERRORS = ("PlannerError", "BadInput", "InfeasibleError")
__all__ = ["__version__", *_API, "estimate", *_ERRORS]


def __getattr__(name: str):
    if name in _API:
        from planner import api

        return getattr(api, name)
    if name == "estimate":  # the subpackage, callable as the API's estimate (planner/estimate/)
        import planner.estimate

        return planner.estimate
    if name in _ERRORS:
        from planner import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
