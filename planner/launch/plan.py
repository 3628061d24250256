"""The plan a launch target writes files for, read from what `planner` saves.

Accepted inputs (`planner launch PLAN`):

* ``plan_<k>.json`` of `planner pareto` (a front plan, self-describing);
* ``run.json`` of `planner optimize` (its best plan) or of `planner pareto` (its first front plan);
* a run folder holding either (its ``plan_0.json`` first, else its ``run.json``);
* a sweep cell, ``SPEC.yaml#N``: the best plan of cell N (0-based, in the spec's grid order) of a
  finished `planner sweep run`.

Anything else, or a file that lacks a field a target needs, is refused in one line naming the
file and the field (:class:`planner.errors.BadInput`, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from costs.comm.ranks import MEGATRON, ORDERS
from costs.llm.context import CP_COMM
from costs.llm.pipeline import SCHEDULES
from costs.specs.transformer_spec import ATTENTION
from planner.errors import BadInput
from planner.request.files import read_json

RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class LaunchPlan:
    """One training plan, in the units targets need (counts, samples per GPU, booleans).

    ``microbatch`` is samples (sequences) per GPU per forward/backward pass; ``accumulation``
    microbatches per optimizer step; ``global_batch`` = ``microbatch`` x ``accumulation`` x ``dp``.
    ``model`` is the transformer description of the net spec (layers, heads, widths), or None
    for a CNN.
    """

    net: str
    device: str
    network: str
    gpus: int
    gpus_per_node: int
    precision: str
    scheme: str
    microbatch: int
    accumulation: int
    global_batch: int
    tp: int = 1
    pp: int = 1
    sp: bool = False
    zero: int = 0
    recompute: str = "none"
    ep: int = 1
    interleave: int = 1
    tp_overlap: bool = False
    nvlink_domain: int | None = None  # the plan's GPUs per node (NVLink domain); None: one host
    cp: int = 1  # context-parallel degree
    cp_comm: str = "p2p"  # costs.llm.context.CP_COMM
    pp_schedule: str = "1f1b"  # costs.llm.pipeline.SCHEDULES
    rank_order: str = MEGATRON  # costs.comm.ranks.ORDERS: how the parallel groups lie over the GPUs
    ep_overlap: bool = False
    attention: str = "standard"  # the attention kernel the plan is costed with (ATTENTION)
    seq_len: int | None = None
    model: dict | None = None
    iteration_ms: float | None = None
    source: str = ""

    @property
    def nodes(self) -> int:
        return self.gpus // self.gpus_per_node

    @property
    def dp(self) -> int:
        """Data-parallel replicas: GPUs / (tp x pp x cp)."""
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def transformer(self) -> bool:
        return self.model is not None


def _record(path: Path) -> dict:
    """The plan record a file or folder holds (see the module docstring)."""
    if path.is_dir():
        for name in ("plan_0.json", "run.json"):
            if (path / name).is_file():
                return _record(path / name)
        raise BadInput(
            f"plan {path}: a folder without plan_0.json or run.json (a `planner` run folder has one)"
        )
    data = read_json(path, "plan")  # bounded: size, UTF-8, nesting
    if not isinstance(data, dict):
        raise BadInput(f"plan {path}: not a JSON object")
    if isinstance(data.get("best"), dict):  # run.json of `planner optimize`, or a sweep cell's result
        return {**data["best"], "net": data.get("net") or data["best"].get("net")}
    front = data.get("report", {}).get("front") if isinstance(data.get("report"), dict) else None
    if front:  # run.json of `planner pareto`
        return {**front[0], "net": data["report"].get("net")}
    if "device" in data and "workers" in data:  # plan_<k>.json
        return {**data, "gpu": data["device"], "gpus": data["workers"]}
    raise BadInput(
        f"plan {path}: neither a plan_<k>.json, nor a run.json with a best plan "
        "(write one with `planner optimize` or `planner pareto`)"
    )


def _int(rec: dict, key: str, path: Path, low: int = 1, default: int | None = None) -> int:
    value = rec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < low:
        raise BadInput(f"plan {path}: field '{key}' is {value!r} (an integer >= {low})")
    return int(value)


def _choice(rec: dict, key: str, path: Path, valid: tuple, default=None):
    value = rec.get(key, default)
    if value not in valid:
        raise BadInput(f"plan {path}: field '{key}' is {value!r} (valid: {', '.join(map(str, valid))})")
    return value


def _text(rec: dict, key: str, path: Path) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value:
        raise BadInput(f"plan {path}: field '{key}' is missing (a plan names its {key})")
    return value


def _flag(rec: dict, key: str, path: Path) -> bool:
    value = rec.get(key, "off")
    if value in ("on", "off", True, False):
        return value in ("on", True)
    raise BadInput(f"plan {path}: field '{key}' is {value!r} (valid: on, off)")


def _per_host(device: str, per_node: int) -> int:
    """GPUs per host (one torchrun, one Slurm node) of a plan's node: the plan's node is an NVLink
    domain, which spans several hosts on rack-scale systems (GB200 NVL72: trays of 4,
    devices.toml ``gpus_per_host``)."""
    from planner import catalog
    from planner.errors import PlannerError

    try:
        host = catalog.device(device).raw.get("gpus_per_host")
    except PlannerError as exc:
        raise BadInput(f"plan: field 'gpu': {exc}") from None
    return per_node if not host or per_node % host else min(per_node, int(host))


def _model(net: str) -> dict | None:
    """The net's transformer description (a zoo spec's, or a Hugging Face config.json's as
    planner reads it), or None for a CNN."""
    from planner import catalog
    from planner.errors import PlannerError

    try:
        model = catalog.load_net(net, "modern").meta.get("model")
        return model if isinstance(model, dict) else None
    except PlannerError as exc:
        raise BadInput(f"plan: field 'net': {exc}") from None


def _sweep_cell(text: str) -> dict:
    """The best plan of sweep cell ``SPEC.yaml#N`` (its study's stored result)."""
    from planner.sweep.run import load_with, status

    spec_path, _, index = text.rpartition("#")
    cells = status(load_with(spec_path))
    if not index.isdigit() or int(index) >= len(cells):
        raise BadInput(f"plan {text}: no cell {index} in {spec_path} (valid: 0 to {len(cells) - 1})")
    cell = cells[int(index)]
    result = cell.result or {}
    if cell.state != "done" or not isinstance(result.get("best"), dict):
        why = result.get("infeasible") or f"its study is {cell.state}"
        raise BadInput(f"plan {text}: cell {index} has no best plan ({why}; see `planner sweep status`)")
    return {**result["best"], "net": result.get("net") or cell.cell.request.net}


