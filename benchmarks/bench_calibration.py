"""Calibration and prediction error: the figures the README and the closing notes quote.

Prints, for the modern rule set:
- the shipped measurements' error with the cited defaults, the default profile in sample, and
  leave-one-source-out (each source predicted by a fit without it);
- two-fold by source (alternate sources fitted, the others predicted);
- the error on any further CSV given (e.g. published runs kept out of the repository, or a
  profile of your own GPU), under the default profile;
- the time of one fit and of the whole leave-one-source-out calibration.

Run: python benchmarks/bench_calibration.py [MORE.csv ...]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from costs.fit import calibration as cal
from planner.calibrate import fitting, measurements
from planner.calibrate.predict import RunTable, predictable
from planner.metrics.model import default_profile


def line(name: str, logr: np.ndarray) -> None:
    s = cal.summary(logr)
    print(
        f"  {name:<44} n={s['n']:>4}  median {s['median_ape']:5.1f}%  p90 {s['p90_ape']:6.1f}%  bias {s['bias']:+6.1f}%"
    )


def main(extra: list[str]) -> None:
    runs = [r for f in measurements.shipped(measurements.FITTED) for r in measurements.load(f)]
    table = RunTable(runs, "modern")
    print(f"Shipped measurements: {len(runs)} runs, {len(set(table.sources))} sources")
    line("cited defaults, no fit", np.log(fitting.predict(table) / table.measured))
    line("default profile (in sample)", np.log(fitting.predict(table, default_profile()) / table.measured))
    t0 = time.perf_counter()
    c = fitting.calibrate(runs, ["shipped"], loso=False)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    held = fitting.leave_one_source_out(table)
    t_loso = time.perf_counter() - t0
    line("leave-one-source-out", held)
    sources = sorted(set(table.sources))
    first = np.array([r.source in set(sources[::2]) for r in runs])
    pooled = np.empty(len(runs))
    for fit_on in (first, ~first):
        half = fitting.calibrate([r for r, k in zip(runs, fit_on) if k], ["half"], loso=False)
        test = table.subset(~fit_on)
        pooled[~fit_on] = np.log(fitting.predict(test, half.profile) / test.measured)
        line(f"two-fold: fitted on {int(fit_on.sum())} runs, predicting the rest", pooled[~fit_on])
    line("two-fold, pooled", pooled)
    for path in extra:
        other, skipped = predictable(measurements.load(path))
        if skipped:
            print(f"  {path}: {skipped}")
        t = RunTable(other, "modern")
        logr = np.log(fitting.predict(t, default_profile()) / t.measured)
        line(f"{path} (default profile)", logr)
        for s in sorted(set(t.sources)):
            mask = np.array([x == s for x in t.sources])
            line(f"  {s}", logr[mask])
    print(f"One fit: {t_fit:.1f} s; leave-one-source-out ({len(sources)} refits): {t_loso:.1f} s")
    del c


if __name__ == "__main__":
    main(sys.argv[1:])
