"""`planner report`: re-render a Pareto report from a saved run folder, without searching."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli.app import app


@app.command()
def report(run_dir: Annotated[str, typer.Argument(help="A folder written by `planner pareto`.")]) -> None:
    """Re-render a Pareto report (HTML, Markdown, charts) from a saved run, without searching."""
    from planner.report.pareto_files import rerender

    files = rerender(run_dir)
    typer.echo(f"Rendered {', '.join(files)} in {run_dir}")
