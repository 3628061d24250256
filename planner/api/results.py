"""Typed results of the Python API: frozen dataclasses over the records the commands print.

Each plan or row keeps its full record (``record``: every column `--format json` shows, read
only) beside typed fields for what every plan has. ``to_frame()`` gives a pandas DataFrame of
the scalar columns (pandas is imported only then).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas

_SCALAR = (str, int, float, bool, type(None))


def _frozen(data: Mapping) -> Mapping[str, Any]:
    return MappingProxyType(dict(data))


def to_frame(records) -> pandas.DataFrame:
    """A DataFrame with one row per record and its scalar columns (lists and tables, such as
    the 80% ranges or the reasons, stay in ``record``)."""
    try:
        import pandas as pd
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "to_frame() needs pandas, which is not installed: pip install pandas (or planner[frame])"
        ) from None
    rows = [{k: v for k, v in r.items() if isinstance(v, _SCALAR)} for r in records]
    return pd.DataFrame.from_records(rows)


def _typed(cls, record: Mapping):
    """``cls`` with each typed field read from ``record`` (None where the record has none)."""
    values = {f.name: record.get(f.name) for f in fields(cls) if f.name != "record"}
    return cls(**values, record=_frozen(record))


@dataclass(frozen=True)
class Plan:
    """One training plan and its predicted metrics, as `planner optimize` reports it.

    Units are in the names: ms, s (time to train), GPU-hours, USD, kWh, kg CO2, GB per GPU. ``cost_usd`` is
    None without a price; ``tokens_per_s`` and ``mfu`` (model FLOPs utilisation, 0-1) are None
    for a net that is not a transformer. With goodput on (the default), time, GPU-hours, cost and
    energy include failures, checkpoints and restarts: ``goodput`` is useful time over wall time,
    ``lost_hours`` the expected time lost, ``ckpt_interval_s`` the checkpoint interval assumed
    (None when nothing fails). ``record`` holds every column of the record."""

    gpu: str
    gpus: int
    gpus_per_node: int
    nodes: int
    batch_per_worker: int
    global_batch: int
    parallel: str
    scheme: str
    precision: str
    tp: int
    pp: int
    dp: int
    zero: int
    iteration_ms: float
    time_to_train_s: float
    gpu_hours: float
    cost_usd: float | None
    energy_kwh: float
    co2_kg: float
    memory_gb: float
    throughput_samples_s: float
    tokens_per_s: float | None
    mfu: float | None
    estimate_command: str
    goodput: float
    lost_hours: float
    ckpt_interval_s: float | None
    record: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, record: Mapping) -> Plan:
        return _typed(cls, record)

    def to_dict(self) -> dict:
        """The full record as a plain (JSON-ready) dict."""
        return dict(self.record)


@dataclass(frozen=True)
class OptimizeResult:
    """The answer of :func:`planner.optimize`: the best plan and the next best (the best plan
    of each other GPU type and count), or the front when several objectives were asked."""

    net: str
    objectives: tuple[str, ...]
    best: Plan
    alternatives: tuple[Plan, ...]
    front: tuple[Plan, ...]  # several objectives: the non-dominated plans; else empty
    why: tuple[str, ...]  # why the best plan wins, as `planner optimize` says it
    search: Mapping[str, Any]  # sampler, seed, trials, plans scored, gap to the exhaustive optimum
    request: Mapping[str, Any]  # the request as run, every option with its value
    data: Mapping[str, Any] = field(repr=False, compare=False)  # everything, as run.json holds it

    @classmethod
    def of(cls, result) -> OptimizeResult:
        """From the pipeline's :class:`planner.result.optimize.Result`."""
        data = result.to_dict()
        return cls(
            net=result.net,
            objectives=tuple(result.objectives),
            best=Plan.of(result.best),
            alternatives=tuple(Plan.of(r) for r in result.alternatives),
            front=tuple(Plan.of(r) for r in result.pareto),
            why=tuple(result.best.get("why", ())),
            search=_frozen(result.search),
            request=_frozen(result.request),
            data=_frozen(data),
        )

    def to_dict(self) -> dict:
        """Everything as plain data (what `planner optimize --format json` prints)."""
        return dict(self.data)

    def to_frame(self) -> pandas.DataFrame:
        """The best plan (rank 0) and the next best (1, 2, ...), or the front: one row each."""
        if self.front:
            return to_frame([p.record for p in self.front])
        plans = (self.best, *self.alternatives)
        return to_frame([{"rank": i, **p.record} for i, p in enumerate(plans)])

    def text(self) -> str:
        """The answer as `planner optimize` prints it (without the Saved line)."""
        from planner.report.text import optimize_text
        from planner.result.optimize import Result

        names = {f.name for f in fields(Result)}
        return optimize_text(Result(**{k: v for k, v in self.data.items() if k in names}), None)

    def save(self, folder: str | Path) -> Path:
        """Write run.json (as `planner optimize --out FOLDER` does) into a new ``folder``."""
        from planner.report.files import dumps, versions, write_atomic

        return write_atomic(Path(folder), {"run.json": dumps({**self.data, "versions": versions()})})


