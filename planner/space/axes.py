"""The search axes, each declared once: name, choices, plan columns, constraints, outputs.

A declaration (:class:`Axis`) says everything the rest of planner needs to know about an axis:

* ``choices(problem)``: its choice list, from the validated request and the catalogs (a static
  list, so Optuna's samplers see the same choices in every trial);
* ``plan(chosen)``: the evaluator's plan columns (:class:`costs.model.Plans`) it sets; axes are
  applied in order, so a later axis may refine a column an earlier one set;
* ``valid(chosen)``: its constraint on combinations (False: not a plan, never scored);
* ``fields``: the record/trials.csv/report columns that show it (:class:`Field`: key, value
  function of (chosen, metrics), and a header when compact plan tables show it);
* ``estimate_args(record)``: the `planner estimate` options that reproduce it (the gpu axis
  also names the network, which is a property of the hardware it runs on);
* ``option``: when set, the help of a ``--<name>`` option of `planner optimize`/`pareto` (and a
  sweep spec key) whose text sets the choices.

Search, enumeration, refinement, trials.csv, reports and sweep specs loop over :data:`AXES`;
none of them names an axis. ``chosen`` is a :class:`Chosen`: index columns with their values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from costs.comm import schemes as comm
from costs.hardware import PRECISIONS
from planner.errors import BadInput, UnsupportedError
from planner.hosts import node_sizes
from planner.request.parse import parse_int_list
from planner.space import cp_axes, llm_axes, schedule_axes, stack_axis
from planner.space.declare import Axis, Chosen, Field, SpaceView

if TYPE_CHECKING:
    from planner.request.optimize import Problem

DEFAULT_GPU_BUDGET = 64  # GPU axis cap when only money or a deadline bounds the search
BATCHES = tuple(2**i for i in range(12))  # 1 .. 2048 samples per GPU
MICROBATCHES = (1, 2, 4, 8, 16, 32)  # sequences per GPU per microbatch (transformers)


def gpu_counts(max_gpus: int) -> tuple[int, ...]:
    """Powers of two and whole 8-GPU nodes up to ``max_gpus``, plus ``max_gpus`` itself."""
    counts = {1 << i for i in range(max_gpus.bit_length()) if 1 << i <= max_gpus}
    counts |= set(range(8, max_gpus + 1, 8))
    counts.add(max_gpus)
    return tuple(sorted(counts))


def _splits(problem: Problem) -> tuple[int, ...]:
    """Pure data parallelism (index n_layers), plus with --hybrid the "one weird trick"
    boundary (the first FC layer) and the next two weighted layers."""
    costs = problem.costs
    n = costs.n_layers
    if not problem.request.hybrid:
        return (n,)
    try:
        first = costs.default_split()
    except UnsupportedError:  # no fully connected layer: pure data parallelism only
        return (n,)
    return (n, *[i for i in range(first, n) if costs.is_weighted[i]][:3])


def _split_name(ch: Chosen, m: dict) -> np.ndarray:
    """The first model-parallel layer's name; None for pure data parallelism."""
    names = np.array([s.name for s in ch.space.layers] + [None], dtype=object)
    return names[np.minimum(ch.value("split"), ch.space.n_layers)]


def _lookup(names: tuple[str, ...], axis: str) -> Callable[[Chosen], np.ndarray]:
    """Plan column of an axis whose choices are names: each name's index in ``names``."""
    return lambda ch: np.array([names.index(x) for x in ch.space.choices(axis)])[ch.index(axis)]


def _scheme_choices(problem: Problem) -> tuple[str, ...]:
    """AllReduce schemes to search. A transformer under the modern rules trains on NCCL, whose
    all-reduce is a ring inside and across nodes (hierarchical across nodes here); NCCL's other
    algorithm, the pipelined double binary tree, moves as many bytes as the ring, so the ring
    stands for both. PALEO's unpipelined one-to-all, tree and butterfly stay for other nets."""
    return ("ring",) if problem.llm is not None else comm.SCHEME_NAMES


def _microbatched(space: SpaceView) -> bool:
    """Transformer plans under a fixed global batch choose the microbatch; the number of
    microbatches follows (Megatron-LM's --micro-batch-size and --global-batch-size)."""
    return space.llm is not None and space.global_batch is not None


def _batch(ch: Chosen) -> np.ndarray:
    """Samples per GPU per microbatch: the chosen ones, or (CNNs) a fixed global batch split
    over the GPUs."""
    g = ch.space.global_batch
    if g is None or _microbatched(ch.space):
        return ch.value("microbatch")
    return np.ceil(g / ch.value("gpus")).astype(np.int64)


