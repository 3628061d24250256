"""Measured training runs: read and validate the CSV that ``calibrate`` and ``validate`` take.

One row is one measured run. Required columns (configs/measurements/README.md defines them):
``source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value``.
Optional: ``accumulation`` (microbatches per optimizer step, default 1), ``seq_len``, ``tp`` and
``pp`` (tensor- and pipeline-parallel sizes, default 1), ``interleave`` (virtual pipeline stages
per GPU, Megatron's interleaved schedule; default 1, more only with ``pp`` > 1), ``ep``
(expert-parallel size of a mixture of experts, inside the data-parallel group; default 1),
``cp`` (context-parallel size: the sequence split over ``cp`` GPUs; default 1) and
``cp_comm`` (its key/value exchange: ``p2p``, ``all_gather`` or ``a2a``; default p2p),
``pp_schedule`` (the pipeline schedule: ``1f1b``, ``zb1p``, ``dualpipe``, ``dualpipev``; default 1f1b),
``rank_order`` (how the parallel groups lie over the GPUs, :mod:`costs.comm.ranks`:
``tp-cp-ep-dp-pp``, Megatron-Core's default, or ``tp-cp-ep-pp-dp``; default tp-cp-ep-dp-pp),
``zero`` (ZeRO stage 0-3 of the data-parallel group, 3 = FSDP full sharding; default 0), ``sp``
(``yes``: sequence parallelism with TP), ``recompute`` (activation recomputation: ``none``,
``selective``, ``full``; empty when not stated), ``data_loader`` (the run's input pipeline as
its source states it: ``cpu``, JPEG decoding on the host's cores; ``dali``, decoding on the GPU;
``none``, data already decoded; empty: ``none``, no input bound, as before the column) with
``cpu_cores_per_gpu`` (host cores decoding for one GPU in the run; empty: the assumed host's;
planner.loaders), ``attention`` (the run's attention kernel, ``standard`` or ``flash``: it
belongs to the software, e.g. Transformer Engine's fused attention; empty: the net spec's; a
transformer net only), ``flops_counting`` (see
:mod:`planner.calibrate.flops`), ``url``, ``date``, ``notes`` and anything else (kept, not read).

``metric`` is ``samples_per_s`` (all GPUs together; a transformer's sample is one sequence),
``iteration_ms`` (forward + backward + update, one optimizer step), ``tokens_per_s`` (all GPUs;
needs ``seq_len``), ``tokens_per_s_per_gpu`` (one GPU's share, as Megatron-Bridge and torchtitan
print it; needs ``seq_len``) or ``tflops_per_gpu`` (model teraFLOP/s per GPU as the source counts them; needs
``seq_len``, ``flops_counting`` and a net with a transformer ``model`` description). Every metric
is read as samples per second. ``out_of_memory`` rows (a batch that did not fit, as
``planner profile`` writes them) are skipped. Rows measured on the CPU (device ``cpu``) are
refused: a GPU's profile is fitted from GPU runs. A bad row is one error naming the file, the
row (1-based, header excluded) and the column, and nothing is read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from costs.comm import schemes as comm
from costs.comm.ranks import MEGATRON, ORDERS
from costs.hardware import PRECISIONS
from costs.llm.context import CP_COMM
from costs.llm.pipeline import SCHEDULES
from costs.specs.transformer_spec import ATTENTION
from planner import catalog, hosts
from planner.calibrate import flops
from planner.errors import BadInput, PlannerError
from planner.paths import user_file

REQUIRED = (
    "source",
    "net",
    "device",
    "precision",
    "gpus",
    "gpus_per_node",
    "network",
    "batch_per_gpu",
    "scheme",
    "metric",
    "value",
)
METRICS = ("samples_per_s", "iteration_ms", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu")
TOKEN_METRICS = ("tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu")  # need seq_len
RECOMPUTE = ("", "none", "selective", "full")
# Scheme names as published runs state them, mapped to the AllReduce registry. An empty scheme
# (one GPU, or not stated) and "nccl"/"horovod" mean NCCL's ring; a parameter server sends every
# gradient to one place and back, which is PALEO's one-to-all.
SCHEME_ALIASES = {"": "ring", "nccl": "ring", "horovod": "ring", "ps": "onetoall"}
# Frameworks whose runs overlap the expert all-to-all with compute (costs.llm.experts): DeepSeek's
# HAI-LLM trains DeepSeek-V3 with DualPipe and its all-to-all kernels (arXiv:2412.19437 §3.2).
EP_OVERLAP_FRAMEWORKS = re.compile(r"^hai-llm")


@dataclass(frozen=True)
class Run:
    """One validated measured run."""

    row: int  # 1-based data row in its file
    source: str
    net: str
    device: str
    precision: str
    gpus: int
    gpus_per_node: int
    network: str  # the link between nodes; the device's own link when the run is one node
    batch_per_gpu: int
    scheme: str  # a key of costs.comm.schemes.SCHEMES
    metric: str
    value: float
    accumulation: int = 1
    seq_len: int | None = None
    tp: int = 1  # tensor-parallel size
    pp: int = 1  # pipeline-parallel size
    interleave: int = 1  # virtual pipeline stages per GPU (Megatron's interleaved 1F1B schedule)
    ep: int = 1  # expert-parallel size (mixture of experts), inside the data-parallel group
    zero: int = 0  # ZeRO stage of the data-parallel group (3 = FSDP full sharding)
    sp: bool = False  # sequence parallelism with tensor parallelism (source says so)
    recompute: str = ""  # activation recomputation as the source states it; "" when it does not
    tp_overlap: bool = False  # tensor-parallel communication overlapped with GEMMs (source says so)
    cp: int = 1  # context-parallel size
    cp_comm: str = "p2p"  # its key/value exchange (costs.llm.context.CP_COMM)
    pp_schedule: str = "1f1b"  # the pipeline schedule (costs.llm.pipeline.SCHEDULES)
    rank_order: str = MEGATRON  # the parallel groups' rank order (costs.comm.ranks.ORDERS)
    ep_overlap: bool = False  # expert all-to-alls overlapped with compute (EP_OVERLAP_FRAMEWORKS)
    data_loader: str = "none"  # the input pipeline (planner.loaders): cpu | dali | none
    cpu_cores_per_gpu: float | None = None  # host cores decoding for one GPU (None: assumed host's)
    attention: str | None = None  # the run's attention kernel (ATTENTION); None: the net spec's
    flops_per_sample: float | None = None  # model FLOPs per sequence as the source counts them

    @property
    def model_parallel(self) -> bool:
        """Whether the run splits the model (tensor, pipeline or expert parallelism)."""
        return self.tp * self.pp * self.ep * self.cp > 1

    @property
    def samples_per_s(self) -> float:
        """The measured throughput, whatever the metric: samples per second, all GPUs."""
        if self.metric == "samples_per_s":
            return self.value
        if self.metric == "tokens_per_s":
            return self.value / self.seq_len
        if self.metric == "tokens_per_s_per_gpu":
            return self.value * self.gpus / self.seq_len
        if self.metric == "tflops_per_gpu":
            return self.value * 1e12 * self.gpus / self.flops_per_sample
        replicas = self.gpus // (self.tp * self.pp * self.cp)
        samples = self.batch_per_gpu * replicas * self.accumulation
        return samples / (self.value / 1e3)


class _Row:
    """Field access for one CSV row that raises one error naming file, row and column."""

    def __init__(self, path: str, index: int, data: dict[str, str]):
        self.path, self.index, self.data = path, index, data

    def fail(self, column: str, problem: str) -> PlannerError:
        return BadInput(f"{self.path} row {self.index}, column '{column}': {problem}")

    def text(self, column: str, allow_empty: bool = False) -> str:
        value = (self.data.get(column) or "").strip()
        if not value and not allow_empty:
            raise self.fail(column, "missing value")
        return value

    def integer(self, column: str, default: int | None = None, minimum: int = 1) -> int | None:
        raw = self.text(column, allow_empty=default is not None or column not in REQUIRED)
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise self.fail(column, f"'{raw}' is not a whole number") from None
        if value < minimum:
            raise self.fail(column, f"{value} is below {minimum}")
        return value

    def positive(self, column: str) -> float:
        raw = self.text(column)
        try:
            value = float(raw)
        except ValueError:
            raise self.fail(column, f"'{raw}' is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise self.fail(column, f"{raw} is not a positive finite number")
        return value

    def choice(self, column: str, valid, what: str, allow_empty: bool = False) -> str:
        value = self.text(column, allow_empty=allow_empty)
        if value not in valid:
            raise self.fail(
                column, f"unknown {what} '{value}' (valid: {', '.join(sorted(v for v in valid if v))})"
            )
        return value


def _parallel(row: _Row, gpus: int) -> tuple[int, int]:
    tp, pp = row.integer("tp", default=1), row.integer("pp", default=1)
    cp = row.integer("cp", default=1)
    if gpus % (tp * pp * cp):
        what = "tp x pp x cp" if cp > 1 else "tp x pp"
        raise row.fail("pp", f"{gpus} GPUs are not a whole number of {what} = {tp * pp * cp} groups")
    return tp, pp


def _ep(row: _Row, gpus: int, tp: int, pp: int) -> int:
    """Expert-parallel size: the experts are split inside the data-parallel group."""
    ep = row.integer("ep", default=1)
    dp = gpus // (tp * pp * row.integer("cp", default=1))
    if dp % ep:
        raise row.fail("ep", f"expert-parallel size {ep} does not divide the data-parallel size {dp}")
    return ep


def _recompute(row: _Row, net: str, attention: str | None) -> str:
    """The recomputation policy; ``selective`` (Korthikanti et al.'s: the core attention again)
    needs a run whose attention is not one fused kernel (its ``attention``, else its net's)."""
    value = row.choice("recompute", RECOMPUTE, "recompute policy", allow_empty=True)
    if value == "selective" and not net.endswith(".json") and kernel(net, attention) == "flash":
        raise row.fail(
            "recompute",
            f"selective recomputes standard attention; the run's flash kernel (column attention, else "
            f"{net}'s) keeps no scores (valid: none, full)",
        )
    return value


def kernel(net: str, attention: str | None) -> str:
    """The attention kernel a run of ``net`` is costed with: its ``attention`` column's, else its
    net spec's (standard where the spec names none)."""
    model = catalog.net_spec(net).get("model") if attention is None else None
    return attention or (model or {}).get("attention", "standard")


def _attention(row: _Row, net: str) -> str | None:
    """The run's attention kernel (empty: None, the net spec's); a net without a transformer
    ``model`` description has no kernel to choose."""
    value = row.choice("attention", ("", *ATTENTION), "attention kernel", allow_empty=True)
    if value and not net.endswith(".json") and not isinstance(catalog.net_spec(net).get("model"), dict):
        raise row.fail("attention", f"'{value}' needs a transformer net ({net} has no 'model'; valid: empty)")
    return value or None


def _interleave(row: _Row, pp: int) -> int:
    """Virtual pipeline stages per GPU; an interleaved schedule needs a pipeline to interleave."""
    v = row.integer("interleave", default=1)
    if v > 1 and pp == 1:
        raise row.fail("interleave", f"{v} virtual pipeline stages need pipeline parallelism (pp > 1)")
    return v


def _zero(row: _Row) -> int:
    stage = row.integer("zero", default=0, minimum=0)
    if stage > 3:
        raise row.fail("zero", f"ZeRO stage {stage} does not exist (valid: 0, 1, 2, 3)")
    return stage


LOADERS = ("cpu", "dali", "none")  # planner.loaders; "" reads as none (no input bound)


def _loader(row: _Row) -> tuple[str, float | None]:
    """The run's data loader and the host cores feeding each GPU's (cpu, or dali on a GPU it
    cannot serve); cores without a loader that reads them are refused."""
    loader = row.choice("data_loader", ("", *LOADERS), "data loader", allow_empty=True) or "none"
    if not row.text("cpu_cores_per_gpu", allow_empty=True):
        return loader, None
    if loader == "none":
        raise row.fail("cpu_cores_per_gpu", "host cores need data_loader cpu or dali (valid: empty)")
    cores = row.positive("cpu_cores_per_gpu")
    if cores > hosts.MAX_CORES_PER_GPU:  # the bound of --cpu-cores-per-gpu
        raise row.fail("cpu_cores_per_gpu", f"{cores:g} is above {hosts.MAX_CORES_PER_GPU:g}")
    return loader, cores


def _flops(row: _Row, net: str, metric: str, seq_len: int | None) -> float | None:
    """Model FLOPs per sequence for a ``tflops_per_gpu`` run (None for the other metrics)."""
    if metric in TOKEN_METRICS and seq_len is None:
        raise row.fail("seq_len", f"metric {metric} needs the sequence length")
    if metric != "tflops_per_gpu":
        return None
    counting = row.choice("flops_counting", flops.COUNTINGS, "FLOP counting")
    model = catalog.net_spec(net).get("model")
    if model is None:
        raise row.fail("net", f"metric {metric} needs a transformer net with a 'model' description")
    try:
        return flops.per_sequence(counting, model, seq_len)
    except ValueError as exc:
        raise row.fail("flops_counting", str(exc)) from None


def _rank_order(row: _Row) -> str:
    return row.choice("rank_order", ("", *ORDERS), "rank order", allow_empty=True) or MEGATRON


def _parse(row: _Row, nets: set[str], devices: dict, networks: dict) -> Run:
    net = row.text("net")
    if net not in nets and not Path(net).suffix == ".json":
        raise row.fail("net", f"unknown net '{net}' (valid: {', '.join(sorted(nets))}, or a .json spec)")
    if row.text("device", allow_empty=True) == "cpu":
        raise row.fail(
            "device",
            "measured on the CPU: a GPU profile is fitted from GPU runs (run planner profile on the GPU)",
        )
    device = row.choice("device", devices, "device")
    precision = row.choice("precision", PRECISIONS, "precision")
    if precision not in devices[device].device.peak_flops:
        have = ", ".join(devices[device].device.peak_flops)
        raise row.fail("precision", f"device {device} has no {precision} peak in the catalog (has: {have})")
    gpus = row.integer("gpus")
    per_node = row.integer("gpus_per_node")
    if gpus % per_node:
        raise row.fail("gpus_per_node", f"{gpus} GPUs do not fill whole nodes of {per_node}")
    cap = devices[device].device.max_per_node
    if per_node > cap:
        raise row.fail("gpus_per_node", f"{device} comes at most {cap} to a node")
    network = row.text("network", allow_empty=gpus == per_node)
    if network and network not in networks:
        raise row.fail("network", f"unknown link '{network}' (valid: {', '.join(networks)})")
    scheme = row.text("scheme", allow_empty=True)
    scheme = SCHEME_ALIASES.get(scheme, scheme)
    if scheme not in comm.SCHEMES:
        valid = sorted(set(comm.SCHEMES) | set(SCHEME_ALIASES) - {""})
        raise row.fail("scheme", f"unknown scheme '{scheme}' (valid: {', '.join(valid)})")
    intra = devices[device].device.intra_link
    metric = row.choice("metric", METRICS, "metric")
    seq_len = row.integer("seq_len", default=None) if "seq_len" in row.data else None
    tp, pp = _parallel(row, gpus)
    attention = _attention(row, net)
    return Run(
        row=row.index,
        source=row.text("source"),
        net=net,
        device=device,
        precision=precision,
        gpus=gpus,
        gpus_per_node=per_node,
        network=network or intra or "pcie3",
        batch_per_gpu=row.integer("batch_per_gpu"),
        scheme=scheme,
        metric=metric,
        value=row.positive("value"),
        accumulation=row.integer("accumulation", default=1),
        seq_len=seq_len,
        tp=tp,
        pp=pp,
        interleave=_interleave(row, pp),
        ep=_ep(row, gpus, tp, pp),
        zero=_zero(row),
        sp=row.choice("sp", ("", "no", "yes"), "yes or no", allow_empty=True) == "yes",
        recompute=_recompute(row, net, attention),
        tp_overlap=row.choice("tp_overlap", ("", "no", "yes"), "yes or no", allow_empty=True) == "yes",
        cp=row.integer("cp", default=1),
        cp_comm=row.choice("cp_comm", ("", *CP_COMM), "context-parallel exchange", allow_empty=True) or "p2p",
        pp_schedule=row.choice("pp_schedule", ("", *SCHEDULES), "pipeline schedule", allow_empty=True)
        or "1f1b",
        rank_order=_rank_order(row),
        ep_overlap=bool(EP_OVERLAP_FRAMEWORKS.match(row.text("framework", allow_empty=True))),
        flops_per_sample=_flops(row, net, metric, seq_len),
        attention=attention,
        **dict(zip(("data_loader", "cpu_cores_per_gpu"), _loader(row), strict=True)),
    )


def load(path: str | Path) -> list[Run]:
    """Every run of a measurements CSV, validated (see the module docstring)."""
    from planner.calibrate import plausible
    from planner.request.files import read_csv

    name = str(path)
    header, rows = read_csv(user_file(path), "measurements")  # bounded; BOM and CRLF accepted
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise BadInput(f"{name}: missing column(s) {', '.join(missing)} (required: {', '.join(REQUIRED)})")
    ran = [(i, r) for i, r in enumerate(rows, start=1) if (r.get("metric") or "").strip() != "out_of_memory"]
    if not ran:
        raise BadInput(f"{name}: no measured runs (only a header or out-of-memory rows)")
    nets = set(catalog.zoo()) | set(catalog.NET_ALIASES) | set(catalog.measurement_nets())
    devices = catalog.devices()
    networks = catalog.networks()
    runs = [_parse(_Row(name, i, r), nets, devices, networks) for i, r in ran]
    plausible.check(runs, name)  # no value above what the GPU can compute
    return runs


SHIPPED = ("cnn.csv", "transformer.csv", "llm.csv")  # what ``validate`` checks by default
FITTED = ("cnn.csv", "llm.csv")  # what ``calibrate`` fits by default (the default profile's runs)


def shipped(names: tuple[str, ...] = SHIPPED) -> list[Path]:
    """Measurement files shipped in configs/measurements/ that every net of can be read
    (``pending.csv`` holds runs not usable yet and is not among them)."""
    folder = catalog.configs_dir() / "measurements"
    return [folder / name for name in names if (folder / name).is_file()]
