"""Sweep specs: a YAML grid of optimizer requests, one Optuna study per cell.

```yaml
name: portfolio              # required: letters, digits, - _ .
trials: 200                  # trials per study (default 200)
seed: 0                      # sampler seed of every study (default 0)
storage: null                # default: an Optuna journal file in the sweep folder
results: results/sweeps      # the sweep folder is <results>/<name>/
grid:                        # required: every combination of these values is one study
  net: [alexnet, resnet50]
  budget: [16gpus, [64gpus, "$2000"]]    # a list inside the list: both budgets at once
  objective: [time, cost, "time,cost"]
options:                     # fixed `planner optimize` options of every study
  gpu: A100,H100
  network: ib_hdr
```

An invalid spec is rejected before anything runs, with the key and the accepted values.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerError
from planner.paths import user_file
from planner.request.bounds import MAX_GRID_CELLS
from planner.request.optimize import OptimizeRequest
from planner.space.axes import OPTIONS

TOP_KEYS = ("name", "description", "trials", "seed", "storage", "results", "grid", "options")
# optimizer options a sweep may set, with their accepted types
OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "net": (str,),
    "budget": (str, int, list),
    "deadline": (str,),
    "objective": (str,),
    "gpu": (str,),
    "prices": (list,),
    "provider": (str,),  # aws,lambda
    "pricing": (str,),  # on-demand | spot | reserved | reserved-3y
    "owned": (list,),  # ["A100_80GB:16", "H100_SXM:8@1.10"]
    "pue": (int, float),
    "grid_intensity": (int, float),  # gCO2 per kWh
    "electricity": (int, float),  # USD per kWh for owned GPUs
    "network": (str,),
    "epochs": (int, float),
    "convergence": (str,),  # epochs by global batch: auto | goyal-2017 | mlperf-lars | fixed (planner.epochs)
    "dataset_size": (int,),
    "global_batch": (int,),
    "seq_len": (int,),  # transformers: tokens per sequence
    "attention": (str,),  # transformers: the attention kernel, standard | flash
    "image_size": (int, str),  # vision nets: input side in px, or a resizing schedule (planner.resizing)
    "tokens": (str, int, float),  # transformers: "15T", 2e12
    "global_batch_tokens": (str, int, float),  # transformers: "4M"
    "memory_headroom": (int, float),  # share of GPU memory a plan may fill, (0, 1]
    "max_global_batch": (int,),
    "min_global_batch": (int,),
    "optimizer": (str,),
    "precision": (str,),
    "pipeline": (bool,),
    "hybrid": (bool,),
    "ppp_comp": (int, float),
    "ppp_comm": (int, float),
    "rules": (str,),
    "calibration": (str,),  # a profile file of `planner calibrate -o` (modern rules)
    "data_loader": (str,),  # auto | cpu | dali | none
    "instance": (str,),  # aws/p4d.24xlarge[,...]: only these instance types (planner.hosts)
    "cpu_cores_per_gpu": (int, float),  # host CPU cores per GPU
    "nics": (int,),  # NICs per node at the network's rate
    "fabric": (str,),  # the network's tiers between nodes (configs/fabrics.toml)
    "rank_order": (str,),  # which GPUs each parallel group occupies (costs.comm.ranks.ORDERS)
    # goodput (planner.goodput): on | off, failures per 1,000 GPU-hours, checkpoint GB/s in all,
    # job relaunch minutes, asynchronous checkpoints
    "goodput": (str,),
    "failures_per_1k_gpu_hours": (int, float),
    "ckpt_write_gbs": (int, float),
    "restart_min": (int, float),
    "async_ckpt": (bool,),
    "conv_algorithm": (str,),
    "exhaustive": (str,),
    # the options of declared search axes (planner.space.axes), e.g. accumulation: "1,2,4"
    **{a.name: (str, int, list) for a in OPTIONS},
}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class SweepSpecError(PlannerError):
    """A sweep spec is malformed; the message names the key and the accepted values."""


@dataclass(frozen=True)
class Cell:
    """One study of the sweep: its index, its grid values and its optimizer request."""

    index: int
    values: dict
    request: OptimizeRequest
    study: str  # stable Optuna study name


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: Path
    trials: int
    seed: int
    storage_url: str | None
    results: Path
    grid: dict
    options: dict
    raw: dict

    @property
    def folder(self) -> Path:
        return self.results / self.name

    @property
    def storage(self) -> str:
        """The Optuna storage of every study: the spec's, or a journal file in the folder."""
        return self.storage_url or f"journal:{self.folder / 'studies.journal'}"

    def cells(self) -> list[Cell]:
        keys = list(self.grid)
        out = []
        for i, combo in enumerate(itertools.product(*(self.grid[k] for k in keys))):
            values = dict(zip(keys, combo, strict=True))
            opts = {**self.options, **values}
            out.append(Cell(i, values, _request(opts, self), study_name(self.name, values, opts, self)))
        return out


def _fail(path, message: str) -> SweepSpecError:
    return SweepSpecError(f"sweep spec {path}: {message}")


def _budgets(value) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    return tuple(str(v) for v in items)


