"""Calibration profiles of the ``modern`` rule set: which parameters a fit varies, and how a
fitted profile is written, read and applied to the cited default efficiencies.

A profile does not replace the catalog's efficiencies device by device: it scales them by
group, so what a fit learns on one GPU carries to its siblings (an H100 fit also moves H200 and
H100 PCIe) and cited differences between devices of a generation survive. The groups:

  gemm.<generation>.<precision>   scale on the GEMM/convolution fraction of peak; fp16 and bf16
                                  share one group, gemm.<generation>.16bit: the same tensor
                                  cores run both at the same peak
  memory.<generation>             scale on the memory-bandwidth fraction
  link.<kind>                     scale on the link fraction (intra_node / inter_node)
  winograd.<generation>           scale on the Winograd FLOP reduction (kept within [1, 4])
  attention.<generation>          scale on fused attention's rate relative to a GEMM's (runs of
                                  transformers with flash attention)
  host_per_kernel_us, kernel_min_us, iteration_us   overheads, absolute (microseconds)
  straggler_cv, overlap_slowdown   costs of synchronous data parallelism, dimensionless (the
                                  [sync] table; costs.modern.efficiency): fitted only on runs of
                                  several GPUs

Scales start at 1 (the cited default); fractions stay at most 1 after scaling.

A fit may start from a prior profile instead (``space(..., prior=P)``: a user's runs refining a
shipped stack): the parameters the runs exercise start at, and are pulled toward, P's values,
and P's values of every other parameter are kept as they are (see :mod:`planner.calibrate.fitting`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from costs.fit import calibration as cal
from costs.hardware import PRECISIONS, TENSOR_FP16_RATIO
from costs.modern.efficiency import Efficiency
from planner import catalog
from planner.errors import BadInput
from planner.paths import user_file

OVERHEADS = ("host_per_kernel_us", "kernel_min_us", "iteration_us")
_FIELD = {
    "host_per_kernel_us": "host_per_kernel_s",
    "kernel_min_us": "kernel_min_s",
    "iteration_us": "iteration_s",
}
# Costs of synchronous data parallelism ([sync] table), dimensionless. No published figure
# gives them for a software stack: their priors are small positive values with a wide spread
# (log-space fits need a positive start), and the runs of several GPUs decide.
SYNC = ("straggler_cv", "overlap_slowdown")
_SYNC_PRIOR = {"straggler_cv": 0.01, "overlap_slowdown": 0.1}
_SYNC_BOUNDS = {"straggler_cv": (1e-4, 0.2), "overlap_slowdown": (1e-3, 1.0)}
# Priors of overheads whose cited default is 0 (no published figure): a small positive value
# with a wide spread, so the data decide (log-space fits need a positive start).
_ZERO_PRIOR_US = {"kernel_min_us": 2.0, "iteration_us": 100.0}
WINOGRAD_RANGE = (1.0, 4.0)  # no reduction .. F(4x4,3x3)'s 4x (costs.modern.efficiency)
ATTENTION_RANGE = (0.05, 1.5)  # fused attention's rate over a GEMM's (costs.modern.efficiency)
SCALE_SPREAD = 0.35  # prior sd of log(scale): the cited defaults are good to about +-35%
OVERHEAD_SPREAD = 1.5  # overheads: a factor of ~4.5 either way at one sd


@dataclass(frozen=True)
class Profile:
    """Group scales and overheads; an empty profile is the cited defaults."""

    scales: dict[str, float]
    overheads_us: dict[str, float]
    meta: dict
    sync: dict[str, float] = field(default_factory=dict)  # straggler_cv, overlap_slowdown

    def apply(self, eff: Efficiency) -> Efficiency:
        """The efficiencies ``eff`` (for its device and link rows) under this profile."""
        gen = [_generation(d) for d in eff.devices]
        gemm, memory, link = eff.gemm.copy(), eff.memory.copy(), eff.link.copy()
        wino, attention = eff.winograd.copy(), eff.attention.copy()
        for i, g in enumerate(gen):
            for j, p in enumerate(PRECISIONS):
                gemm[i, j] *= self.scales.get(gemm_key(g, p), 1.0)
            memory[i] *= self.scales.get(f"memory.{g}", 1.0)
            wino[i] *= self.scales.get(f"winograd.{g}", 1.0)
            attention[i] *= self.scales.get(f"attention.{g}", 1.0)
        for i, x in enumerate(eff.links):
            link[i] *= self.scales.get(f"link.{catalog.network(x).kind}", 1.0)
        over = {_FIELD[k]: v * 1e-6 for k, v in self.overheads_us.items()}
        over.update({k: float(v) for k, v in self.sync.items()})
        return replace(
            eff,
            gemm=np.minimum(gemm, 1.0),
            memory=np.minimum(memory, 1.0),
            link=np.minimum(link, 1.0),
            winograd=np.clip(wino, *WINOGRAD_RANGE),
            attention=np.clip(attention, *ATTENTION_RANGE),
            **over,
        )


EMPTY = Profile({}, {}, {})


def generation(device: str) -> str:
    """A catalog device's GPU generation (architecture), the unit a profile's scales group by."""
    return str(catalog.device(device).raw.get("generation", "default"))


_generation = generation


def _winograd_precision(device: str, precision: str) -> bool:
    """Whether runs in this precision can use Winograd (costs.modern.evaluator: fp32, and fp16 on the
    CUDA cores of devices without fp16 tensor cores)."""
    peak = catalog.device(device).device.peak_flops
    if precision == "fp32":
        return True
    return precision == "fp16" and not peak.get("fp16", 0.0) >= TENSOR_FP16_RATIO * peak["fp32"]


@dataclass(frozen=True)
class Space:
    """The parameters a fit varies for a set of device and link rows, as a ``cal.Prior``."""

    names: tuple[str, ...]
    prior: cal.Prior
    base: Efficiency
    kept: Profile = EMPTY  # the prior profile's values of the parameters the fit does not vary

    def profile(self, theta: np.ndarray, meta: dict | None = None) -> Profile:
        """The fitted values ``theta`` of the varied parameters, with the kept ones."""
        scales, over = dict(self.kept.scales), dict(self.kept.overheads_us)
        sync = dict(self.kept.sync)
        for name, value in zip(self.names, theta):
            (over if name in OVERHEADS else sync if name in SYNC else scales)[name] = float(value)
        return Profile(scales, over, meta or {}, sync)

    def efficiency(self, theta: np.ndarray) -> Efficiency:
        return self.profile(theta).apply(self.base)


def gemm_key(generation: str, precision: str) -> str:
    """The GEMM scale group of a generation and precision (fp16 and bf16 are one: 16bit)."""
    return f"gemm.{generation}.{'16bit' if precision in ('fp16', 'bf16') else precision}"


def _gemm_groups(runs, base: Efficiency, index: dict[str, int]) -> dict[str, float]:
    """gemm.<generation>.<precision> groups the runs exercise, with their largest default."""
    out: dict[str, float] = {}
    for r in runs:
        key = gemm_key(_generation(r.device), r.precision)
        value = float(base.gemm[index[r.device], PRECISIONS.index(r.precision)])
        out[key] = max(out.get(key, value), value)
    return dict(sorted(out.items()))


def _winograd_groups(runs, base: Efficiency, index: dict[str, int]) -> dict[str, float]:
    """Generations whose runs can use Winograd, with the largest default factor among them."""
    out: dict[str, float] = {}
    for r in runs:
        if _winograd_precision(r.device, r.precision):
            g = _generation(r.device)
            out[g] = max(out.get(g, 0.0), float(base.winograd[index[r.device]]))
    return dict(sorted(out.items()))


def _attention_groups(runs, base: Efficiency, index: dict[str, int]) -> dict[str, float]:
    """Generations with runs whose attention is fused (flash: the run's kernel), with the
    largest default attention factor among their devices."""
    from planner.calibrate.measurements import kernel

    flash = {k for k in {(r.net, r.attention) for r in runs} if kernel(*k) == "flash"}
    out: dict[str, float] = {}
    for r in runs:
        if (r.net, r.attention) in flash:
            g = _generation(r.device)
            out[g] = max(out.get(g, 0.0), float(base.attention[index[r.device]]))
    return dict(sorted(out.items()))


def _add_overheads(runs, base: Efficiency, add) -> None:
    """The overheads, and the sync terms where a CNN run spans several GPUs (they are the
    data-parallel CNN evaluator's, costs.modern.evaluator; the transformer evaluator does not
    read them)."""
    for name in OVERHEADS:
        value = getattr(base, _FIELD[name]) * 1e6 or _ZERO_PRIOR_US[name]
        add(name, value, value / 100.0, value * 100.0, OVERHEAD_SPREAD)
    if any(r.gpus > 1 and "model" not in catalog.net_spec(r.net) for r in runs):
        for name in SYNC:
            add(name, getattr(base, name) or _SYNC_PRIOR[name], *_SYNC_BOUNDS[name], OVERHEAD_SPREAD)


def space(runs, base: Efficiency, prior_profile: Profile = EMPTY) -> Space:
    """Fit parameters for the groups the runs exercise (see the module docstring). Their prior
    values are those of ``prior_profile`` where it has them (within the bounds), else the cited
    defaults; its other parameters are kept unchanged in every profile the space makes."""
    names, prior, lo, hi, spread = [], [], [], [], []
    given = {**prior_profile.scales, **prior_profile.overheads_us, **prior_profile.sync}

    def add(name, value, lower, upper, sd):
        names.append(name)
        prior.append(min(max(given.get(name, value), lower), upper))
        lo.append(lower)
        hi.append(upper)
        spread.append(sd)

    index = {d: i for i, d in enumerate(base.devices)}
    for key, top in _gemm_groups(runs, base, index).items():
        add(key, 1.0, 0.1, 1.0 / top, SCALE_SPREAD)
    for g in sorted({_generation(r.device) for r in runs}):
        top = max(base.memory[index[r.device]] for r in runs if _generation(r.device) == g)
        add(f"memory.{g}", 1.0, 0.1, 1.0 / top, SCALE_SPREAD)
    for g, top in _winograd_groups(runs, base, index).items():
        add(f"winograd.{g}", 1.0, WINOGRAD_RANGE[0] / top, WINOGRAD_RANGE[1] / top, SCALE_SPREAD)
    for g, top in _attention_groups(runs, base, index).items():
        add(f"attention.{g}", 1.0, ATTENTION_RANGE[0] / top, ATTENTION_RANGE[1] / top, SCALE_SPREAD)
    kinds: dict[str, float] = {}
    for i, x in enumerate(base.links):
        kind = catalog.network(x).kind
        kinds[kind] = max(kinds.get(kind, 0.0), base.link[i])
    multi = any(r.gpus > 1 for r in runs)
    for kind in sorted(kinds) if multi else ():
        add(f"link.{kind}", 1.0, 0.1, 1.0 / kinds[kind], SCALE_SPREAD)
    _add_overheads(runs, base, add)
    arr = lambda v: np.asarray(v, dtype=float)  # noqa: E731
    prior_ = cal.Prior(tuple(names), arr(prior), arr(lo), arr(hi), arr(spread))
    return Space(tuple(names), prior_, base, _without(prior_profile, set(names)))


def _without(p: Profile, names: set[str]) -> Profile:
    """``p``'s scales and overheads other than ``names`` (what a fit of ``names`` keeps)."""
    scales = {k: v for k, v in p.scales.items() if k not in names}
    sync = {k: v for k, v in p.sync.items() if k not in names}
    return Profile(scales, {k: v for k, v in p.overheads_us.items() if k not in names}, {}, sync)


def to_toml(p: Profile) -> str:
    """The profile file: [profile] metadata, [scale] group scales, [overhead] microseconds."""

    def value(v) -> str:
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(float(v)) if isinstance(v, float) else str(v)

    lines = ["# planner calibration profile (modern rule set); see `planner calibrate --help`", "[profile]"]
    lines += [f"{k} = {value(v)}" for k, v in p.meta.items()]
    lines += ["", "[scale]  # multipliers on the cited default efficiencies of configs/efficiencies.toml"]
    lines += [f'"{k}" = {v:.6g}' for k, v in sorted(p.scales.items())]
    lines += ["", "[overhead]  # microseconds"]
    lines += [f"{k} = {v:.6g}" for k, v in p.overheads_us.items()]
    if p.sync:
        lines += ["", "[sync]  # dimensionless: costs.modern.efficiency straggler_cv, overlap_slowdown"]
        lines += [f"{k} = {v:.6g}" for k, v in p.sync.items()]
    return "\n".join(lines) + "\n"


def _check_keys(name: str, over: dict, sync: dict) -> None:
    """[overhead] and [sync] hold only their known keys, [sync] values within their bounds."""
    for table, entries, valid in (("overhead", over, OVERHEADS), ("sync", sync, SYNC)):
        unknown = sorted(set(entries) - set(valid))
        if unknown:
            raise BadInput(f"{name}: unknown [{table}] key {unknown[0]} (valid: {', '.join(valid)})")
    for k, v in sync.items():
        if not v <= _SYNC_BOUNDS[k][1]:
            raise BadInput(f"{name}: [sync] {k} = {v!r} is above its bound {_SYNC_BOUNDS[k][1]}")


def from_dict(data: dict, name: str) -> Profile:
    """Validate a parsed profile (``name`` is used in error messages)."""
    if not isinstance(data, dict) or not isinstance(data.get("profile", {}), dict):
        raise BadInput(f"{name}: not a calibration profile (needs [profile], [scale], [overhead])")
    _check_tables(data, name)
    scales, over, sync = data.get("scale", {}), data.get("overhead", {}), data.get("sync", {})
    _check_keys(name, over, sync)
    bad = [k for k in scales if k.split(".")[0] not in ("gemm", "memory", "link", "winograd", "attention")]
    if bad:
        raise BadInput(
            f"{name}: unknown [scale] key {bad[0]} "
            "(valid: gemm.GEN.PRECISION, memory.GEN, link.KIND, winograd.GEN, attention.GEN)"
        )
    return Profile(
        {k: float(v) for k, v in scales.items()},
        {k: float(v) for k, v in over.items()},
        data.get("profile", {}),
        {k: float(v) for k, v in sync.items()},
    )


# a scale multiplies a cited efficiency (the fits give 0.4 to 1.3); an overhead is microseconds
_MAX = {"scale": 100.0, "overhead": 1e6, "sync": 1.0}


def _check_tables(data: dict, name: str) -> None:
    """Only the three tables; [scale] and [overhead] positive finite numbers within bounds."""
    if unknown := sorted(set(data) - {"profile", "scale", "overhead", "sync"}):
        raise BadInput(
            f"{name}: unknown table [{unknown[0]}] (valid: [profile], [scale], [overhead], [sync])"
        )
    for table in ("scale", "overhead", "sync"):
        entries = data.get(table, {})
        if not isinstance(entries, dict):
            raise BadInput(f"{name}: [{table}] must be a table of numbers")
        for k, v in entries.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= _MAX[table]:
                raise BadInput(
                    f"{name}: [{table}] {k} = {v!r} is not a positive number up to {_MAX[table]:g}"
                )
    _check_intervals(data.get("profile", {}), name)


def _check_intervals(meta: dict, name: str) -> None:
    """Each ``interval*`` of [profile] is [low, high]: finite positive ratios, low <= high."""
    for key, v in meta.items():
        if not key.startswith("interval") or key == "interval_coverage":
            continue
        ok = isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v)
        if not ok or not 0 < v[0] <= v[1] < float("inf"):
            raise BadInput(f"{name}: [profile] {key} = {v!r} is not [low, high] with 0 < low <= high")


def load(path: str | Path) -> Profile:
    """Read a profile file (``--calibration F``); one-line errors for unreadable files."""
    from planner.request.files import read_toml  # bounded: size, UTF-8, nesting

    return from_dict(read_toml(user_file(path), "--calibration"), str(path))
