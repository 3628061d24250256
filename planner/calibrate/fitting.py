"""Fit a calibration profile to measured runs, and measure its error on runs it did not see.

:func:`calibrate` fits the group scales and overheads of :mod:`planner.calibrate.profile` to
every run (bounded least squares on log error, regularised toward the cited defaults; see
:mod:`costs.fit.calibration`), then refits once per source without that source and predicts it:
the leave-one-source-out (LOSO) error is the honest one, and the residuals it leaves give the
prediction interval stored in the profile.

A fit may refine a prior profile (``prior``: a shipped stack's) rather than start from the cited
defaults. It is then the maximum a posteriori estimate under a log-normal prior centred on that
profile: the same regularised least squares, with the prior term pulling each parameter the runs
exercise toward the profile's value instead of the default (the prior-plus-data misfit of
Tarantola and Valette, "Generalized nonlinear inverse problems solved using the least squares
criterion", Rev. Geophys. Space Phys. 20(2), 219-232, 1982, with a diagonal prior covariance in log
space). A parameter the runs do not exercise is not varied and keeps the profile's value
exactly; one they exercise weakly stays near it (its shrinkage in the fit table says how near).
Folds of the leave-one-source-out refit under the same prior.

All runs are scored with the ``modern`` rule set and no input-pipeline bound (the runs use
synthetic data or say so), the CNNs with SGD and momentum (the optimizer of the published CNN
runs), the transformers with Adam (BERT, GPT and Llama train with Adam or AdamW; planner's
``auto`` optimizer).
"""

from __future__ import annotations

import datetime as _dt
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace

import numpy as np

from costs.fit import calibration as cal
from costs.model import evaluate
from costs.modern.evaluator import Options
from planner import catalog
from planner.calibrate.predict import RunTable
from planner.calibrate.profile import EMPTY, OVERHEADS, SYNC, Profile, Space, generation, space
from planner.request import defaults

RULES = "modern"
OPTIONS = Options(optimizer=defaults.optimizer("auto", transformer=False))
TRANSFORMER_OPTIONS = Options(optimizer=defaults.optimizer("auto", transformer=True))
SIGMA = 0.15  # expected log scatter of one published run about the model (~15%)
# Runs of one source share its software stack, so their errors are not independent: a source is
# a random effect of log scatter TAU on top of each run's SIGMA, and each run's variance is
# SIGMA^2 + n TAU^2 for a source of n runs. A large table then counts for less than its row
# count (209 llm-foundry rows cannot outvote nine Megatron-Core rows), a one-run source as one
# run. TAU was chosen by the leave-one-source-out error of the shipped runs (2026-11, 430 runs):
# 0 (independent runs) let the largest tables set the H100 scales (Megatron-Core -26% in
# sample); 0.15 flattened the sources so far that the CNNs' held-out median rose to 17.7%;
# 0.05 gave 10.9% overall (CNNs 14.6%, transformers 9.9%).
TAU = 0.05
COVERAGE = 0.8  # of the prediction interval
# Told after each fit: (fits done, fits in all, what was fitted). The full fit is one, each
# leave-one-source-out fold another.
Progress = Callable[[int, int, str], None]


def _quiet(done: int, total: int, what: str) -> None:
    """No progress shown."""


def predict(table: RunTable, profile: Profile = EMPTY, fabric=None) -> np.ndarray:
    """Samples/s of every run of ``table`` under ``profile`` (the cited defaults when empty), on a
    ``fabric`` between nodes (a :class:`costs.comm.fabric.Fabric`; None: one non-blocking network)."""
    base = catalog.efficiency(table.device_keys, table.link_keys)
    llm, other = replace(TRANSFORMER_OPTIONS, fabric=fabric), replace(OPTIONS, fabric=fabric)
    return table.samples_per_s(evaluate, llm, efficiency=profile.apply(base), options=other)


def _fit(table: RunTable, prior: Profile = EMPTY) -> tuple[Space, cal.Fit]:
    """Fit the parameters the runs exercise. Refining a ``prior``, a parameter every GPU shares
    (an overhead, a link scale) that these runs do not identify is then held at the prior's
    value and the rest refitted: weak evidence from the user's GPUs would otherwise move the
    predictions of GPUs the prior was fitted on and the user has not measured."""
    base = catalog.efficiency(table.device_keys, table.link_keys)
    sp = space(table.runs, base, prior)
    f = _solve(table, sp)
    if prior is EMPTY:
        return sp, f
    hold = np.array([shared(n) and not ok for n, ok in zip(sp.names, f.identified)])
    if not hold.any():
        return sp, f
    p = sp.prior
    lower, upper = np.where(hold, p.value, p.lower), np.where(hold, p.value, p.upper)
    sp = replace(sp, prior=cal.Prior(p.names, p.value, lower, upper, p.spread))
    return sp, _solve(table, sp)


def shared(name: str) -> bool:
    """Whether a profile parameter acts on every GPU generation (an overhead, a link scale, a
    synchronisation term)."""
    return name in OVERHEADS or name in SYNC or name.startswith("link.")