def _microbatch_choices(problem: Problem) -> tuple[int, ...]:
    text = problem.axis_option("microbatch")
    g = problem.global_batch
    llm = problem.llm is not None
    if g is not None and not llm:
        if text is not None:
            raise BadInput(
                "--microbatch with --global-batch is for transformer nets; a CNN's global "
                "batch is split over its GPUs (search --accumulation instead)"
            )
        return (0,)
    values = parse_int_list(text, "--microbatch") if text else (MICROBATCHES if g and llm else BATCHES)
    values = tuple(sorted(set(values)))
    if g is not None and not [b for b in values if b <= g]:
        raise BadInput(f"every --microbatch exceeds the global batch {g}")
    return tuple(b for b in values if g is None or b <= g)


def _accumulation_choices(problem: Problem) -> tuple[int, ...]:
    text = problem.axis_option("accumulation")
    if problem.llm is not None and problem.global_batch is not None:
        if text is not None:
            raise BadInput("--accumulation follows from --global-batch and --microbatch for transformers")
        return (0,)  # derived: global batch / (dp x microbatch)
    return (1,) if text is None else tuple(sorted(set(parse_int_list(text, "--accumulation"))))


def _replicas(ch: Chosen) -> np.ndarray:
    return np.maximum(llm_axes.dp(ch), 1)


def _accumulation_plan(ch: Chosen) -> dict[str, np.ndarray]:
    """Microbatches per step; with a fixed global batch each is ceil(G / (GPUs x steps)), or
    (transformers) the steps are G / (dp x microbatch)."""
    g = ch.space.global_batch
    if _microbatched(ch.space):
        return {"accumulation": llm_axes.microbatches(ch)}
    a = ch.value("accumulation")
    cols = {"accumulation": a}
    if g is not None:
        cols["batch"] = np.ceil(g / (ch.value("gpus") * a)).astype(np.int64)
    return cols


def _accumulation_valid(ch: Chosen) -> np.ndarray:
    """A fixed global batch leaves every microbatch at least one sample (transformers: the
    data-parallel replicas times the microbatch divide it)."""
    g = ch.space.global_batch
    if _microbatched(ch.space):
        return g % (_replicas(ch) * ch.value("microbatch")) == 0
    a = ch.value("accumulation")
    return np.ones(a.shape, dtype=bool) if g is None else ch.value("gpus") * a <= g


def _precision_choices(problem: Problem) -> tuple[str, ...]:
    """One precision, every one (``any``; fp8 for transformers only), or ``auto``: each GPU's
    own training precision."""
    p = problem.request.precision
    if p != "any":
        return (p,)
    return PRECISIONS if problem.llm is not None else tuple(x for x in PRECISIONS if x != "fp8")


def _precision_plan(ch: Chosen) -> dict[str, np.ndarray]:
    """Precision index per plan; "auto" resolves per GPU type (bf16, else fp16 tensor cores,
    else fp32; costs.hardware.auto_precision)."""
    names = ch.space.choices("precision")
    fixed = np.array([PRECISIONS.index(x) if x in PRECISIONS else -1 for x in names])[ch.index("precision")]
    auto = np.asarray(ch.space.auto_precision, dtype=np.int64)
    return {"precision": np.where(fixed >= 0, fixed, auto[ch.index("gpu")] if auto.size else 0)}


def _offered(ch: Chosen) -> np.ndarray:
    """Whether nodes of the chosen size of the chosen GPU are rented (all, without a host table)."""
    table = getattr(ch.space, "node_offered", ())
    if not table:
        return np.ones(np.shape(ch.index("gpu")), dtype=bool)
    return np.asarray(table, dtype=bool)[ch.index("gpu"), ch.index("per_node")]


def _per_node_choices(problem: Problem) -> tuple[int, ...]:
    """GPUs per node: 1, 2, 4, 8, and 72 (an NVL72 NVLink domain) where some searched device's
    catalog node holds that many (planner.hosts.node_sizes; the host table has the same columns)."""
    return node_sizes(i.device.max_per_node for i in problem.devices)


def _check_choice(name: str, values: tuple) -> tuple:
    if not values:
        raise BadInput(f"the {name} axis has no choice left")
    return values


