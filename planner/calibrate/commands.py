"""``planner calibrate`` and ``planner validate``: requests in, text and files out.

The CLI parses options and calls these; they return what to print and write, so the commands
are testable without a terminal. Nothing is written unless the whole run succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from costs.fit import calibration as cal
from planner.calibrate import measurements, profile, report
from planner.calibrate.fitting import Calibration, calibrate, predict
from planner.calibrate.predict import RunTable, predictable
from planner.errors import BadInput
from planner.paths import user_file
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
    worse: str = ""  # why the fit is worse in sample than the cited defaults ("" when it is not)


def _stack_runs(name: str, files: list[str]) -> tuple[list[measurements.Run], str, list[str], dict]:
    """The runs of stack ``name`` (of ``files`` when given, else of its own files), the note on
    those skipped, the files used and the stack's profile metadata."""
    from planner.stacks import registry
    from planner.stacks import runs as stack_runs

    stack = registry.get(name)
    if files:
        fw = stack_runs.StackRuns([], [])
        for f in files:
            got = stack_runs.select_file(stack, user_file(f))
            fw = stack_runs.StackRuns(fw.runs + got, fw.files + ([_display(f)] if got else []))
    else:
        fw = stack_runs.select(stack)
    if not fw.runs:
        raise BadInput(f"--stack {name}: no run of {', '.join(files) or 'its files'} is of this stack")
    kept, note = predictable(fw.runs)
    if not kept:
        raise BadInput(f"--stack {name}: no run to predict ({note})")
    return kept, note, fw.files, {"stack": name}


@dataclass(frozen=True)
class Prior:
    """The profile a fit refines: ``name`` (a stack, or ``default``), where it comes from, and
    why none is used (``note``) when the fit starts from the cited defaults."""

    profile: profile.Profile
    name: str | None = None
    origin: str = ""
    note: str = ""


def choose_prior(
    files: list[str], runs: list[measurements.Run], stack: str | None, from_defaults: bool = False
) -> Prior:
    """What a user's fit refines: the shipped profile an answer would otherwise use for these
    runs, so parameters the runs do not inform keep their shipped values. ``--stack S``: S's
    profile; none: the default stack of the runs' net family (planner.stacks.registry.DEFAULT),
    or the shipped default profile when the runs are of both families. No files (a refit of the
    shipped runs), or files the profile was itself fitted on: the cited defaults, as the shipped
    profiles were fitted (a prior fitted on the same runs would count them twice), as does
    ``from_defaults`` (``--from-defaults``)."""
    from planner.stacks import registry
    from planner.stacks.runs import profile as stack_profile

    if not files:
        return Prior(profile.EMPTY)
    if from_defaults:
        return Prior(profile.EMPTY, note="--from-defaults")
    from planner.calibrate.spread import net_family

    families = {net_family(r.net) for r in runs}
    name = stack or (registry.DEFAULT[families.pop()] if len(families) == 1 else None)
    if name is None:
        from planner.metrics.model import default_profile

        prior = Prior(default_profile(), "default", "configs/profiles/default.toml")
    else:
        s = registry.get(name)
        where = s.path if s.user else f"configs/profiles/{s.profile}.toml"
        prior = Prior(stack_profile(s), name, f"stack {name}, {where}")
    shared = sorted(
        {_display(f) for f in files} & {Path(x).name for x in prior.profile.meta.get("fitted_on", [])}
    )
    if shared:
        return Prior(
            profile.EMPTY,
            note=f"{prior.origin} was fitted on {', '.join(shared)}: refitted from the cited defaults "
            "(a prior fitted on the same runs would count them twice)",
        )
    return prior


def _prior_lines(prior: Prior, c: Calibration) -> list[str]:
    """What the fit started from, its parameters, and the errors before and after it."""
    explain = [
        "Fit (scales multiply the cited defaults of configs/efficiencies.toml; 'data said' is how much",
        "the data narrowed each parameter beyond its prior):",
    ]
    before = []
    if prior.name is None:
        start = [f"Prior: the cited defaults ({prior.note})." if prior.note else "Prior: the cited defaults."]
    else:
        start = [
            f"Prior: {prior.origin}. Parameters these runs exercise start there and are pulled toward it;",
            "every other parameter keeps its value (a maximum a posteriori fit, log-normal prior).",
        ]
        explain[-1] = (
            "the data narrowed each parameter beyond its prior, that profile's value or the cited default):"
        )
        s = cal.summary(c.prior)
        before = [f"Prior profile, no fit:    median APE {s['median_ape']:.1f}%, p90 {s['p90_ape']:.1f}%"]
    d, inside = cal.summary(c.default), cal.summary(c.fit.log_residuals)
    return [
        *start,
        "",
        *explain,
        *_fit_table(c),
        "",
        f"Cited defaults, no fit:   median APE {d['median_ape']:.1f}%, p90 {d['p90_ape']:.1f}%",
        *before,
        f"Fitted, in sample:        median APE {inside['median_ape']:.1f}%, p90 {inside['p90_ape']:.1f}%",
    ]


