"""Interval coverage: the share of measured runs inside the 80% interval an answer would print.

Each run is predicted as ``planner estimate`` would predict it: with ``--stack S``, S's profile
and its interval (wider on a GPU generation the profile has no run of); without a stack, its
net family's default stack, its interval widened to the spread between stacks
(:data:`planner.metrics.model.BETWEEN_STACKS`); with ``--calibration F``, that profile. A run is
covered when measured / predicted lies within the interval's multipliers.

A run the profile was fitted on is in-sample and its residual flatters the interval. With
``held_out``, such runs are predicted instead by refits without their source (the
leave-one-source-out folds of :mod:`planner.calibrate.fitting`) when the runs are the whole set
the profile was fitted on; otherwise they are counted and labelled in-sample.

The interval itself is estimated from held-out residuals (80% split-conformal ranks,
:func:`costs.fit.calibration.tail_quantiles`, per family and per GPU generation with enough
runs). Graded on the residuals that set it, it would cover
80% by construction; so a refitted run's interval is the one a fit without its source would
state: the quantiles of the other sources' held-out residuals (:func:`_nested`), and, when no
other source has a run of its GPU generation, the spread of a generation the fit has not seen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from costs.fit import calibration as cal
from planner.calibrate.fitting import (
    COVERAGE,
    MIN_GENERATION_RUNS,
    Progress,
    _quiet,
    generation_key,
    leave_one_source_out,
    predict,
)
from planner.calibrate.predict import RunTable
from planner.calibrate.profile import generation
from planner.calibrate.spread import net_family
from planner.metrics.model import CostModel

TARGET = {True: 0.75, False: 0.70}  # the share an answer with (True) / without --stack should cover


@dataclass(frozen=True)
class Scored:
    """Every run's log(pred / meas), its interval (lo, hi), whether it was in the profile's fit
    and still predicted in-sample, and the labels it is grouped by."""

    log_residual: np.ndarray  # (N,)
    lo: np.ndarray  # (N,) multipliers of the prediction
    hi: np.ndarray
    in_sample: np.ndarray  # (N,) bool
    stack: list[str]  # the stack each run is of ('' when none)
    family: list[str]
    generation: list[str]

    @property
    def covered(self) -> np.ndarray:
        ratio = np.exp(-self.log_residual)  # measured / predicted
        return (ratio >= self.lo) & (ratio <= self.hi)


def _model(family: str, stack: str | None, calibration: str | None) -> CostModel:
    return CostModel.of("modern", calibration, stack=stack).for_net(
        {"model": {}} if family == "transformer" else {}
    )


def _fitted_sources(model: CostModel) -> set[str]:
    """The sources the model's profile was fitted on (stated by a leave-one-source-out fit)."""
    return set(model.profile.meta.get("held_out_sources", []))


def score(
    runs,
    stacks: list[str],
    stack: str | None,
    calibration: str | None = None,
    held_out: bool = False,
    progress: Progress = _quiet,
    fabric=None,
) -> Scored:
    """Predict ``runs`` (``stacks``: the stack each is of) as an answer with ``stack`` (None: no
    --stack) and ``calibration`` would, with the interval it would print, on ``fabric`` (a
    :class:`costs.comm.fabric.Fabric`; None: one non-blocking network)."""
    fams = [net_family(r.net) for r in runs]
    gens = [generation(r.device) for r in runs]
    n = len(runs)
    logr, lo, hi = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    models = {f: _model(f, stack, calibration) for f in dict.fromkeys(fams)}
    for i, (f, g) in enumerate(zip(fams, gens)):
        lo[i], hi[i] = models[f].interval_for(g) or (np.nan, np.nan)
    in_sample = np.zeros(n, dtype=bool)
    # runs predicted by one profile (a stack's, for both families) are scored, and refitted, together
    by_profile: dict[tuple, list[int]] = {}
    for i, f in enumerate(fams):
        by_profile.setdefault((models[f].calibration, models[f].stack), []).append(i)
    for rows_ in by_profile.values():
        model = models[fams[rows_[0]]]
        idx = np.array(rows_)
        table = RunTable([runs[i] for i in idx], "modern")
        logr[idx] = np.log(predict(table, model.profile, fabric) / table.measured)
        in_sample[idx], refit = _held_out(model, [runs[i] for i in idx], logr, idx, held_out, progress)
        if refit.any():  # the intervals were estimated from these runs' held-out residuals
            sub = idx[refit]
            lo[sub], hi[sub] = _nested(models, [runs[i] for i in sub], logr[sub], fams, gens, sub)
    return Scored(logr, lo, hi, in_sample, list(stacks), fams, gens)


def _nested(models: dict, runs, logr: np.ndarray, fams, gens, idx: np.ndarray) -> tuple:
    """(lo, hi) of each of ``runs`` (rows ``idx`` of ``fams``, ``gens``; held-out residuals
    ``logr``) as a profile fitted without the run's source would state its interval: the 80%
    quantiles of the other sources' held-out residuals, per family and per GPU generation with
    at least MIN_GENERATION_RUNS runs (as :mod:`planner.calibrate.fitting` writes them), and the
    unseen-generation spread when no other source has a run of the generation."""
    fam = np.array([fams[i] for i in idx], dtype=object)
    gen = np.array([gens[i] for i in idx], dtype=object)
    sources = np.array([r.source for r in runs], dtype=object)
    lo, hi = np.full(len(runs), np.nan), np.full(len(runs), np.nan)
    for source in dict.fromkeys(sources):
        test = sources == source
        for f in dict.fromkeys(fam[test]):
            fold = _fold_model(models[f], f, logr[~test], fam[~test], gen[~test], set(gen))
            for i in np.flatnonzero(test & (fam == f)):
                lo[i], hi[i] = fold.interval_for(gen[i]) or (np.nan, np.nan)
    return lo, hi


