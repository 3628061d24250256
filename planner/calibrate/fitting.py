"""Fit a calibration profile to measured runs, and measure its error on runs it did not see.

:func:`calibrate` fits the group scales and overheads of :mod:`planner.calibrate.profile` to
every run (bounded least squares on log error, regularised toward the cited defaults; see
:mod:`costs.fit.calibration`), then refits once per source without that source and predicts it:
the leave-one-source-out (LOSO) error is the honest one, and the residuals it leaves give the
prediction interval stored in the profile.

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
from dataclasses import dataclass

import numpy as np

from costs.fit import calibration as cal
from costs.model import evaluate
from costs.modern.evaluator import Options
from planner import catalog
from planner.calibrate.predict import RunTable
from planner.calibrate.profile import EMPTY, Profile, Space, generation, space
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


def predict(table: RunTable, profile: Profile = EMPTY) -> np.ndarray:
    """Samples/s of every run of ``table`` under ``profile`` (the cited defaults when empty)."""
    base = catalog.efficiency(table.device_keys, table.link_keys)
    return table.samples_per_s(evaluate, TRANSFORMER_OPTIONS, efficiency=profile.apply(base), options=OPTIONS)


def _fit(table: RunTable) -> tuple[Space, cal.Fit]:
    base = catalog.efficiency(table.device_keys, table.link_keys)
    sp = space(table.runs, base)

    def model(theta: np.ndarray) -> np.ndarray:
        return table.samples_per_s(
            evaluate, TRANSFORMER_OPTIONS, efficiency=sp.efficiency(theta), options=OPTIONS
        )

    return sp, cal.fit(model, table.measured, sp.prior, sigma=run_sigma(table.sources), starts=_starts(sp))


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

    @property
    def held_out_predicted(self) -> np.ndarray:
        return self.table.measured * np.exp(self.held_out)


def _fit_and_predict(table: RunTable, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    sp, f = _fit(table.subset(train))
    return predict(table.subset(test), sp.profile(f.value))


_FOLD_TABLE: RunTable | None = None  # the table a forked worker's folds read


def _fold(source: str) -> np.ndarray:
    test = np.array(_FOLD_TABLE.sources) == source
    return _fit_and_predict(_FOLD_TABLE, ~test, test)


def leave_one_source_out(
    table: RunTable, workers: int | None = None, progress: Progress = _quiet
) -> np.ndarray:
    """(N,) log(pred / meas), each source predicted by a profile fitted on the others. The
    parameters a fit varies depend on its runs, so each fold builds its own (``_fit``). The
    folds are independent: they run in ``workers`` forked processes (default: one per CPU;
    each fold is the same computation as in one process). ``progress`` hears of each fold
    as it ends (fold ``i`` of ``len(folds)``, counted after the full fit)."""
    labels = np.array(table.sources, dtype=object)
    folds = [g for g in dict.fromkeys(labels.tolist()) if not (labels == g).all()]
    total = len(folds) + 1
    out = np.full(len(table), np.nan)
    n = min(len(folds), workers or os.cpu_count() or 1)
    if n <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for i, g in enumerate(folds, start=2):
            test = labels == g
            out[test] = np.log(_fit_and_predict(table, ~test, test)) - np.log(table.measured[test])
            progress(i, total, f"without {g}")
        return out
    global _FOLD_TABLE
    _FOLD_TABLE = table
    try:
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {pool.submit(_fold, g): g for g in folds}
            for i, done in enumerate(as_completed(futures), start=2):
                g = futures[done]
                test = labels == g
                out[test] = np.log(done.result()) - np.log(table.measured[test])
                progress(i, total, f"without {g}")
    finally:
        _FOLD_TABLE = None
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
    return out


def _source_error(table: RunTable, held: np.ndarray) -> dict:
    """Each source's held-out median error (%), in source order: a check can refit a few
    folds and compare without redoing them all."""
    sources = list(dict.fromkeys(table.sources))
    labels = np.array(table.sources, dtype=object)
    medians = [round(cal.summary(held[labels == s])["median_ape"], 3) for s in sources]
    return {"held_out_sources": sources, "held_out_median_ape": medians}


def calibrate(
    runs, files: list[str], loso: bool = True, progress: Progress = _quiet, extra: dict | None = None
) -> Calibration:
    """Fit a profile to ``runs`` (read from ``files``, recorded in the profile); ``extra``:
    more metadata for the profile (the stack it is of)."""
    table = RunTable(runs, RULES)
    folds = len(set(table.sources)) if loso and len(set(table.sources)) > 1 else 0
    sp, f = _fit(table)
    progress(1, folds + 1, "all runs")
    held = leave_one_source_out(table, progress=progress) if loso else np.full(len(table), np.nan)
    default = np.log(predict(table) / table.measured)
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
    }
    return Calibration(sp.profile(f.value, meta), f, table, held, default)