def run_calibrate(
    files: list[str],
    loso: bool = True,
    stack: str | None = None,
    progress=None,
    from_defaults: bool = False,
) -> CalibrateOutput:
    """Fit a profile to the runs of ``files`` (of ``stack`` when given), refining the shipped
    profile they would otherwise be predicted with (:func:`choose_prior`), and describe the fit
    and its held-out error; ``progress`` hears of each fit (see :mod:`planner.calibrate.fitting`)."""
    if stack is not None:
        runs, skipped, used, extra = _stack_runs(stack, files)
    else:
        runs, skipped = _read_runs(files, measurements.FITTED)
        used, extra = [_display(f) for f in files] or list(measurements.FITTED), {}
    prior = choose_prior(files, runs, stack, from_defaults)
    if prior.name is not None:
        extra = {**extra, "refines": prior.name}
    kw = {"progress": progress} if progress else {}
    c = calibrate(runs, used, loso=loso, extra=extra, prior=prior.profile, **kw)
    m = c.profile.meta
    lines = [
        f"Calibrated the modern rule set on {m['runs']} runs from {m['sources']} sources"
        + (f" of stack {stack}" if stack else "")
        + f" (GPU generations: {', '.join(m['generations'])}).",
        *_prior_lines(prior, c),
    ]
    if not loso:
        lines.append("No held-out error (--no-loso): the profile's intervals are in-sample, not held-out.")
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
        near = "the prior's values" if prior.name else "the defaults"
        lines += ["", f"Not identified by these runs (kept near {near}): {', '.join(missing)}"]
    if m.get("held_at_prior"):
        lines += [
            "",
            "Held at the prior (shared by every GPU, not identified by these runs, so the GPUs they do",
            f"not measure keep their predictions): {', '.join(m['held_at_prior'])}",
        ]
    if skipped:
        lines += ["", f"Note: {skipped}."]
    before, after = cal.summary(c.default)["median_ape"], cal.summary(c.fit.log_residuals)["median_ape"]
    worse = ""
    if not after <= before:  # NaN too: a fit that fits worse than no fit is no calibration
        worse = (
            f"the fit is worse in sample than the cited defaults (median APE {after:.1f}% against "
            f"{before:.1f}%): a measured value may be wrong"
        )
    return CalibrateOutput("\n".join(lines) + "\n", profile.to_toml(c.profile), worse)


@dataclass(frozen=True)
class ValidateOutput:
    text: str
    files: dict[str, str]


def _validate_inputs(files: list[str], calibration: str | None, stack: str | None):
    """(runs, note on skipped runs, profile, its name, the files) of a validation."""
    if stack is None:
        runs, skipped = _read_runs(files)
        return runs, skipped, load_profile(calibration), calibration or "the default profile", files
    from planner.stacks import registry
    from planner.stacks.runs import profile as stack_profile

    runs, skipped, _, _ = _stack_runs(stack, files)
    s = registry.get(stack)
    prof = load_profile(calibration) if calibration else stack_profile(s)
    name = calibration or f"configs/profiles/{s.profile}.toml (stack {stack})"
    return runs, skipped, prof, name, files or list(prof.meta.get("fitted_on", []))


def _fabric(name: str | None, held_out: bool):
    """The validation's fabric (None: one non-blocking network); --held-out refits the profiles,
    which are fitted on the non-blocking network, so it takes no other."""
    from planner import fabrics

    fab = fabrics.get(name).fabric
    if fab.flat:
        return None
    if held_out:
        raise BadInput(
            f"--fabric {name} with --held-out: refits are on one non-blocking network "
            "(valid: --fabric nonblocking, or --in-sample)"
        )
    return fab


