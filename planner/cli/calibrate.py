"""`planner calibrate` and `planner validate`: parse options, call, print and write."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import app


@app.command()
def calibrate(
    measurements: Annotated[
        list[str] | None,
        typer.Argument(
            help="CSV file(s) of measured runs (default: the shipped configs/measurements/cnn.csv and llm.csv)."
        ),
    ] = None,
    output: Annotated[
        str | None, typer.Option("-o", "--output", help="Write the fitted profile (TOML) here.")
    ] = None,
    loso: Annotated[
        bool, typer.Option("--loso/--no-loso", help="Measure the held-out error: refit without each source.")
    ] = True,
    stack: Annotated[
        str | None,
        typer.Option(
            help="Fit this stack's runs (see `planner list stacks`): those of its files, or of the "
            "files given, that its rules keep."
        ),
    ] = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress", help="Show the fits as they end (default: on a terminal, a bar)."
        ),
    ] = None,
    from_defaults: Annotated[
        bool,
        typer.Option(
            "--from-defaults",
            help="Fit from the cited defaults of configs/efficiencies.toml instead of refining the "
            "shipped profile (GPUs the runs do not measure then lose the shipped calibration).",
        ),
    ] = False,
) -> None:
    """Fit the modern rule set's efficiencies to measured runs; print the fit, the
    leave-one-source-out error per source and the parameters the runs could not identify.
    Your runs refine the shipped profile they would otherwise be predicted with (--stack's, or
    the default stack of their net family): what they do not measure keeps its shipped value.
    Each fit (all runs, then one per held-out source) is reported as it ends, on stderr."""
    from planner.calibrate.commands import run_calibrate
    from planner.calibrate.progress import shown

    if output:
        from planner.request.files import check_writable

        check_writable(output, "-o")  # before the fit, not after
    if stack is not None:
        from planner.stacks.registry import get

        get(stack)
    with shown(progress) as report:
        out = run_calibrate(
            list(measurements or []), loso=loso, stack=stack, progress=report, from_defaults=from_defaults
        )
    typer.echo(out.text, nl=False)
    if out.worse:  # never saved without a word: said on stderr, exit 1
        typer.echo(f"error: not saved: {out.worse}" if output else f"error: {out.worse}", err=True)
        raise typer.Exit(1)
    if output:
        target = Path(output)
        if target.exists():
            typer.echo(f"note: -o {target} exists; replacing it", err=True)
        tmp = target.with_name(f".{target.name}.partial")
        tmp.write_text(out.profile_toml)
        tmp.replace(target)  # whole or not at all
        typer.echo(f"Saved: {target} (use it with --calibration {target})")
    else:
        typer.echo("Not saved: give -o FILE to keep the profile.")


@app.command()
def validate(
    measurements: Annotated[
        list[str] | None,
        typer.Argument(
            help="CSV file(s) of measured runs (default: the shipped cnn.csv, transformer.csv and llm.csv "
            "of configs/measurements/)."
        ),
    ] = None,
    calibration: Annotated[
        str | None, typer.Option(help="Calibration profile (TOML; default: the shipped default profile).")
    ] = None,
    out: Annotated[
        str | None, typer.Option(help="Report folder (default: results/<timestamp>_validate/).")
    ] = None,
    results: Annotated[str, typer.Option(help="Where default report folders go.")] = "results",
    stack: Annotated[
        str | None,
        typer.Option(help="Validate this stack's profile on its runs (see `planner list stacks`)."),
    ] = None,
    fabric: Annotated[
        str | None,
        typer.Option(
            help="Predict the runs on this network between nodes (see `planner list fabrics`; default "
            "nonblocking, as the profiles were fitted)."
        ),
    ] = None,
    rank_order: Annotated[
        str | None,
        typer.Option(
            help="Predict every run in this rank order (tp-cp-ep-dp-pp or tp-cp-ep-pp-dp; see `planner "
            "estimate --help`); default: each row's rank_order column, tp-cp-ep-dp-pp where empty.",
            metavar="ORDER",
        ),
    ] = None,
    held_out: Annotated[
        bool,
        typer.Option(
            "--held-out/--in-sample",
            help="Interval coverage of runs a profile was fitted on: predict them by refits without "
            "their source (minutes), or in-sample (default, labelled so).",
        ),
    ] = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Show the --held-out refits as they end (default: on a terminal, a bar).",
        ),
    ] = None,
) -> None:
    """Prediction error against measured runs: median and p90 absolute percentage error and
    bias per source, the worst rows, and a report with a predicted-vs-measured scatter plot;
    then the share of runs inside the 80% interval an answer would print, per stack, net family
    and GPU generation (without --stack: as an answer that names no stack)."""
    from contextlib import nullcontext

    from planner.calibrate.commands import run_validate
    from planner.calibrate.progress import shown
    from planner.report.files import run_dir, write_atomic
    from planner.request.files import check_writable

    check_writable(out or results, "--out" if out else "--results", folder=True)  # before any work
    with shown(progress) if held_out else nullcontext(None) as report:
        v = run_validate(
            list(measurements or []),
            calibration,
            stack,
            held_out=held_out,
            progress=report,
            fabric=fabric,
            rank_order=rank_order,
        )
    typer.echo(v.text, nl=False)
    target = write_atomic(Path(out) if out else run_dir(results, "measurements", "validate"), v.files)
    typer.echo(f"Report: {target / 'report.html'} (also report.md, predictions.csv)")
