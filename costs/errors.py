"""The error family shared by the evaluator and everything built on it.

The CLI turns every :class:`PlannerError` into a one-line message and an exit code
(2 for bad input, 1 for "no feasible plan"); nothing else should reach a user as a traceback.
"""

from __future__ import annotations


class PlannerError(Exception):
    """Base of every error planner reports to a user."""

    exit_code = 2


class SpecError(PlannerError):
    """A network spec is malformed: bad JSON, unknown parent, cycle, shape mismatch, ..."""

    def __init__(self, message: str, *, source: str | None = None, layer: str | None = None):
        where = []
        if source:
            where.append(source)
        if layer:
            where.append(f"layer '{layer}'")
        prefix = ": ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.detail = message  # the message without its "source: layer" prefix
        self.source = source
        self.layer = layer


class UnsupportedError(PlannerError):
    """A valid request that a rule set or option combination cannot answer."""
