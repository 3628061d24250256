"""The model-parallel axes of transformer plans: tensor, sequence, context, pipeline and expert
parallel degrees, ZeRO stage, activation recomputation, pipeline interleaving.

They apply to transformer nets under the modern rules (``space.llm`` is the model's
description); for every other net each has one choice (1, 0, none, off) and the space is the
data-parallel one. Placement follows Megatron-LM: a tensor-parallel group sits inside a node
(``tp`` divides the GPUs per node), pipeline and data parallelism span nodes, and
``GPUs = tp x cp x pp x dp``; a context-parallel group follows the tensor-parallel ranks
(Megatron-Core's and Llama 3's order), so it fills a node before it crosses one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from costs.llm.memory import RECOMPUTE
from planner.errors import BadInput
from planner.hosts import node_sizes
from planner.request.parse import parse_int_list
from planner.space.declare import PER_NODE, Axis, Chosen, Field

if TYPE_CHECKING:
    from planner.request.optimize import Problem

TP_DEFAULT = (1, 2, 4, 8)
PP_DEFAULT = (1, 2, 4, 8, 16, 32, 64)
ZERO_STAGES = (0, 1, 2, 3)


def _ints(problem: Problem, name: str, default: tuple[int, ...]) -> tuple[int, ...] | None:
    """The option's integers (checked by the caller), the default for transformers, or None
    (not a transformer: the axis has one neutral choice)."""
    text = problem.axis_option(name)
    if problem.llm is None:
        if text is not None and parse_int_list(text, f"--{name}") != (1,):
            raise BadInput(f"--{name} needs a transformer net under the modern rules (--rules modern)")
        return None
    return tuple(sorted(set(parse_int_list(text, f"--{name}")))) if text else default


def _fits_heads(m: dict, t: int) -> bool:
    kv = m["n_kv_heads"]
    return m["n_heads"] % t == 0 and (kv % t == 0 or t % kv == 0)


def _fills(t: int, sizes: list[int]) -> bool:
    """A tensor-parallel group of ``t`` fits a node of these sizes: up to 8 as before (``tp_valid``
    keeps the node sizes it divides), wider only where it divides a node (an NVLink domain)."""
    return t <= max(PER_NODE) or any(n % t == 0 for n in sizes)


def _check_tp(problem: Problem, t: int, sizes: list[int]) -> None:
    """A given --tp degree: it divides the heads, and fits (:func:`_fills`) a node of these GPUs."""
    m, widest = problem.llm, max(sizes)
    if not _fits_heads(m, t):
        ok = [x for x in range(1, m["n_heads"] + 1) if _fits_heads(m, x) and x <= widest and _fills(x, sizes)]
        raise BadInput(
            f"--tp {t} does not divide the {m['n_heads']} attention heads "
            f"({m['n_kv_heads']} key/value heads) of {problem.request.net} "
            f"(valid: {', '.join(map(str, ok))})"
        )
    if t > widest:
        raise BadInput(f"--tp {t} is wider than a node ({widest} GPUs per node at most for these GPUs)")
    if not _fills(t, sizes):
        wide = [x for x in range(max(PER_NODE) + 1, widest + 1) if _fills(x, sizes) and _fits_heads(m, x)]
        raise BadInput(
            f"--tp {t} divides no node of these GPUs (GPUs per node: {', '.join(map(str, sizes))}), and a "
            f"tensor-parallel group stays inside one (above {max(PER_NODE)} valid: {', '.join(map(str, wide)) or 'none'})"
        )


def tp_choices(problem: Problem) -> tuple[int, ...]:
    """Tensor-parallel degrees: powers of two up to a node that divide the attention heads (by
    default; given degrees wider than an 8-GPU node must divide an NVLink domain of these GPUs,
    e.g. 12 or 24 in a GB200 NVL72's 72, since a group stays inside one: ``tp_valid``)."""
    values = _ints(problem, "tp", TP_DEFAULT)
    if values is None:
        return (1,)
    caps = [i.device.max_per_node for i in problem.devices]
    sizes = [n for n in node_sizes(caps) if n <= max(caps)]  # the per-node choices these GPUs take
    for t in values if problem.axis_option("tp") is not None else ():
        _check_tp(problem, t, sizes)
    return tuple(t for t in values if _fits_heads(problem.llm, t) and t <= max(sizes) and _fills(t, sizes))


def pp_choices(problem: Problem) -> tuple[int, ...]:
    """Pipeline stages: powers of two up to the transformer layers."""
    values = _ints(problem, "pp", PP_DEFAULT)
    if values is None:
        return (1,)
    layers = problem.llm["n_layers"]
    deep = [p for p in values if p > layers]
    if deep and problem.axis_option("pp") is not None:
        raise BadInput(f"--pp {deep[0]} is deeper than the {layers} layers of {problem.request.net}")
    return tuple(p for p in values if p <= layers)


def zero_choices(problem: Problem) -> tuple[int, ...]:
    text = problem.axis_option("zero")
    if problem.llm is None:
        if text is not None and text.strip() != "0":
            raise BadInput("--zero needs a transformer net under the modern rules (--rules modern)")
        return (0,)
    if text is None:
        return ZERO_STAGES
    try:
        values = tuple(sorted({int(x) for x in text.split(",")}))
    except ValueError:
        values = (-1,)
    if not values or not set(values) <= set(ZERO_STAGES):
        raise BadInput(f"--zero '{text}' (valid: comma-separated stages of 0, 1, 2, 3)")
    return values


def recompute_choices(problem: Problem) -> tuple[str, ...]:
    """none, selective (the core attention; only for standard attention kernels), full."""
    text = problem.axis_option("recompute")
    if problem.llm is None:
        if text is not None and text.strip() != "none":
            raise BadInput("--recompute needs a transformer net under the modern rules (--rules modern)")
        return ("none",)
    flash = problem.llm.get("attention") == "flash"
    if text is None:
        return ("none", "full") if flash else RECOMPUTE
    values = tuple(dict.fromkeys(x.strip() for x in text.split(",")))
    bad = [v for v in values if v not in RECOMPUTE]
    if bad or not values:
        raise BadInput(f"--recompute '{text}' (valid: comma-separated of {', '.join(RECOMPUTE)})")
    return values


def sp_choices(problem: Problem) -> tuple[str, ...]:
    text = problem.axis_option("sp")
    if problem.llm is None:
        return ("off",)
    if text is None:
        return ("off", "on")
    values = tuple(dict.fromkeys(x.strip() for x in text.split(",")))
    if not values or not set(values) <= {"on", "off"}:
        raise BadInput(f"--sp '{text}' (valid: on, off, or on,off)")
    return values


def tp_overlap_choices(problem: Problem) -> tuple[str, ...]:
    """Tensor-parallel communication overlapped with the GEMMs (Megatron-Core's
    --tp-comm-overlap, torchtitan's async TP): searched (off, on) by default where a stack of
    the request runs it, as NVIDIA's performance recipes set it for TP > 1 (llm.csv's
    Megatron-Core and Megatron-Bridge rows); the stack axis keeps it off for the others."""
    text = problem.axis_option("tp_overlap")
    if problem.llm is None:
        return ("off",)
    if text is None:
        return ("off", "on") if _stacks_run(problem, "tp_overlap") else ("off",)
    values = tuple(dict.fromkeys(x.strip() for x in text.split(",")))
    if not values or not set(values) <= {"on", "off"}:
        raise BadInput(f"--tp-overlap '{text}' (valid: on, off, or on,off)")
    return values


def _stacks_run(problem: Problem, key: str) -> bool:
    """Whether any stack the request resolved (its cost model's) runs plans with ``key``."""
    from planner.stacks import registry

    model = problem.model
    names = model.stacks if model is not None and model.stacks else ()
    return any(registry.get(name).allows(key) for name in names)


def ep_overlap_choices(problem: Problem) -> tuple[str, ...]:
    """Expert all-to-alls overlapped with another microbatch's compute (costs.llm.experts): off
    unless asked, since not every stack does it."""
    text = problem.axis_option("ep_overlap")
    if text is None or problem.llm is None or not problem.llm.get("moe"):
        return ("off",)
    values = tuple(dict.fromkeys(x.strip() for x in text.split(",")))
    if not values or not set(values) <= {"on", "off"}:
        raise BadInput(f"--ep-overlap '{text}' (valid: on, off, or on,off)")
    return values


def ep_choices(problem: Problem) -> tuple[int, ...]:
    """Expert-parallel degrees: divisors of the experts (mixture-of-experts nets only)."""
    moe = problem.llm.get("moe") if problem.llm else None
    text = problem.axis_option("ep")
    if moe is None:
        if text is not None and parse_int_list(text, "--ep") != (1,):
            raise BadInput("--ep needs a mixture-of-experts transformer (e.g. mixtral-8x7b)")
        return (1,)
    n = moe["n_experts"]
    values = parse_int_list(text, "--ep") if text else tuple(e for e in (1, 2, 4, 8, 16, 32, 64) if e <= n)
    bad = [e for e in values if n % e]
    if bad:
        raise BadInput(f"--ep {bad[0]} does not divide the {n} experts of {problem.request.net}")
    return tuple(sorted(set(values)))


# Virtual pipeline stages searched by default: Megatron-Core's interleaved 1F1B divides the
# bubble by v (Narayanan et al. 2021, arXiv:2104.04473, §2.2.2), and the large published runs
# use it (Llama 3 405B, Dubey et al. 2024, §3.3.2; NVIDIA's Megatron-Bridge recipes set
# virtual_pipeline_model_parallel_size wherever PP > 1). Validity keeps the v that split the
# layers (:func:`interleave_valid`); a stack without it keeps v = 1 (planner.stacks).
INTERLEAVE_DEFAULT = (1, 2, 4, 8)


def interleave_choices(problem: Problem) -> tuple[int, ...]:
    """Virtual pipeline stages per GPU: 1, 2, 4, 8 for transformers unless asked."""
    values = _ints(problem, "interleave", INTERLEAVE_DEFAULT)
    return (1,) if values is None else values


def dp(ch: Chosen) -> np.ndarray:
    """Data-parallel replicas (0 where tp x cp x pp does not divide the GPUs)."""
    group = ch.value("tp") * ch.value("pp") * ch.value("cp")
    g = ch.value("gpus")
    return np.where(g % group == 0, g // group, 0)


def microbatches(ch: Chosen) -> np.ndarray:
    """Microbatches per step: under a fixed global batch a transformer's follow from it,
    G / (dp x microbatch) (Megatron-LM's --global-batch-size and --micro-batch-size); otherwise
    the accumulation chosen."""
    g = ch.space.global_batch
    if ch.space.llm is not None and g is not None:
        return np.maximum(g // (np.maximum(dp(ch), 1) * ch.value("microbatch")), 1)
    return ch.value("accumulation")


def tp_valid(ch: Chosen) -> np.ndarray:
    """A tensor-parallel group fills part of one node: tp divides the GPUs per node."""
    per_node = ch.value("per_node")
    t = ch.value("tp")
    return (per_node % t == 0) & (dp(ch) >= 1)


def pp_valid(ch: Chosen) -> np.ndarray:
    return dp(ch) >= 1


def sp_valid(ch: Chosen) -> np.ndarray:
    return (ch.value("sp") == "off") | (ch.value("tp") > 1)


def ep_valid(ch: Chosen) -> np.ndarray:
    """Experts are spread over data-parallel replicas: ep divides dp."""
    d = dp(ch)
    return (d >= 1) & (d % ch.value("ep") == 0)


def interleavable(layers, p, v):
    """Whether ``layers`` split into ``p`` x ``v`` virtual stages: evenly, or evenly once the
    embedding and the loss count as one layer each, the first and last stages one layer short
    (Megatron-Core's --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split; Llama 3 405B's 126 layers on 16 stages, Dubey et al.
    2024, arXiv:2407.21783, §3.3.2: "we reduce one Transformer layer each from the first and the
    last stages")."""
    pv = np.maximum(p * v, 1)
    return (p > 1) & ((layers % pv == 0) | ((layers + 2) % pv == 0))


def interleave_valid(ch: Chosen) -> np.ndarray:
    """Interleaving needs a pipeline whose stages split into the virtual stages (see
    :func:`interleavable`)."""
    v, p = ch.value("interleave"), ch.value("pp")
    layers = ch.space.llm["n_layers"] if ch.space.llm else 1
    return (v == 1) | interleavable(layers, p, v)


def recompute_index(ch: Chosen) -> np.ndarray:
    """The evaluator's recomputation code (costs.llm.memory.RECOMPUTE) of each plan."""
    return np.array([RECOMPUTE.index(x) for x in ch.space.choices("recompute")])[ch.index("recompute")]


def _arg(option: str, key: str, neutral) -> object:
    """`planner estimate` option reproducing a record's value (nothing when neutral)."""
    return lambda r: [] if r.get(key, neutral) == neutral else [f"--{option} {r[key]}"]


def _value(name: str):
    return lambda ch, m: ch.value(name)


AXES: tuple[Axis, ...] = (
    Axis(
        "tp",
        choices=tp_choices,
        plan=lambda ch: {"tp": ch.value("tp")},
        valid=tp_valid,
        fields=(Field("tp", _value("tp"), "TP"),),
        estimate_args=_arg("tp", "tp", 1),
        option="Tensor-parallel degrees to search, e.g. 1,2,4,8 (transformers; default: powers of two "
        "up to 8 that divide the attention heads; wider ones must divide a node, e.g. 12 or 24 in GB200's 72).",
    ),
    Axis(
        "pp",
        choices=pp_choices,
        plan=lambda ch: {"pp": ch.value("pp")},
        valid=pp_valid,
        fields=(Field("pp", _value("pp"), "PP"), Field("dp", lambda ch, m: dp(ch), "DP")),
        estimate_args=_arg("pp", "pp", 1),
        option="Pipeline-parallel stages to search, e.g. 1,2,4,8 (transformers; default: powers of two "
        "up to the layers).",
    ),
    Axis(
        "sp",
        choices=sp_choices,
        plan=lambda ch: {"sp": ch.value("sp") == "on"},
        valid=sp_valid,
        fields=(Field("sp", _value("sp")),),
        estimate_args=lambda r: ["--sp"] if r.get("sp") == "on" else [],
        option="Sequence parallelism with tensor parallelism: on, off or on,off (default: both).",
    ),
    Axis(
        "tp_overlap",
        choices=tp_overlap_choices,
        plan=lambda ch: {"tp_overlap": ch.value("tp_overlap") == "on"},
        valid=lambda ch: (ch.value("tp_overlap") == "off") | (ch.value("tp") > 1),
        fields=(Field("tp_overlap", _value("tp_overlap"), "TP overlap"),),
        estimate_args=lambda r: ["--tp-overlap"] if r.get("tp_overlap") == "on" else [],
        option="Tensor-parallel communication overlapped with the GEMMs (Megatron-Core's --tp-comm-overlap): "
        "on, off or on,off (default on,off where the stack runs it, as megatron and fsdp do; else off).",
    ),
    Axis(
        "zero",
        choices=zero_choices,
        plan=lambda ch: {"zero": ch.value("zero")},
        fields=(Field("zero", _value("zero"), "ZeRO"),),
        estimate_args=_arg("zero", "zero", 0),
        option="ZeRO stages to search, e.g. 0,1,3 (transformers; 3 is FSDP's full sharding; default all).",
    ),
    Axis(
        "recompute",
        choices=recompute_choices,
        plan=lambda ch: {"recompute": recompute_index(ch)},
        fields=(Field("recompute", _value("recompute"), "recompute"),),
        estimate_args=_arg("recompute", "recompute", "none"),
        option="Activation recomputation to search: none, selective, full (comma-separated; default all "
        "that apply).",
    ),
    Axis(
        "ep",
        choices=ep_choices,
        plan=lambda ch: {"ep": ch.value("ep")},
        valid=ep_valid,
        fields=(Field("ep", _value("ep")),),
        estimate_args=_arg("ep", "ep", 1),
        option="Expert-parallel degrees to search (mixture-of-experts nets), e.g. 1,2,4,8.",
    ),
    Axis(
        "ep_overlap",
        choices=ep_overlap_choices,
        plan=lambda ch: {"ep_overlap": ch.value("ep_overlap") == "on"},
        valid=lambda ch: (ch.value("ep_overlap") == "off") | (ch.value("ep") > 1),
        fields=(Field("ep_overlap", _value("ep_overlap")),),
        estimate_args=lambda r: ["--ep-overlap"] if r.get("ep_overlap") == "on" else [],
        option="Expert all-to-alls overlapped with another microbatch's compute (DeepEP with DualPipe, "
        "Megatron-Core's --overlap-moe-expert-parallel-comm): on, off or on,off (default off).",
    ),
    Axis(
        "interleave",
        choices=interleave_choices,
        plan=lambda ch: {"interleave": ch.value("interleave")},
        valid=interleave_valid,
        fields=(Field("interleave", _value("interleave")),),
        estimate_args=_arg("interleave", "interleave", 1),
        option="Virtual pipeline stages per GPU to search (interleaved 1F1B), e.g. 1,2 (default 1,2,4,8 where the layers split).",
    ),
)