AXES: tuple[Axis, ...] = (
    Axis(
        "gpu",
        choices=lambda pb: _check_choice("gpu", pb.gpus),
        # link table: [network between nodes, intra-node link of each GPU type]
        plan=lambda ch: {"device": ch.index("gpu"), "intra_link": 1 + ch.index("gpu")},
        fields=(Field("gpu", lambda ch, m: ch.value("gpu"), "gpu"),),
        estimate_args=lambda r: [f"--device {r['gpu']}", f"--network {r['network']}"],
    ),
    Axis(
        "gpus",
        choices=lambda pb: gpu_counts(pb.limits.max_gpus or DEFAULT_GPU_BUDGET),
        plan=lambda ch: {"workers": ch.value("gpus")},
        fields=(Field("gpus", lambda ch, m: ch.value("gpus"), "gpus"),),
        estimate_args=lambda r: [f"--workers {r['gpus']}"],
    ),
    Axis(
        "per_node",
        choices=_per_node_choices,
        plan=lambda ch: {"gpus_per_node": ch.value("per_node")},
        # whole nodes, of a size the device comes in and some kept provider rents (planner.hosts)
        valid=lambda ch: (
            (ch.value("gpus") % ch.value("per_node") == 0)
            & (ch.value("per_node") <= np.asarray(ch.space.max_per_node)[ch.index("gpu")])
            & _offered(ch)
        ),
        fields=(
            Field("gpus_per_node", lambda ch, m: ch.value("per_node"), "per node"),
            Field("nodes", lambda ch, m: ch.value("gpus") // ch.value("per_node")),
        ),
        estimate_args=lambda r: [f"--gpus-per-node {r['gpus_per_node']}"],
    ),
    Axis(
        "microbatch",
        choices=_microbatch_choices,
        plan=lambda ch: {"batch": _batch(ch)},
        fields=(
            Field("batch_per_worker", lambda ch, m: m["batch_per_worker"], "batch/GPU"),
            Field("microbatch", lambda ch, m: m["batch_per_worker"]),
            Field("global_batch", lambda ch, m: m["global_batch"]),
        ),
        estimate_args=lambda r: [f"--batch {r['batch_per_worker']}", "--scaling weak"],
        option="Samples per GPU per microbatch to search, e.g. 1,2,4,8 (default 1-2048; transformers "
        "with a global batch: 1-32).",
    ),
    Axis(
        "split",
        choices=_splits,
        plan=lambda ch: {"split": ch.value("split")},
        # one worker has no model-parallel part: only the data-parallel split for it
        valid=lambda ch: (ch.value("gpus") > 1) | (ch.value("split") == ch.space.n_layers),
        fields=(
            Field(
                "parallel",
                lambda ch, m: np.where(ch.value("split") >= ch.space.n_layers, "data", "hybrid"),
                "parallel",
            ),
            Field("split", _split_name),
        ),
        estimate_args=lambda r: (
            [] if r["parallel"] == "data" else ["--parallel hybrid", f"--split {r['split']}"]
        ),
        estimate_tail=True,
    ),
    Axis(
        "scheme",
        choices=_scheme_choices,
        plan=lambda ch: {"scheme": _lookup(comm.SCHEME_NAMES, "scheme")(ch)},
        fields=(Field("scheme", lambda ch, m: ch.value("scheme"), "scheme"),),
        estimate_args=lambda r: [f"--scheme {r['scheme']}"],
    ),
    Axis(
        "precision",
        choices=_precision_choices,
        plan=_precision_plan,
        fields=(Field("precision", lambda ch, m: m["precision_name"]),),
        estimate_args=lambda r: [f"--precision {r['precision']}"],
    ),
    # Gradient accumulation: microbatches per optimizer step, gradients AllReduced once per
    # step (PyTorch DDP's no_sync; Li et al., VLDB 2020, section 3.2.4). Only 1 unless asked:
    # at a given global batch it adds no throughput under PALEO's model unless memory binds,
    # and every choice multiplies the space (and the time to enumerate it).
    Axis(
        "accumulation",
        choices=_accumulation_choices,
        plan=_accumulation_plan,
        valid=_accumulation_valid,
        fields=(Field("accumulation", lambda ch, m: m["accumulation"]),),
        estimate_args=lambda r: [] if r["accumulation"] == 1 else [f"--accumulation {r['accumulation']}"],
        option="Gradient accumulation steps to search, e.g. 1,2,4,8 (microbatches per optimizer step; "
        "default 1). With --global-batch each microbatch is global batch / (GPUs x steps).",
    ),
    *llm_axes.AXES,
    *cp_axes.AXES,
    schedule_axes.AXIS,
    stack_axis.AXIS,  # last: its validity reads the parallelism axes
)

NAMES = tuple(a.name for a in AXES)
FIELDS = tuple(f for a in AXES for f in a.fields)
KEYS = [f.key for f in FIELDS]  # record columns of the axes, in declaration order
HEADERS = [(f.key, f.header) for f in FIELDS if f.header]  # compact plan tables
OPTIONS = tuple(a for a in AXES if a.option)


def axis(name: str) -> Axis:
    return AXES[NAMES.index(name)]
