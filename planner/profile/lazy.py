"""Module names defined on first use (PEP 562): the profiling modules import PyTorch, the
optional extra, only when one of their names is first looked up, not when planner starts."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache


def names(define: Callable[[], dict]):
    """``(defined, __getattr__)`` for a module: ``defined()`` runs ``define`` once (it imports
    torch and returns the module's names); ``__getattr__`` looks a missing name up there."""
    defined = lru_cache(maxsize=1)(define)

    def __getattr__(name: str):
        try:
            return defined()[name]
        except KeyError:
            raise AttributeError(name) from None

    return defined, __getattr__
