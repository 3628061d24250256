"""`planner sweep`: the sweep commands (run, worker, status, collect)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from planner.cli.options import Fmt

sweep_app = typer.Typer(
    help="Batch sweeps: many studies at once, locally or as a Slurm job array.", no_args_is_help=True
)


class Backend(str, Enum):
    local = "local"
    slurm = "slurm"


SpecArg = Annotated[str, typer.Argument(help="Sweep spec (YAML); see configs/sweeps/example.yaml.")]
ResultsOpt = Annotated[
    str | None, typer.Option(help="Parent of the sweep folder (default: the spec's `results`).")
]
StorageOpt = Annotated[
    str | None, typer.Option(help="Optuna storage instead of the sweep's journal file, e.g. postgresql://...")
]


@sweep_app.command("run")
def sweep_run(
    spec: SpecArg,
    backend: Annotated[
        Backend, typer.Option(help="local: a process pool on this machine; slurm: a job array.")
    ] = Backend.local,
    workers: Annotated[int | None, typer.Option(help="Local processes (default: one per core).")] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition.")] = None,
    time_limit: Annotated[str, typer.Option("--time", help="Slurm time limit per array task.")] = "1:00:00",
    array_parallel: Annotated[int | None, typer.Option(help="Slurm: at most N array tasks at once.")] = None,
    workers_per_study: Annotated[
        int, typer.Option(help="Slurm: array tasks optimising each study together.")
    ] = 1,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Slurm: print the sbatch script, submit nothing.")
    ] = False,
    results: ResultsOpt = None,
    storage: StorageOpt = None,
) -> None:
    """Run (or finish) every study of a sweep; finished studies are skipped."""
    from planner.errors import BadInput
    from planner.sweep import run as sweep

    if (
        workers_per_study < 1
        or (array_parallel is not None and array_parallel < 1)
        or (workers is not None and workers < 1)
    ):
        raise BadInput("--workers, --workers-per-study and --array-parallel take positive integers")
    s = sweep.load_with(spec, results, storage)
    if backend is Backend.local:
        statuses = sweep.run_local(s, workers)
        done = sum(x.state == "done" for x in statuses)
        typer.echo(f"{done} of {len(statuses)} studies done; storage {s.storage}")
        typer.echo(f"Next: planner sweep collect {spec}" + (f" --results {results}" if results else ""))
        if done < len(statuses):
            raise typer.Exit(1)
        return
    cells = s.cells() if dry_run else None
    if not dry_run:
        sweep.prepare(s)
        cells = sweep._pending(s)
        if not cells:
            typer.echo(f"All {len(s.cells())} studies are done; nothing to submit.")
            return
    tasks = sweep.task_indices(s, cells, workers_per_study)
    script = sweep.slurm_script(s, tasks, workers_per_study, partition, time_limit, array_parallel)
    if dry_run:
        typer.echo(script, nl=False)
        return
    job = sweep.submit(s, script)
    typer.echo(
        f"Submitted job array {job}: {len(tasks)} tasks for {len(cells)} studies "
        f"({s.folder / 'sweep.sbatch'}). Watch with: planner sweep status {spec}"
    )


@sweep_app.command("worker")
def sweep_worker(
    spec: SpecArg,
    task: Annotated[int, typer.Option(help="Array task id: study task // workers-per-study.")],
    workers_per_study: Annotated[int, typer.Option(help="Tasks sharing each study.")] = 1,
    results: ResultsOpt = None,
    storage: StorageOpt = None,
) -> None:
    """Optimise the study of one array task (what each Slurm task runs)."""
    from planner.errors import BadInput
    from planner.sweep import run as sweep

    s = sweep.load_with(spec, results, storage)
    cells = s.cells()
    index = task // max(workers_per_study, 1)
    if task < 0 or index >= len(cells):
        raise BadInput(
            f"--task {task} is out of range: the sweep has {len(cells)} studies x "
            f"{workers_per_study} tasks (0..{len(cells) * workers_per_study - 1})"
        )
    name, state = sweep.run_cell(str(s.path), index, str(s.results), s.storage_url)
    typer.echo(f"{name}: {state}")
    if state != "done":
        raise typer.Exit(1)


@sweep_app.command("status")
def sweep_status(
    spec: SpecArg,
    results: ResultsOpt = None,
    storage: StorageOpt = None,
    format: Annotated[Fmt, typer.Option("--format")] = Fmt.table,
) -> None:
    """Per study: trials done, best value so far, state, and the Slurm job state."""
    from planner.report import render
    from planner.sweep import run as sweep

    s = sweep.load_with(spec, results, storage)
    statuses = sweep.status(s)
    slurm = sweep.slurm_states(s)
    recs = [
        {
            "study": x.cell.study,
            "trials": f"{x.complete}/{s.trials}",
            "running": x.running,
            "best": x.best,
            "state": x.state,
            "slurm": slurm.get(x.cell.index, ""),
            "note": x.message,
        }
        for x in statuses
    ]
    if format is Fmt.json:
        typer.echo(render.to_json(recs))
    elif format is Fmt.csv:
        typer.echo(render.to_csv(recs), nl=False)
    else:
        for r in recs:
            r["best"] = "" if r["best"] is None else r["best"]
        cols = [
            ("study", "study"),
            ("trials", "trials"),
            ("best", "best so far"),
            ("state", "state"),
            ("slurm", "slurm"),
            ("note", "note"),
        ]
        typer.echo(render.table(recs, cols, 3))


@sweep_app.command("collect")
def sweep_collect(spec: SpecArg, results: ResultsOpt = None, storage: StorageOpt = None) -> None:
    """summary.csv and a report (Markdown, HTML) comparing the cells."""
    from planner.report import render
    from planner.report import sweep as sweepreport
    from planner.sweep import run as sweep

    s = sweep.load_with(spec, results, storage)
    data = sweepreport.collect_data(s.name, sweep.status(s))
    cols = [
        "study",
        *s.grid,
        "net",
        "budget",
        "objective",
        "state",
        "trials",
        *sweepreport.PLAN_COLUMNS,
        "front_size",
        "gap",
        "note",
    ]
    cols = list(dict.fromkeys(cols))
    files = {
        "summary.csv": render.to_csv(data["rows"], cols),
        "summary.md": sweepreport.render_markdown(data),
        "summary.html": sweepreport.render_html(data),
    }
    s.folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        tmp = s.folder / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(s.folder / name)
    typer.echo(f"Wrote {', '.join(files)} in {s.folder}")
    if data["missing"]:
        typer.echo(
            f"warning: {len(data['missing'])} of {len(data['rows'])} studies are not done; "
            f"run `planner sweep run {spec}` to finish them",
            err=True,
        )
