"""The stack axis: which software stack runs a plan (``--stack``, a sweep spec key).

One stack (the default) is a one-choice axis that filters the plans it cannot run; ``any`` or
a comma list searches them, each plan scored with its stack's profile, so an answer can say
what a faster stack buys. Choices are the names the cost model resolved (``CostModel.stacks``:
the net family's default, the one asked for, or several); PALEO's rule sets have no stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from planner.space.declare import Axis, Chosen, Field

if TYPE_CHECKING:
    from planner.request.optimize import Problem

NONE = ""  # the one choice under PALEO's rule sets: no stack


def stack_choices(problem: Problem) -> tuple[str, ...]:
    model = problem.model
    return tuple(model.stacks) if model is not None and model.stacks else (NONE,)


def stack_valid(ch: Chosen) -> np.ndarray:
    """A plan is valid when its stack can run it (planner.stacks.plans.mask)."""
    from planner.stacks import registry
    from planner.stacks.plans import mask

    names = ch.space.choices("stack")
    idx = ch.index("stack")
    ok = np.ones(len(idx), dtype=bool)
    if names == (NONE,):
        return ok
    cols = {
        "tp": ch.value("tp"),
        "pp": ch.value("pp"),
        "sp": ch.value("sp") == "on",
        "ep": ch.value("ep"),
        "interleave": ch.value("interleave"),
        "tp_overlap": ch.value("tp_overlap") == "on",
        "cp": ch.value("cp"),
        "ep_overlap": ch.value("ep_overlap") == "on",
        "zero": ch.value("zero"),
        "pp_schedule": ch.value("pp_schedule"),
        "hybrid": ch.value("split") < ch.space.n_layers,
    }
    for i, name in enumerate(names):
        rows = idx == i
        if rows.any():
            ok[rows] = mask(registry.get(name), {k: v[rows] for k, v in cols.items()})
    return ok


AXIS = Axis(
    "stack",
    choices=stack_choices,
    plan=lambda ch: {},
    valid=stack_valid,
    fields=(Field("stack", lambda ch, m: ch.value("stack"), "stack"),),
    estimate_args=lambda r: [f"--stack {r['stack']}"] if r.get("stack") else [],
    option="Software stack (see `planner list stacks`): a name, a comma list or any (search them and "
    "show what a faster stack buys). Default: megatron for transformers, optimized-cnn for CNNs.",
)