def held_at_prior(sp: Space) -> list[str]:
    """The parameters a fit holds at their prior value (see :func:`_fit`)."""
    p = sp.prior
    return [n for n, lo, hi in zip(p.names, p.lower, p.upper) if lo == hi]


def _solve(table: RunTable, sp: Space) -> cal.Fit:
    def model(theta: np.ndarray) -> np.ndarray:
        return table.samples_per_s(
            evaluate, TRANSFORMER_OPTIONS, efficiency=sp.efficiency(theta), options=OPTIONS
        )

    return cal.fit(model, table.measured, sp.prior, sigma=run_sigma(table.sources), starts=_starts(sp))


def run_sigma(sources) -> np.ndarray:
    """Each run's log scatter for the fit: SIGMA widened by its source's shared error (TAU)."""
    _, inverse, counts = np.unique(np.asarray(sources), return_inverse=True, return_counts=True)
    return np.sqrt(SIGMA**2 + counts[inverse] * TAU**2)


def _starts(sp: Space) -> list[np.ndarray]:
    """Extra starts with the host dispatch time binding: the launch-bound regime is a max()
    kink that a fit starting below it never sees (it would stretch kernel_min instead)."""
    if "host_per_kernel_us" not in sp.names:
        return []
    i = sp.names.index("host_per_kernel_us")
    if sp.prior.lower[i] == sp.prior.upper[i]:  # held at its prior: no kink to look across
        return []
    out = []
    for factor in (3.0, 10.0):
        start = sp.prior.value.copy()
        start[i] = min(start[i] * factor, sp.prior.upper[i])
        out.append(start)
    return out


@dataclass(frozen=True)
class Calibration:
    """A fitted profile with its in-sample fit and its out-of-sample (LOSO) residuals."""

    profile: Profile
    fit: cal.Fit
    table: RunTable
    held_out: np.ndarray  # (N,) log(pred / meas), each run predicted without its source
    default: np.ndarray  # (N,) log(pred / meas) under the cited defaults (no fit)
    prior: np.ndarray  # (N,) log(pred / meas) under the prior profile (no fit; = default without one)

    @property
    def held_out_predicted(self) -> np.ndarray:
        return self.table.measured * np.exp(self.held_out)


def _fit_and_predict(
    table: RunTable, train: np.ndarray, test: np.ndarray, prior: Profile = EMPTY
) -> np.ndarray:
    sp, f = _fit(table.subset(train), prior)
    return predict(table.subset(test), sp.profile(f.value))


_FOLD: tuple[RunTable, Profile] | None = None  # the table and prior a forked worker's folds read


def _fold(source: str) -> np.ndarray:
    table, prior = _FOLD
    test = np.array(table.sources) == source
    return _fit_and_predict(table, ~test, test, prior)


def leave_one_source_out(
    table: RunTable,
    workers: int | None = None,
    progress: Progress = _quiet,
    prior: Profile = EMPTY,
    only: list[str] | None = None,
) -> np.ndarray:
    """(N,) log(pred / meas), each source predicted by a profile fitted on the others. The
    parameters a fit varies depend on its runs, so each fold builds its own (``_fit``). The
    folds are independent: they run in ``workers`` forked processes (default: one per CPU;
    each fold is the same computation as in one process). ``progress`` hears of each fold
    as it ends (fold ``i`` of ``len(folds)``, counted after the full fit). Each fold refines
    ``prior`` as the full fit does. ``only``: refit just these sources' folds (the other runs
    stay NaN)."""
    labels = np.array(table.sources, dtype=object)
    folds = [g for g in dict.fromkeys(labels.tolist()) if not (labels == g).all()]
    folds = [g for g in folds if only is None or g in only]
    total = len(folds) + 1
    out = np.full(len(table), np.nan)
    n = min(len(folds), workers or os.cpu_count() or 1)
    if n <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for i, g in enumerate(folds, start=2):
            test = labels == g
            out[test] = np.log(_fit_and_predict(table, ~test, test, prior)) - np.log(table.measured[test])
            progress(i, total, f"without {g}")
        return out
    global _FOLD
    _FOLD = (table, prior)
    try:
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {pool.submit(_fold, g): g for g in folds}
            for i, done in enumerate(as_completed(futures), start=2):
                g = futures[done]
                test = labels == g
                out[test] = np.log(done.result()) - np.log(table.measured[test])
                progress(i, total, f"without {g}")
    finally:
        _FOLD = None
    return out


FAMILIES = ("cnn", "transformer")


def _family_error(table: RunTable, residuals: np.ndarray) -> dict:
    """Median error, run count and interval of each net family with runs (``median_ape_cnn``,
    ``runs_transformer``, ``interval_transformer`` ...): a transformer plan takes its interval
    from the transformer runs, whose error differs from the CNNs'."""
    transformer = np.zeros(len(table), dtype=bool)
    for g in table.groups:
        transformer[g.rows] = g.transformer
    out = {}
    for name, mask in zip(FAMILIES, (~transformer, transformer), strict=True):
        if not mask.any():
            continue
        lo, hi = cal.interval(residuals[mask], COVERAGE)
        out[f"runs_{name}"] = int(mask.sum())
        out[f"median_ape_{name}"] = round(cal.summary(residuals[mask])["median_ape"], 2)
        out[f"interval_{name}"] = [round(lo, 4), round(hi, 4)]
        out.update(_generation_error(table, residuals, mask, name))
    return out


