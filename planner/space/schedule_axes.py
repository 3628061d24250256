"""The pipeline schedule of transformer plans (``pp_schedule``): 1F1B (interleaved with
``--interleave``), zero-bubble ZB1P, DeepSeek's DualPipe and DualPipeV (:mod:`costs.llm.pipeline`).

Searched only when asked (``--pp-schedule 1f1b,zb1p,dualpipev``): 1F1B is what Megatron-Core,
the default stack for transformers, runs; a stack names the schedules it has
(``configs/stacks``: torchtitan's torch.distributed.pipelining has ZB1P and DualPipeV).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from costs.llm import pipeline
from planner.errors import BadInput
from planner.space.declare import Axis, Chosen, Field
from planner.space.llm_axes import microbatches

if TYPE_CHECKING:
    from planner.request.optimize import Problem


def schedule_choices(problem: Problem) -> tuple[str, ...]:
    """1f1b unless asked; the names given (comma-separated), checked."""
    text = problem.axis_option("pp_schedule")
    if text is None:
        return ("1f1b",)
    values = tuple(dict.fromkeys(x.strip() for x in text.split(",")))
    bad = [v for v in values if v not in pipeline.SCHEDULES]
    if bad or not values:
        raise BadInput(f"--pp-schedule '{text}' (valid: comma-separated of {', '.join(pipeline.SCHEDULES)})")
    if problem.llm is None and values != ("1f1b",):
        raise BadInput("--pp-schedule needs a transformer net under the modern rules (--rules modern)")
    return values


def codes(ch: Chosen) -> np.ndarray:
    """Each plan's schedule as :data:`costs.llm.pipeline.SCHEDULES` index."""
    table = np.array([pipeline.SCHEDULES.index(x) for x in ch.space.choices("pp_schedule")])
    return table[ch.index("pp_schedule")]


def schedule_valid(ch: Chosen) -> np.ndarray:
    """A schedule other than 1F1B needs a pipeline; DualPipe an even one; both DualPipes no
    interleaving and two microbatches per pipeline GPU (:func:`costs.llm.pipeline.runnable`)."""
    s, p = codes(ch), ch.value("pp")
    m = microbatches(ch)
    return ((s == pipeline.ONE_F_ONE_B) | (p > 1)) & pipeline.runnable(s, p, ch.value("interleave"), m)


AXIS = Axis(
    "pp_schedule",
    choices=schedule_choices,
    plan=lambda ch: {"schedule": codes(ch)},
    valid=schedule_valid,
    fields=(Field("pp_schedule", lambda ch, m: ch.value("pp_schedule")),),
    estimate_args=lambda r: (
        [f"--pp-schedule {r['pp_schedule']}"] if r.get("pp_schedule", "1f1b") != "1f1b" else []
    ),
    option="Pipeline schedules to search (transformers): 1f1b (interleaved with --interleave), zb1p "
    "(zero bubble), dualpipe, dualpipev; comma-separated (default 1f1b).",
)
