"""Measured training runs: read and validate the CSV that ``calibrate`` and ``validate`` take.

One row is one measured run. Required columns (configs/measurements/README.md defines them):
``source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value``.
Optional: ``accumulation`` (microbatches per optimizer step, default 1), ``seq_len``, ``url``,
``date``, ``notes`` and anything else (kept, not read).

``metric`` is ``samples_per_s`` (all GPUs together) or ``iteration_ms`` (forward + backward +
update, one optimizer step); ``out_of_memory`` rows (a batch that did not fit, as
``planner profile`` writes them) are skipped. Rows measured on the CPU (device ``cpu``) are
refused: a GPU's profile is fitted from GPU runs. A bad row is one error naming the file, the
row (1-based, header excluded) and the column, and nothing is read.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from costs import comm
from costs.hardware import PRECISIONS
from planner import catalog
from planner.errors import BadInput, PlannerError

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
METRICS = ("samples_per_s", "iteration_ms")
# Scheme names as published runs state them, mapped to the AllReduce registry. An empty scheme
# (one GPU, or not stated) and "nccl"/"horovod" mean NCCL's ring; a parameter server sends every
# gradient to one place and back, which is PALEO's one-to-all.
SCHEME_ALIASES = {"": "ring", "nccl": "ring", "horovod": "ring", "ps": "onetoall"}


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
    scheme: str  # a key of costs.comm.SCHEMES
    metric: str
    value: float
    accumulation: int = 1
    seq_len: int | None = None

    @property
    def samples_per_s(self) -> float:
        """The measured throughput, whatever the metric: samples per second, all GPUs."""
        if self.metric == "samples_per_s":
            return self.value
        samples = self.batch_per_gpu * self.gpus * self.accumulation
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
            raise self.fail(column, f"unknown {what} '{value}' (valid: {', '.join(sorted(valid))})")
        return value


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
        metric=row.choice("metric", METRICS, "metric"),
        value=row.positive("value"),
        accumulation=row.integer("accumulation", default=1),
        seq_len=row.integer("seq_len", default=None) if "seq_len" in row.data else None,
    )


def load(path: str | Path) -> list[Run]:
    """Every run of a measurements CSV, validated (see the module docstring)."""
    name = str(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise BadInput(
                    f"{name}: missing column(s) {', '.join(missing)} (required: {', '.join(REQUIRED)})"
                )
            rows = list(reader)
    except OSError as exc:
        raise BadInput(f"{name}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{name}: not a UTF-8 text file") from None
    ran = [(i, r) for i, r in enumerate(rows, start=1) if (r.get("metric") or "").strip() != "out_of_memory"]
    if not ran:
        raise BadInput(f"{name}: no measured runs (only a header or out-of-memory rows)")
    nets = set(catalog.zoo()) | set(catalog.NET_ALIASES)
    devices = catalog.devices()
    networks = catalog.networks()
    return [_parse(_Row(name, i, r), nets, devices, networks) for i, r in ran]


def shipped() -> list[Path]:
    """The measurement files shipped in configs/measurements/ that every net of can be read."""
    folder = catalog.configs_dir() / "measurements"
    return [folder / "cnn.csv"] if (folder / "cnn.csv").is_file() else []