@dataclass(frozen=True)
class ParetoResult:
    """The answer of :func:`planner.pareto`: the front of non-dominated plans and the report."""

    net: str
    objectives: tuple[str, ...]
    front: tuple[Plan, ...]
    evaluated: int  # plans scored
    feasible: int  # of them, the feasible ones
    search: Mapping[str, Any]
    files: Mapping[str, str | bytes] = field(repr=False, compare=False)  # report.html, pareto.csv, ...

    @classmethod
    def of(cls, data: dict, files: dict) -> ParetoResult:
        """From what :func:`planner.pipeline.pareto` returns (report data and files)."""
        return cls(
            net=data["net"],
            objectives=tuple(data["objectives"]),
            front=tuple(Plan.of(r) for r in data["front"]),
            evaluated=int(data["evaluated"]),
            feasible=int(data["feasible"]),
            search=_frozen(data["search"]),
            files=_frozen(files),
        )

    def to_frame(self) -> pandas.DataFrame:
        """The front, one row per plan."""
        return to_frame([p.record for p in self.front])

    def save(self, folder: str | Path) -> Path:
        """Write the report folder (report.html, report.md, pareto.csv, trials.csv, plan files,
        run.json) into a new ``folder``, as `planner pareto --out FOLDER` does."""
        from planner.report.files import write_atomic

        return write_atomic(Path(folder), dict(self.files))


@dataclass(frozen=True)
class EstimateRow:
    """One row of `planner estimate`: a plan at one worker count and AllReduce scheme.

    ``total_ms`` is the step time; ``tokens_per_s``, ``mfu``, ``tp``, ``pp`` and ``zero`` are None
    for a net that is not a transformer."""

    net: str
    device: str
    network: str
    precision: str
    scheme: str
    workers: int
    gpus_per_node: int
    batch_per_worker: int
    effective_batch: int
    forward_ms: float
    backward_ms: float
    update_ms: float
    comm_ms: float
    total_ms: float
    throughput_samples_s: float
    memory_gb: float
    fits_memory: bool | None
    tokens_per_s: float | None
    mfu: float | None
    tp: int | None
    pp: int | None
    zero: int | None
    record: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, record: Mapping) -> EstimateRow:
        return _typed(cls, record)

    def to_dict(self) -> dict:
        """The full record as a plain (JSON-ready) dict."""
        return dict(self.record)


@dataclass(frozen=True)
class EstimateResult:
    """The answer of :func:`planner.estimate`: one row per worker count and scheme."""

    rows: tuple[EstimateRow, ...]

    def to_frame(self) -> pandas.DataFrame:
        """One row per plan, every scalar column of `planner estimate --format json`."""
        return to_frame([r.record for r in self.rows])

    def to_list(self) -> list[dict]:
        """The records as plain data (what `planner estimate --format json` prints)."""
        return [r.to_dict() for r in self.rows]
