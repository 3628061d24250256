"""planner's errors: one family, rooted in :class:`costs.errors.PlannerError`.

Exit codes: 2 for bad input (a name, an option, a spec, a catalog), 1 when the request is
valid but no plan satisfies it.
"""

from __future__ import annotations

from costs.errors import PlannerError, SpecError, UnsupportedError

__all__ = ["PlannerError", "SpecError", "UnsupportedError", "CatalogError", "BadInput", "InfeasibleError"]


class CatalogError(PlannerError):
    """A catalog file is malformed, or a name is not in it."""


class BadInput(PlannerError):
    """An option value is not one of the accepted forms."""


class InfeasibleError(PlannerError):
    """The request is valid, but no plan satisfies its constraints."""

    exit_code = 1
