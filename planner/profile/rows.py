"""Profile results as rows of the measurements CSV that ``planner calibrate`` reads
(configs/measurements/README.md), the peaks as a side file, and the catalog key of a GPU read
from its name. No torch here.

One row per (precision, batch): ``metric`` ``samples_per_s`` (the batch over the median step
time), the phases in ``notes``, a transformer's attention kernel in ``attention``. A batch that
ran out of memory is a row with ``metric`` ``out_of_memory`` and no value, which the loader skips. Rows measured on the CPU carry the
device ``cpu``, which ``calibrate`` refuses: a GPU's profile is fitted from GPU rows only.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from planner import catalog
from planner.errors import BadInput
from planner.report.render import safe_cell

COLUMNS = (
    "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,"
    "framework,data,seq_len,accumulation,tp,pp,attention,url,date,notes"
).split(",")
CPU = "cpu"
OOM_METRIC = "out_of_memory"
PEAK_COLUMNS = ["source", "device", "kind", "precision", "value", "unit", "size", "date"]

# Names the NVIDIA driver reports (torch.cuda.get_device_name(), nvidia-smi) -> catalog keys.
# The names are RunPod's GPU type ids, which are these driver names: the table of
# https://github.com/runpod/docs/blob/main/docs/references/gpu-types.md (generated 2024-01-24,
# read 2026-11-23), and "NVIDIA H200" / "NVIDIA B200" / "Tesla V100-SXM2-*" in RunPod's later
# lists (a 2026-02-26 snapshot of its GPU types API); "NVIDIA H100 80GB HBM3" is also what an
# H100 SXM reported when configs/profiles/h100-sxm-pytorch-eager.csv was measured.
GPU_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100_SXM",
    "NVIDIA H100 PCIe": "H100_PCIE",
    "NVIDIA H200": "H200",
    "NVIDIA B200": "B200",
    "NVIDIA A100-SXM4-80GB": "A100_80GB",
    "NVIDIA A100 80GB PCIe": "A100_80GB_PCIE",
    "NVIDIA A30": "A30",
    "NVIDIA L4": "L4",
    "Tesla V100-SXM2-16GB": "V100_16GB",
    "Tesla V100-SXM2-32GB": "V100_32GB",
}


@dataclass(frozen=True)
class Env:
    """Where the profile ran: the device's name, driver and framework, and the date."""

    name: str  # e.g. "NVIDIA H100 80GB HBM3", or the CPU's
    key: str  # catalog key, or "cpu"
    driver: str  # driver version, "" on the CPU
    torch: str  # torch.__version__
    date: str  # YYYY-MM-DD (UTC)

    @property
    def source(self) -> str:
        slug = re.sub(r"[^a-z0-9.+]+", "-", self.name.lower()).strip("-")
        driver = f"-driver-{self.driver}" if self.driver else ""
        return f"profile-{slug}{driver}-torch-{self.torch}-{self.date}"


def device_key(gpu_name: str | None, given: str | None) -> str:
    """The catalog key: ``--device-key`` when given (checked), else read from the GPU's name;
    on the CPU (``gpu_name`` None) the key is ``cpu``."""
    devices = catalog.devices()
    if given is not None and given not in devices:
        raise BadInput(f"--device-key '{given}' is not in the catalog (valid: {', '.join(devices)})")
    if gpu_name is None:
        return CPU
    if given is not None:
        return given
    if gpu_name in GPU_NAMES:
        return GPU_NAMES[gpu_name]
    raise BadInput(
        f"cannot tell which catalog device '{gpu_name}' is: give --device-key (valid: {', '.join(devices)})"
    )


def _fmt(x: float) -> str:
    return f"{x:.4f}"


def row(
    env: Env, net: str, precision: str, step, settings: str, seq_len: int | None, attention: str | None = None
) -> dict:
    """One CSV row of a :class:`planner.profile.timing.Step` (seconds inside, ms in notes); a
    transformer's ``attention`` kernel (standard | flash) as the run's, a CNN's None."""
    common = {c: "" for c in COLUMNS} | {
        "source": env.source,
        "net": net,
        "device": env.key,
        "precision": precision,
        "gpus": 1,
        "gpus_per_node": 1,
        "batch_per_gpu": step.batch,
        "framework": f"pytorch-{env.torch}",
        "data": "synthetic",
        "seq_len": seq_len or "",
        "attention": attention or "",
        "accumulation": 1,
        "date": env.date,
    }
    where = (
        f"{env.name}" + (f", driver {env.driver}" if env.driver else "") + f"; planner profile, {settings}"
    )
    if step.status != "ok":
        return common | {"metric": OOM_METRIC, "notes": f"{where}; out of memory at batch {step.batch}"}
    ms = lambda s: _fmt(s * 1e3)  # noqa: E731
    notes = (
        f"{where}; step {ms(step.step)} ms = forward {ms(step.forward)} + backward {ms(step.backward)}"
        f" + optimizer {ms(step.optimizer)}"
    )
    if step.peak_memory_bytes:
        notes += f"; peak memory {step.peak_memory_bytes / 1e9:.2f} GB"
    return common | {"metric": "samples_per_s", "value": _fmt(step.batch / step.step), "notes": notes}


def to_csv(rows: list[dict], columns=COLUMNS) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    w.writerows({k: safe_cell(v) for k, v in r.items()} for r in rows)  # no cell runs as a formula
    return buf.getvalue()


def peak_rows(env: Env, peaks) -> list[dict]:
    """The peaks as rows of the side file (``<output stem>.peaks.csv``)."""
    return [
        {
            "source": env.source,
            "device": env.key,
            "kind": p.kind,
            "precision": p.precision,
            "value": f"{p.value:.4g}",
            "unit": "TFLOP/s" if p.kind == "matmul_tflops" else "GB/s read+write",
            "size": p.size,
            "date": env.date,
        }
        for p in peaks
    ]