def _fold_model(model: CostModel, family: str, logr, fam, gen, gens: set) -> CostModel:
    """``model`` with the intervals and GPU generations of a fit on the other sources' runs
    (``logr``, ``fam``, ``gen``): its interval keys of ``family`` and of every generation in
    ``gens`` restated from those runs, and the GEMM scales of generations they have no run of
    dropped (an answer on such a generation takes the unseen-generation spread)."""
    meta = {k: v for k, v in model.profile.meta.items() if not k.startswith(f"interval_{family}")}
    meta["interval"] = list(cal.interval(logr, COVERAGE))
    mine = fam == family
    if mine.any():
        meta[f"interval_{family}"] = list(cal.interval(logr[mine], COVERAGE))
    for g in gens:
        rows = mine & (gen == g)
        if rows.sum() >= MIN_GENERATION_RUNS:
            meta[generation_key(family, g)] = list(cal.interval(logr[rows], COVERAGE))
    seen = set(gen)  # the fit's GEMM scales are shared by both families
    scales = {
        k: v for k, v in model.profile.scales.items() if not k.startswith("gemm.") or k.split(".")[1] in seen
    }
    return replace(model, profile=replace(model.profile, meta=meta, scales=scales))


def _held_out(
    model: CostModel, runs, logr: np.ndarray, idx: np.ndarray, held_out: bool, progress
) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``runs`` (rows ``idx`` of ``logr``) stay in-sample, and which were refitted; with
    ``held_out``, the runs the profile was fitted on are re-predicted (in ``logr``) by refits
    without their source."""
    none = np.zeros(len(runs), dtype=bool)
    if model.profile.meta.get("error_kind") == "in-sample":  # its fitted runs are not stated
        return ~none, none
    fitted = _fitted_sources(model)
    mine = np.array([r.source in fitted for r in runs])
    if not (mine.any() and held_out and _whole_fit(model, int(mine.sum()))):
        return mine, none
    sub = [r for r, m in zip(runs, mine) if m]
    logr[idx[mine]] = leave_one_source_out(RunTable(sub, "modern"), progress=progress)
    return none, mine


def _whole_fit(model: CostModel, count: int) -> bool:
    """Whether ``count`` runs are every run the model's profile was fitted on (a refit of a
    part would not be the profile's own fit)."""
    return int(model.profile.meta.get("runs", -1)) == count


def _row(group: str, s: Scored, mask: np.ndarray) -> dict:
    cov = s.covered[mask]
    share_in = float(s.in_sample[mask].mean())
    kind = "held-out" if share_in == 0 else "in-sample" if share_in == 1 else f"{share_in:.0%} in-sample"
    return {"group": group, "runs": int(mask.sum()), "covered": float(cov.mean()), "kind": kind}


def rows(s: Scored) -> list[dict]:
    """Coverage per stack, then per stack x family and stack x family x GPU generation where
    runs exist (one row per group), and over every run."""
    several = len(set(s.stack)) > 1
    out = [_row("all runs", s, np.ones(len(s.stack), dtype=bool))] if several else []
    stack = np.array(s.stack, dtype=object)
    fam, gen = np.array(s.family, dtype=object), np.array(s.generation, dtype=object)
    for st in dict.fromkeys(s.stack):
        m = stack == st
        out.append(_row(f"stack {st or '(none)'}", s, m))
        fams = list(dict.fromkeys(fam[m]))
        for f in fams:
            mf = m & (fam == f)
            if len(fams) > 1:
                out.append(_row(f"  {f}", s, mf))
            gens = list(dict.fromkeys(gen[mf]))
            for g in gens if len(gens) > 1 else ():
                out.append(_row(f"  {f}, {g}", s, mf & (gen == g)))
    return out


def text(s: Scored, with_stack: bool, what: str) -> list[str]:
    """The coverage table with its target (75% of held-out runs with --stack, 70% without)."""
    from planner.calibrate.report import text_table

    target = TARGET[with_stack]
    body = [
        [
            r["group"],
            str(r["runs"]),
            f"{r['covered']:.0%}",
            r["kind"],
            "yes" if r["covered"] >= target else "NO",
        ]
        for r in rows(s)
    ]
    head = ["runs of", "runs", "in the 80% interval", "prediction", f">= {target:.0%}"]
    return [f"Interval coverage: {what}", *text_table(head, body)]


def attribute(files: list[str]) -> tuple[list, list[str]]:
    """The runs of ``files`` and the stack each is of (the first stack whose rules keep it,
    :mod:`planner.stacks.runs`; '' for none)."""
    from planner.calibrate import measurements
    from planner.paths import user_file
    from planner.stacks import registry
    from planner.stacks import runs as stack_runs

    runs, labels = [], []
    for f in files:
        got = measurements.load(f)
        kept = {
            name: {r.row for r in stack_runs.select_file(s, user_file(f))}
            for name, s in registry.stacks().items()
        }
        for r in got:
            runs.append(r)
            labels.append(next((n for n, rows in kept.items() if r.row in rows), ""))
    return runs, labels


def shipped_runs() -> tuple[list, list[str]]:
    """Every shipped stack's own runs (those its profile was fitted on) and their stacks."""
    from planner.stacks import registry
    from planner.stacks import runs as stack_runs

    runs, labels = [], []
    for name, s in registry.stacks().items():
        if not s.user:
            got = stack_runs.select(s).runs
            runs += got
            labels += [name] * len(got)
    return runs, labels
