"""The Request stage of `planner estimate`: what was asked, validated; or a saved plan file.

:func:`validate` checks every option and raises a one-line :class:`BadInput`;
:func:`request_from_plan` rebuilds the request that re-evaluates a plan_<k>.json exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from costs.comm import schemes as comm
from costs.comm.ranks import MEGATRON
from costs.hardware import PRECISIONS
from costs.llm.context import CP_COMM
from costs.llm.memory import RECOMPUTE
from costs.llm.pipeline import SCHEDULES
from planner.errors import BadInput
from planner.request import bounds, defaults
from planner.resizing import normal

PARALLEL = ("data", "model", "hybrid")
SCALING = ("strong", "weak")


@dataclass(frozen=True)
class EstimateRequest:
    """What `planner estimate` was asked. ``batch`` None means the spec's default batch."""

    net: str
    device: str = defaults.DEVICE
    network: str = defaults.NETWORK
    batch: int | None = None
    workers: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    scaling: str = "weak"
    schemes: tuple[str, ...] = comm.PALEO_SCHEMES
    ppp_comp: float = defaults.PPP_COMP
    ppp_comm: float = defaults.PPP_COMM
    pipeline: bool = False
    parallel: str = "data"
    rules: str = defaults.RULES
    conv_algorithm: str = "gemm"
    precision: str = defaults.PRECISION  # auto: the device's training precision
    gpus_per_node: int = 1
    split: str | None = None  # hybrid: first model-parallel layer; None derives it
    accumulation: int = 1  # microbatches per optimizer step (gradient accumulation)
    calibration: str | None = None  # modern rules: profile file; None: the stack's
    optimizer: str = defaults.OPTIMIZER
    stack: str | None = None  # modern rules: a stack name (configs/stacks/); None: the family's default
    data_loader: str = defaults.DATA_LOADER  # auto | cpu | dali | none (modern rules)
    instance: str | None = None  # an instances.toml id: the host (cores, NICs) of the plan
    cpu_cores_per_gpu: float | None = None  # host CPU cores per GPU; None: the host's
    nics: int | None = None  # NICs per node at --network's rate; None: the host's
    fabric: str = "nonblocking"  # the network's tiers between nodes (configs/fabrics.toml)
    rank_order: str = MEGATRON  # which GPUs each parallel group occupies (costs.comm.ranks.ORDERS)
    # transformers under the modern rules (costs.llm.evaluator): model parallelism and batch
    tp: int = 1
    pp: int = 1
    zero: int = 0
    recompute: str = "none"
    sp: bool = False
    tp_overlap: bool = False
    ep: int = 1
    ep_overlap: bool = False  # expert all-to-alls overlapped with compute (costs.llm.experts)
    interleave: int = 1
    cp: int = 1  # context-parallel degree: the sequence split over cp GPUs
    cp_comm: str = "p2p"  # how context parallelism moves keys and values (costs.llm.context.CP_COMM)
    pp_schedule: str = "1f1b"  # pipeline schedule (costs.llm.pipeline.SCHEDULES)
    microbatch: int | None = None  # sequences per GPU per microbatch (None: --batch's)
    global_batch: int | None = None  # sequences per step; sets the microbatches per step
    seq_len: int | None = None  # None: the model's
    attention: str | None = None  # transformers: standard | flash kernel; None: the net spec's
    image_size: int | str | None = None  # vision nets: px a side or a resizing schedule; None: the net's
    convergence: str = "auto"  # epochs by global batch (planner.epochs.CHOICES); named: records state them
    memory_headroom: float | None = None  # share of GPU memory a plan may fill; None: the default

    @property
    def model_parallel(self) -> bool:
        """True when an LLM-parallelism option differs from plain data parallelism."""
        return (
            (
                self.tp,
                self.pp,
                self.zero,
                self.recompute,
                self.sp,
                self.ep,
                self.interleave,
                self.tp_overlap,
                self.cp,
            )
            != (1, 1, 0, "none", False, 1, 1, False, 1)
            or self.ep_overlap
            or self.pp_schedule != "1f1b"
            or self.microbatch is not None
            or self.global_batch is not None
        )

    pue: float | None = None  # data-centre PUE; None: configs/energy.toml's
    grid_intensity: float | None = None  # gCO2 per kWh; None: configs/energy.toml's


def validate(req: EstimateRequest) -> None:
    from planner import catalog, fabrics
    from planner.energy import with_options

    with_options(catalog.energy_defaults(), req.pue, req.grid_intensity)
    if req.batch is not None and req.batch < 1:
        raise BadInput(f"--batch must be a positive integer, got {req.batch}")
    if not req.workers or min(req.workers) < 1:
        raise BadInput(f"--workers must be positive integers, got {','.join(map(str, req.workers))}")
    for name, value in (("--ppp-comp", req.ppp_comp), ("--ppp-comm", req.ppp_comm)):
        if not 0 < value <= 1:
            raise BadInput(f"{name} must be in (0, 1], got {value}")
    if req.accumulation < 1:
        raise BadInput(f"--accumulation must be a positive integer, got {req.accumulation}")
    if req.gpus_per_node < 1:
        raise BadInput(f"--gpus-per-node must be positive, got {req.gpus_per_node}")
    _check_node(req.device, req.gpus_per_node)
    if req.precision not in (*PRECISIONS, "auto"):
        raise BadInput(f"unknown precision '{req.precision}' (valid: auto, {', '.join(PRECISIONS)})")
    if req.parallel not in PARALLEL:
        raise BadInput(f"unknown parallelism '{req.parallel}' (valid: {', '.join(PARALLEL)})")
    if req.scaling not in SCALING:
        raise BadInput(f"unknown scaling '{req.scaling}' (valid: {', '.join(SCALING)})")
    for s in req.schemes:
        if s not in comm.SCHEMES:
            raise BadInput(f"unknown scheme '{s}' (valid: {', '.join(comm.SCHEMES)}, all)")
    fabrics.check_size(req.fabric, max(req.workers), f"--workers {max(req.workers)}")
    _validate_parallel(req)
    bounds.check_request(req)