def _title(name: str, runs: int, fabric: str | None, order: str | None) -> str:
    """The validation's title: its profile, runs, and the fabric and rank order where named."""
    title = f"Predicted vs measured: modern rules, {name}, {runs} runs"
    return title + (f", on fabric {fabric}" if fabric else "") + (f", rank order {order}" if order else "")


def _ordered(runs: list, order: str | None) -> list:
    """The runs in rank order ``order`` (None: each in its row's own, costs.comm.ranks)."""
    return list(runs) if order is None else [replace(r, rank_order=order) for r in runs]


def _coverage(
    files: list[str],
    runs,
    calibration: str | None,
    stack: str | None,
    held_out: bool,
    progress,
    fab=None,
    order=None,
) -> tuple[list[str], list[dict]]:
    """The interval coverage lines of a validation (:mod:`planner.calibrate.coverage`): with a
    stack, on its runs validated here; without, on the runs of the files given or else on every
    shipped stack's runs, each predicted as an answer without --stack would (in rank ``order``
    where given); and its rows."""
    from planner.calibrate import coverage

    kw = {"progress": progress} if progress else {}
    kw["fabric"] = fab
    if stack is not None:
        scored = coverage.score(runs, [stack] * len(runs), stack, calibration, held_out, **kw)
        what = f"answers with --stack {stack}" + (f" and --calibration {calibration}" if calibration else "")
    else:
        got, labels = coverage.attribute(files) if files else coverage.shipped_runs()
        got = _ordered(got, order)
        scored = coverage.score(got, labels, None, calibration, held_out, **kw)
        what = (
            f"answers with --calibration {calibration}"
            if calibration
            else "answers without --stack (each family's default stack, interval widened to the spread between stacks)"
        )
        what += f", on {'the runs of these files' if files else 'the runs of every shipped stack'}"
    lines = coverage.text(scored, stack is not None, what)
    if scored.in_sample.any():
        lines.append(
            "In-sample rows were predicted by a profile fitted on them, which flatters the interval"
            + ("." if held_out else "; --held-out predicts them by refits without their source.")
        )
    return lines, coverage.rows(scored)


def run_validate(
    files: list[str],
    calibration: str | None,
    stack: str | None = None,
    held_out: bool = False,
    progress=None,
    fabric: str | None = None,
    rank_order: str | None = None,
) -> ValidateOutput:
    """Error of a profile (default: the shipped one; with ``stack``, the stack's) on measured
    runs (default: the shipped ones; with ``stack``, the stack's runs of them), and the coverage
    of the 80% interval an answer would print (``held_out``: refit the runs a profile was fitted
    on without their source; ``progress`` hears of each refit); ``fabric``: the runs' network
    between nodes (configs/fabrics.toml; the profiles are fitted on one non-blocking network);
    ``rank_order``: every run's (costs.comm.ranks; None: each row's own)."""
    from planner.fabrics import rank_order as checked

    given = list(files)
    fab = _fabric(fabric, held_out)
    order = None if rank_order is None else checked(rank_order)
    runs, skipped, prof, name, files = _validate_inputs(files, calibration, stack)
    runs = _ordered(runs, order)
    table = RunTable(runs, "modern")
    pred = predict(table, prof, fab)
    if not np.all(np.isfinite(pred)):
        raise BadInput("some runs have no finite prediction (a precision the device lacks?)")
    fitted_on = {Path(x).name for x in prof.meta.get("fitted_on", [])}
    used = files or [str(p) for p in measurements.shipped()]
    overlap = sorted(fitted_on & {Path(x).name for x in used})
    data = report.error_data(runs, pred, _title(name, len(runs), fabric if fab is not None else None, order))
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
    cover_lines, cover_rows = _coverage(given, runs, calibration, stack, held_out, progress, fab, order)
    cover = "\n".join(cover_lines) + "\n"
    text = report.render_text(data) + (f"\n{note}\n" if note else "") + "\n" + cover
    files_out = {
        "report.html": report.render_html(data),
        "report.md": report.render_markdown(data) + (f"\n{note}\n" if note else "") + f"\n```\n{cover}```\n",
        "charts/scatter.svg": report.scatter_chart(data),
        "predictions.csv": render.to_csv(data["points"]),
        "coverage.csv": render.to_csv([{**r, "group": r["group"].strip()} for r in cover_rows]),
    }
    return ValidateOutput(text, files_out)
