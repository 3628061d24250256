"""The context-parallel axes of transformer plans: the degree ``cp`` (the sequence split over
``cp`` GPUs that follow the tensor-parallel ranks, Megatron-Core's and Llama 3's order, so a
group fills a node before it crosses one) and how keys and values move (``cp_comm``, see
:mod:`costs.llm.context`). ``GPUs = tp x cp x pp x dp`` (:func:`planner.space.llm_axes.dp`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from costs.llm import context
from planner.errors import BadInput
from planner.space.declare import Axis, Chosen, Field
from planner.space.llm_axes import _arg, _ints, _value, dp

if TYPE_CHECKING:
    from planner.request.optimize import Problem

# Long sequences are where context parallelism pays (Megatron-Core's context-parallel guide
# recommends it for long context; Llama 3 used CP 16 at 128k tokens, Dubey et al. 2024,
# arXiv:2407.21783, Table 4): searched by default from 32k tokens on.
CP_DEFAULT_FROM = 32_768
CP_DEFAULT = (1, 2, 4, 8, 16, 32)


def cp_choices(problem: Problem) -> tuple[int, ...]:
    """Context-parallel degrees: 1 below 32k tokens unless asked, else powers of two whose
    2 cp chunks divide the sequence."""
    text = problem.axis_option("cp")
    values = _ints(problem, "cp", CP_DEFAULT if _long(problem) else (1,))
    if values is None:
        return (1,)
    s = problem.llm["seq_len"]
    bad = [c for c in values if s % (2 * c)]
    if bad and text is not None:
        raise BadInput(
            f"--cp {bad[0]} needs a sequence length divisible by 2 x cp = {2 * bad[0]} (the {s} tokens of "
            f"{problem.request.net} are not)"
        )
    return tuple(c for c in values if s % (2 * c) == 0)


def _long(problem: Problem) -> bool:
    return problem.llm is not None and problem.llm["seq_len"] >= CP_DEFAULT_FROM


def cp_comm_choices(problem: Problem) -> tuple[str, ...]:
    """How context parallelism exchanges keys and values: p2p (ring, overlapped) unless asked."""
    text = problem.axis_option("cp_comm")
    if text is None or problem.llm is None:
        return ("p2p",)
    values = tuple(dict.fromkeys(x.strip() for x in text.split(",")))
    if not values or not set(values) <= set(context.CP_COMM):
        raise BadInput(f"--cp-comm '{text}' (valid: comma-separated of {', '.join(context.CP_COMM)})")
    return values


def cp_valid(ch: Chosen) -> np.ndarray:
    """A whole number of data-parallel replicas; a2a (Ulysses) needs heads to spread."""
    cp = ch.value("cp")
    ok = dp(ch) >= 1
    if ch.space.llm is None:
        return ok
    a2a = np.asarray(ch.value("cp_comm")) == "a2a"
    return ok & ((cp == 1) | ~a2a | context.heads_split(ch.space.llm, ch.value("tp"), cp))


AXES: tuple[Axis, ...] = (
    Axis(
        "cp",
        choices=cp_choices,
        plan=lambda ch: {"cp": ch.value("cp")},
        valid=cp_valid,
        fields=(Field("cp", _value("cp"), "CP"),),
        estimate_args=_arg("cp", "cp", 1),
        option="Context-parallel degrees to search, e.g. 1,2,4 (transformers: the sequence split over cp "
        "GPUs; default 1, or powers of two up to 32 from 32k tokens).",
    ),
    Axis(
        "cp_comm",
        choices=cp_comm_choices,
        plan=lambda ch: {
            "cp_comm": np.array([context.CP_COMM.index(x) for x in ch.space.choices("cp_comm")])[
                ch.index("cp_comm")
            ]
        },
        valid=lambda ch: (ch.value("cp_comm") == "p2p") | (ch.value("cp") > 1),
        fields=(Field("cp_comm", _value("cp_comm")),),
        estimate_args=lambda r: [f"--cp-comm {r['cp_comm']}"] if r.get("cp_comm", "p2p") != "p2p" else [],
        option="Context parallelism's key/value exchange: p2p (ring attention, overlapped), all_gather "
        "(Llama 3's) or a2a (DeepSpeed-Ulysses); comma-separated to search (default p2p).",
    ),
)