def _check_node(device: str, gpus_per_node: int) -> None:
    """A node (or NVLink domain) holds at most the device's catalog ``max_gpus_per_node``: 72 for a
    GB200 NVL72 rack, 8 for an HGX H100 (an unknown device is the catalog's own error)."""
    from planner import catalog

    cap = catalog.device(device).device.max_per_node
    if gpus_per_node > cap:
        raise BadInput(
            f"--gpus-per-node {gpus_per_node}: {device} comes at most {cap} to a node "
            f"(devices.toml max_gpus_per_node; valid: 1-{cap})"
        )


def _validate_parallel(req: EstimateRequest) -> None:
    """The transformer options: degrees, batches, ZeRO stage, recomputation, optimizer."""
    for name, value in (
        ("--tp", req.tp),
        ("--pp", req.pp),
        ("--ep", req.ep),
        ("--interleave", req.interleave),
        ("--cp", req.cp),
    ):
        if value < 1:
            raise BadInput(f"{name} must be a positive integer, got {value}")
    for name, value in (("--microbatch", req.microbatch), ("--global-batch", req.global_batch)):
        if value is not None and value < 1:
            raise BadInput(f"{name} must be a positive integer, got {value}")
    if req.zero not in (0, 1, 2, 3):
        raise BadInput(f"--zero {req.zero} (valid: 0, 1, 2, 3)")
    if req.cp_comm not in CP_COMM:
        raise BadInput(f"--cp-comm '{req.cp_comm}' (valid: {', '.join(CP_COMM)})")
    if req.pp_schedule not in SCHEDULES:
        raise BadInput(f"--pp-schedule '{req.pp_schedule}' (valid: {', '.join(SCHEDULES)})")
    if req.ep_overlap and req.ep < 2:
        raise BadInput(
            f"--ep-overlap overlaps the expert all-to-alls: it needs --ep 2 or more, got --ep {req.ep}"
        )
    if req.recompute not in RECOMPUTE:
        raise BadInput(f"--recompute '{req.recompute}' (valid: {', '.join(RECOMPUTE)})")
    if req.optimizer not in defaults.OPTIMIZERS:
        raise BadInput(f"--optimizer '{req.optimizer}' (valid: {', '.join(defaults.OPTIMIZERS)})")


_PLAN_KEYS = (
    "net",
    "device",
    "network",
    "workers",
    "gpus_per_node",
    "batch_per_worker",
    "parallel",
    "split",
    "scheme",
    "precision",
    "pipeline",
    "ppp_comp",
    "ppp_comm",
    "rules",
    "conv_algorithm",
)


def request_from_plan(path: str, net: str | None = None) -> EstimateRequest:
    """The request that re-evaluates a saved plan file exactly (one worker count, one scheme)."""
    from planner.request.files import read_json

    data = read_json(path, "--plan")  # bounded: size, UTF-8, nesting
    missing = [k for k in _PLAN_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise BadInput(
            f"--plan {path} lacks {', '.join(missing)} (a plan_<k>.json of `planner pareto` has them)"
        )
    return EstimateRequest(
        net=net or data["net"],
        device=data["device"],
        network=data["network"],
        batch=int(data["batch_per_worker"]),
        workers=(int(data["workers"]),),
        scaling="weak",
        schemes=(data["scheme"],),
        ppp_comp=float(data["ppp_comp"]),
        ppp_comm=float(data["ppp_comm"]),
        pipeline=bool(data["pipeline"]),
        parallel=data["parallel"],
        rules=data["rules"],
        conv_algorithm=data["conv_algorithm"],
        precision=data["precision"],
        gpus_per_node=int(data["gpus_per_node"]),
        split=data["split"],
        accumulation=int(data.get("accumulation", 1)),  # absent from plans of one microbatch
        calibration=data.get("calibration"),
        **_model_keys(data),
        **_llm_keys(data),
        image_size=normal(data.get("image_size")),
        convergence=str(data.get("convergence", "auto")),
        stack=data.get("stack"),
    )


def _model_keys(data: dict) -> dict:
    """The cost model's options a plan file records (older plan files lack them: defaults)."""
    keys = ("optimizer", "data_loader", "instance", "fabric", "rank_order")
    out: dict = {k: str(data[k]) for k in keys if data.get(k) is not None}
    if data.get("cpu_cores_per_gpu") is not None:
        out["cpu_cores_per_gpu"] = float(data["cpu_cores_per_gpu"])
    if data.get("nics") is not None:
        out["nics"] = int(data["nics"])
    return out


def _llm_keys(data: dict) -> dict:
    """A transformer plan's parallel degrees, ZeRO stage, recomputation and sequence length, as
    plan files record them (``sp``, ``tp_overlap`` and ``ep_overlap`` as on/off)."""
    out: dict = {k: int(data[k]) for k in ("tp", "pp", "zero", "ep", "interleave", "cp") if k in data}
    for key in ("cp_comm", "pp_schedule", "attention"):
        if data.get(key) is not None:
            out[key] = str(data[key])
    out.update({k: data[k] == "on" for k in ("sp", "tp_overlap", "ep_overlap") if k in data})
    if "recompute" in data:
        out["recompute"] = str(data["recompute"])
    if data.get("seq_len") is not None:
        out["seq_len"] = int(data["seq_len"])
    return out