MIN_GENERATION_RUNS = 10  # fewer held-out runs of a generation: its 80% ranks would be its extremes


def generation_key(family: str, gen: str) -> str:
    """The profile key of a family's interval on one GPU generation (``interval_cnn_Ada_Lovelace``)."""
    return f"interval_{family}_{gen.replace(' ', '_')}"


def _generation_error(table: RunTable, residuals: np.ndarray, mask: np.ndarray, family: str) -> dict:
    """The 80% interval of each GPU generation with at least MIN_GENERATION_RUNS runs of the
    family: the held-out error differs by generation (the stacks' Hopper runs miss more than
    their Ampere runs), and an answer's interval on a generation takes the wider of the two."""
    gens = np.array([generation(r.device) for r in table.runs], dtype=object)
    out = {}
    for g in sorted(set(gens[mask])):
        rows = mask & (gens == g)
        if rows.sum() >= MIN_GENERATION_RUNS:
            lo, hi = cal.interval(residuals[rows], COVERAGE)
            out[generation_key(family, g)] = [round(lo, 4), round(hi, 4)]
    return out


def _source_error(table: RunTable, held: np.ndarray) -> dict:
    """Each source's held-out median error (%), in source order: a check can refit a few
    folds and compare without redoing them all."""
    sources = list(dict.fromkeys(table.sources))
    labels = np.array(table.sources, dtype=object)
    medians = [round(cal.summary(held[labels == s])["median_ape"], 3) for s in sources]
    return {"held_out_sources": sources, "held_out_median_ape": medians}


def _prior_intervals(prior: Profile, table: RunTable) -> dict:
    """A refined profile predicts the GPU generations only its prior has runs of as the prior
    did: their intervals are the prior's (per generation where it states one, else per family),
    so an answer on them takes the wider of those and the new fit's."""
    mine = {generation(r.device) for r in table.runs}
    out = {}
    for gen in prior.meta.get("generations", []):
        for family in FAMILIES if gen not in mine else ():
            lohi = prior.meta.get(generation_key(family, gen)) or prior.meta.get(f"interval_{family}")
            if lohi:
                out[generation_key(family, gen)] = list(lohi)
    return out


def _prior_error(table: RunTable, prior: Profile, default: np.ndarray) -> np.ndarray:
    """(N,) log(pred / meas) under the prior profile (``default``'s when there is none)."""
    return default if prior is EMPTY else np.log(predict(table, prior) / table.measured)


def calibrate(
    runs,
    files: list[str],
    loso: bool = True,
    progress: Progress = _quiet,
    extra: dict | None = None,
    prior: Profile = EMPTY,
) -> Calibration:
    """Fit a profile to ``runs`` (read from ``files``, recorded in the profile); ``extra``:
    more metadata for the profile (the stack it is of); ``prior``: the profile the fit refines
    (default: none, the cited defaults; see the module docstring)."""
    table = RunTable(runs, RULES)
    folds = len(set(table.sources)) if loso and len(set(table.sources)) > 1 else 0
    sp, f = _fit(table, prior)
    progress(1, folds + 1, "all runs")
    held = (
        leave_one_source_out(table, progress=progress, prior=prior) if loso else np.full(len(table), np.nan)
    )
    default = np.log(predict(table) / table.measured)
    before = _prior_error(table, prior, default)
    stats = cal.summary(held) if loso else cal.summary(f.log_residuals)
    lo, hi = cal.interval(held if loso else f.log_residuals, COVERAGE)
    meta = {
        **(extra or {}),
        "rules": RULES,
        "fitted_on": [str(x) for x in files],
        "date": _dt.date.today().isoformat(),
        "runs": len(table),
        "sources": len(set(table.sources)),
        "generations": sorted({generation(r.device) for r in table.runs}),
        "error_kind": "leave-one-source-out" if loso else "in-sample",
        "median_ape": round(stats["median_ape"], 2),
        "p90_ape": round(stats["p90_ape"], 2),
        "interval_coverage": COVERAGE,
        # measured = predicted x [lo, hi] for COVERAGE of the held-out runs (throughput)
        "interval": [round(lo, 4), round(hi, 4)],
        **_family_error(table, held if loso else f.log_residuals),
        **(_source_error(table, held) if loso else {}),
        "not_identified": [n for n, ok in zip(f.names, f.identified) if not ok],
        **({"held_at_prior": held_at_prior(sp)} if held_at_prior(sp) else {}),
        **_prior_intervals(prior, table),
    }
    return Calibration(sp.profile(f.value, meta), f, table, held, default, before)