def load_plan(path: str | Path) -> LaunchPlan:
    """The plan saved at ``path`` (a plan file, a run.json, a run folder, or a sweep cell
    ``SPEC.yaml#N``), validated."""
    text = str(path)
    if "#" in text and text.rpartition("#")[0].endswith((".yaml", ".yml")):
        return plan_from_record(_sweep_cell(text), text)
    path = Path(path)
    if not path.exists():
        raise BadInput(f"plan {path}: no such file or folder")
    return plan_from_record(_record(path), path)


def plan_from_record(rec: dict, path: str | Path) -> LaunchPlan:
    """A plan record (the best plan of a run, or a plan file's fields) as a :class:`LaunchPlan`;
    ``path`` names where it came from in errors."""
    if rec.get("parallel", "data") != "data":
        raise BadInput(
            f"plan {path}: field 'parallel' is {rec['parallel']!r}; launch targets run data-parallel "
            "and transformer model-parallel plans (valid: data)"
        )
    gpus, per_node = _int(rec, "gpus", path), _int(rec, "gpus_per_node", path)
    if gpus % per_node:
        raise BadInput(f"plan {path}: field 'gpus' {gpus} does not fill nodes of gpus_per_node {per_node}")
    tp, pp = _int(rec, "tp", path, default=1), _int(rec, "pp", path, default=1)
    cp = _int(rec, "cp", path, default=1)
    if gpus % (tp * pp * cp):
        raise BadInput(f"plan {path}: field 'gpus' {gpus} is not a multiple of tp x pp x cp = {tp * pp * cp}")
    micro = _int(rec, "microbatch", path, default=rec.get("batch_per_worker"))
    acc = _int(rec, "accumulation", path, default=1)
    net = _text(rec, "net", path)
    model = _model(net)
    device = _text(rec, "gpu", path)
    plan = LaunchPlan(
        net=net,
        device=device,
        network=_text(rec, "network", path),
        gpus=gpus,
        gpus_per_node=_per_host(device, per_node),
        nvlink_domain=per_node,
        precision=_choice(rec, "precision", path, PRECISIONS),
        scheme=_text(rec, "scheme", path),
        microbatch=micro,
        accumulation=acc,
        global_batch=micro * acc * (gpus // (tp * pp * cp)),
        tp=tp,
        pp=pp,
        sp=_flag(rec, "sp", path),
        zero=_choice(rec, "zero", path, ZERO_STAGES, 0),
        recompute=_choice(rec, "recompute", path, RECOMPUTE, "none"),
        ep=_int(rec, "ep", path, default=1),
        interleave=_int(rec, "interleave", path, default=1),
        tp_overlap=_flag(rec, "tp_overlap", path),
        cp=cp,
        cp_comm=_choice(rec, "cp_comm", path, CP_COMM, "p2p"),
        pp_schedule=_choice(rec, "pp_schedule", path, SCHEDULES, "1f1b"),
        rank_order=_choice(rec, "rank_order", path, ORDERS, MEGATRON),
        ep_overlap=_flag(rec, "ep_overlap", path),
        # a record names the kernel where a request set another than the net spec's (--attention)
        attention=_choice(rec, "attention", path, ATTENTION, (model or {}).get("attention", "standard")),
        seq_len=_int(rec, "seq_len", path, default=model["seq_len"]) if model else None,
        model=model,
        iteration_ms=rec.get("iteration_ms") or rec.get("expected", {}).get("iteration_ms"),
        source=str(path),
    )
    saved = rec.get("global_batch")
    if isinstance(saved, int) and saved != plan.global_batch:
        raise BadInput(
            f"plan {path}: field 'global_batch' {saved} is not microbatch x accumulation x dp = {plan.global_batch}"
        )
    return plan