def _axis_text(value) -> str:
    """An axis option of a spec (1, "1,2,4" or [1, 2, 4]) as the CLI's text."""
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _request(opts: dict, spec: SweepSpec) -> OptimizeRequest:
    axes = {a.name for a in OPTIONS}
    kwargs = {k: v for k, v in opts.items() if k not in ("budget", "prices", "owned") and k not in axes}
    if "budget" in opts:
        kwargs["budget"] = _budgets(opts["budget"])
    if "prices" in opts:
        kwargs["prices"] = tuple(str(v) for v in opts["prices"])
    if "owned" in opts:
        kwargs["owned"] = tuple(str(v) for v in opts["owned"])
    return OptimizeRequest(
        **kwargs,
        axes=tuple((a.name, _axis_text(opts[a.name])) for a in OPTIONS if a.name in opts),
        trials=spec.trials,
        seed=spec.seed,
        storage=spec.storage,
        study_name=None,
    )


def study_name(sweep: str, values: dict, opts: dict, spec: SweepSpec) -> str:
    """Readable and stable: the grid values, plus a hash of everything that shapes the study."""
    label = "-".join("+".join(_budgets(v)) if isinstance(v, list) else str(v) for v in values.values())
    label = re.sub(r"[^A-Za-z0-9_.+$-]+", "_", label).replace("$", "usd")
    digest = hashlib.sha1(
        json.dumps({"opts": opts, "trials": spec.trials, "seed": spec.seed}, sort_keys=True).encode()
    ).hexdigest()[:8]
    return f"{sweep}.{label}.{digest}"


def _read(path: Path) -> dict:
    """The spec file's YAML mapping, read by the bounded reader (size, UTF-8, duplicate keys,
    nesting, alias expansion: planner/request/files.py); one-line errors."""
    from planner.request.files import parse_yaml, read_text

    raw = parse_yaml(read_text(path, "sweep spec", SweepSpecError), f"sweep spec {path}", SweepSpecError)
    if not isinstance(raw, dict):
        raise _fail(path, f"must be a mapping with the keys {', '.join(TOP_KEYS)}")
    unknown = [k for k in raw if k not in TOP_KEYS]
    if unknown:
        raise _fail(path, f"unknown key '{unknown[0]}' (accepted: {', '.join(TOP_KEYS)})")
    return raw


def _check_top(path: Path, raw: dict) -> None:
    """name, trials, seed and storage."""
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(path, "'name' must be a word of letters, digits, '-', '_' or '.'")
    for key, lo in (("trials", 1), ("seed", 0)):
        v = raw.get(key, 200 if key == "trials" else 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise _fail(path, f"'{key}' must be an integer >= {lo}, got {v!r}")
    storage = raw.get("storage")
    if storage is not None and not (
        isinstance(storage, str) and re.match(r"^(journal:|sqlite:|postgresql)", storage)
    ):
        raise _fail(
            path, f"'storage' must be journal:FILE, sqlite:///FILE or postgresql://..., got {storage!r}"
        )


def _check_option(path: Path, where: str, key: str, value) -> None:
    """One grid or options entry: a known option with values of its accepted types."""
    if key not in OPTION_TYPES:
        raise _fail(path, f"unknown option '{key}' in {where} (accepted: {', '.join(OPTION_TYPES)})")
    if where == "grid" and (not isinstance(value, list) or not value):
        raise _fail(path, f"grid.{key} must be a non-empty list of values")
    types = OPTION_TYPES[key]
    for v in value if where == "grid" else [value]:
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            accepted = " or ".join(t.__name__ for t in types)
            raise _fail(path, f"{where}.{key} value {v!r} is not {accepted}")


def _check_tables(path: Path, grid, options) -> None:
    """grid and options: mappings of known options, disjoint, with a net somewhere."""
    if not isinstance(grid, dict) or not grid:
        raise _fail(path, "'grid' must map option names to lists of values, e.g. net: [alexnet, vgg16]")
    if not isinstance(options, dict):
        raise _fail(path, "'options' must map option names to values")
    for where, table in (("grid", grid), ("options", options)):
        for key, value in table.items():
            _check_option(path, where, key, value)
    both = set(grid) & set(options)
    if both:
        raise _fail(path, f"'{sorted(both)[0]}' is in both grid and options; keep it in one")
    if "net" not in grid and "net" not in options:
        raise _fail(path, "no 'net': put net in grid (a list) or in options")
    cells = math.prod(len(v) for v in grid.values())
    if cells > MAX_GRID_CELLS:
        raise _fail(path, f"the grid has {cells:,} cells, over the bound of {MAX_GRID_CELLS:,} studies")


def _check_cells(spec: SweepSpec) -> None:
    """Distinct cells, each a valid request (bad names, budgets, options) before anything runs."""
    from planner.pipeline import build

    cells = spec.cells()
    names = [c.study for c in cells]
    if len(set(names)) != len(names):
        raise _fail(spec.path, "two grid cells are identical (repeated values in a grid list)")
    for cell in cells:
        try:
            build(cell.request)
        except PlannerError as exc:
            raise _fail(spec.path, f"cell {cell.values}: {exc}") from None


def load(path: str | Path, results: str | Path | None = None) -> SweepSpec:
    """Read and validate a spec; every cell's request is checked (names, budgets, ...) too."""
    path = user_file(path)
    raw = _read(path)
    _check_top(path, raw)
    grid, options = raw.get("grid"), raw.get("options") or {}
    _check_tables(path, grid, options)
    results_dir = Path(results) if results is not None else Path(raw.get("results") or "results/sweeps")
    spec = SweepSpec(
        raw["name"],
        path,
        raw.get("trials", 200),
        raw.get("seed", 0),
        raw.get("storage"),
        results_dir,
        grid,
        options,
        raw,
    )
    _check_cells(spec)
    return spec
