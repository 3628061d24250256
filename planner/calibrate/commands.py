"""``planner calibrate`` and ``planner validate``: requests in, text and files out.

The CLI parses options and calls these; they return what to print and write, so the commands
are testable without a terminal. Nothing is written unless the whole run succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from costs.fit import calibration as cal
from planner.calibrate import measurements, profile, report
from planner.calibrate.fitting import Calibration, calibrate, predict
from planner.calibrate.predict import RunTable, predictable
from planner.errors import BadInput
from planner.report import render


def load_profile(path: str | None) -> profile.Profile:
    """``--calibration F``: a profile file; none: the shipped default."""
    from planner.metrics.model import default_profile

    return profile.load(path) if path else default_profile()


def _display(path: str) -> str:
    """A measurement file as recorded in a profile: its name, never a machine's path."""
    return Path(path).name


def _read_runs(files: list[str], default=measurements.SHIPPED) -> tuple[list[measurements.Run], str]:
    """The predictable runs of ``files`` (none: the shipped ``default`` files) and a note on those
    skipped."""
    if not files:
        files = [str(p) for p in measurements.shipped(default)]
    runs: list[measurements.Run] = []
    for f in files:
        runs += measurements.load(f)
    kept, note = predictable(runs)
    if not kept:
        raise BadInput(f"no run to predict ({note})")
    return kept, note


def _fit_table(c: Calibration) -> list[str]:
    f = c.fit
    rows = [["parameter", "prior", "fitted", "data said", "identified"]]
    for n, p, v, s, ok in zip(f.names, f.prior, f.value, f.shrinkage, f.identified):
        rows.append([n, f"{p:.4g}", f"{v:.4g}", f"{(1 - s) * 100:.0f}%", "yes" if ok else "no"])
    return report.text_table(rows[0], rows[1:])


@dataclass(frozen=True)
class CalibrateOutput:
    text: str
    profile_toml: str


def run_calibrate(files: list[str], loso: bool = True) -> CalibrateOutput:
    """Fit a profile to the runs of ``files`` and describe the fit and its held-out error."""
    runs, skipped = _read_runs(files, measurements.FITTED)
    c = calibrate(runs, [_display(f) for f in files] or list(measurements.FITTED), loso=loso)
    m = c.profile.meta
    inside = cal.summary(c.fit.log_residuals)
    lines = [
        f"Calibrated the modern rule set on {m['runs']} runs from {m['sources']} sources.",
        "",
        "Fit (scales multiply the cited defaults of configs/efficiencies.toml; 'data said' is how much",
        "the data narrowed each parameter beyond its prior):",
        *_fit_table(c),
        "",
        f"Cited defaults, no fit:   median APE {cal.summary(c.default)['median_ape']:.1f}%, "
        f"p90 {cal.summary(c.default)['p90_ape']:.1f}%",
        f"Fitted, in sample:        median APE {inside['median_ape']:.1f}%, p90 {inside['p90_ape']:.1f}%",
    ]
    if loso:
        lines.append(
            f"Leave-one-source-out:     median APE {m['median_ape']:.1f}%, p90 {m['p90_ape']:.1f}% "
            f"(each source predicted by a fit without it)"
        )
        lo, hi = m["interval"]
        lines.append(f"80% prediction interval:  measured = predicted x {lo:.2f} to {hi:.2f}")
        data = report.error_data(c.table.runs, c.held_out_predicted, "Leave-one-source-out error per source")
        lines += ["", *report.render_text(data).rstrip().splitlines()]
    missing = m["not_identified"]
    if missing:
        lines += ["", f"Not identified by these runs (kept near the defaults): {', '.join(missing)}"]
    if skipped:
        lines += ["", f"Note: {skipped}."]
    return CalibrateOutput("\n".join(lines) + "\n", profile.to_toml(c.profile))


@dataclass(frozen=True)
class ValidateOutput:
    text: str
    files: dict[str, str]


def run_validate(files: list[str], calibration: str | None) -> ValidateOutput:
    """Error of a profile (default: the shipped one) on measured runs (default: the shipped ones)."""
    runs, skipped = _read_runs(files)
    prof = load_profile(calibration)
    table = RunTable(runs, "modern")
    pred = predict(table, prof)
    if not np.all(np.isfinite(pred)):
        raise BadInput("some runs have no finite prediction (a precision the device lacks?)")
    name = calibration or "the default profile"
    fitted_on = {Path(x).name for x in prof.meta.get("fitted_on", [])}
    used = files or [str(p) for p in measurements.shipped()]
    overlap = sorted(fitted_on & {Path(x).name for x in used})
    title = f"Predicted vs measured: modern rules, {name}, {len(runs)} runs"
    data = report.error_data(runs, pred, title)
    note = ""
    if overlap:
        held = prof.meta.get("error_kind") == "leave-one-source-out"
        note = f"Note: {name} was fitted on {', '.join(overlap)}, so this error is in-sample" + (
            f"; its leave-one-source-out error was median {prof.meta['median_ape']}%, p90 {prof.meta['p90_ape']}%."
            if held
            else "."
        )
    if skipped:
        note = f"Note: {skipped}." + (f"\n{note}" if note else "")
    text = report.render_text(data) + (f"\n{note}\n" if note else "")
    files_out = {
        "report.html": report.render_html(data),
        "report.md": report.render_markdown(data) + (f"\n{note}\n" if note else ""),
        "charts/scatter.svg": report.scatter_chart(data),
        "predictions.csv": render.to_csv(data["points"]),
    }
    return ValidateOutput(text, files_out)
