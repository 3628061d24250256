"""`planner estimate`: the short path of the pipeline (request, evaluator, records), no search.

Calling this package, ``planner.estimate("resnet50", workers=[1, 8])``, is the Python API's
:func:`planner.api.estimate`: the package and the function share the name ``planner.estimate``.
"""

from __future__ import annotations

import sys
from types import ModuleType


class _Callable(ModuleType):
    def __call__(self, net: str | None = None, **options):
        from planner.api import estimate

        return estimate(net, **options)


sys.modules[__name__].__class__ = _Callable
