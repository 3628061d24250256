"""`planner launch`: write the files that run a saved plan on one or more training stacks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import app


def write_launch(
    plan, targets: str, out: str | Path, provider: str | None, pricing: str, port: int
) -> list[Path]:
    """Write every file of ``targets`` (comma-separated names) for ``plan`` into ``out``."""
    from planner.launch.registry import emit, parse_targets
    from planner.launch.target import LaunchOptions
    from planner.request.files import check_writable

    chosen = parse_targets(targets)
    check_writable(out, "--out", folder=True)  # before any file is written
    files = emit(plan, chosen, LaunchOptions(provider=provider, pricing=pricing, port=port))
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text)
        if name.endswith((".sh", ".sbatch")):
            path.chmod(0o755)
        written.append(path)
    return written


def emit_option_check(emit: str | None, target: str | None, storage: str | None) -> str | None:
    """The targets to write files for (``--emit`` and ``--target`` together), checked before a
    search: each known, and a run folder to write into (a --storage run saves none)."""
    names = ",".join(x for x in (target, emit) if x)
    if names:
        from planner.errors import BadInput
        from planner.launch.registry import parse_targets

        parse_targets(names, "--target" if target else "--emit")
        if storage:
            raise BadInput(
                "--emit and --target write into the run folder, which a --storage run does not save"
            )
    return names or None


def emit_run(run: Path, emit: str, provider: str | None, pricing: str) -> str:
    """`--emit` of optimize and pareto: the launch files of a saved run's plan in run/launch/;
    returns the line to print."""
    from planner.launch.plan import load_plan

    written = write_launch(load_plan(run), emit, run / "launch", provider, pricing, 29500)
    return f"Launch files ({emit}): {run / 'launch'}/ ({', '.join(p.name for p in written)})"


@app.command()
def launch(
    plan: Annotated[str, typer.Argument(help="plan_<k>.json, a run.json, or a run folder (its best plan).")],
    target: Annotated[
        str,
        typer.Option(
            help="Targets, comma-separated: torchrun, slurm, skypilot, megatron, nemo, torchtitan, deepspeed, "
            "accelerate. slurm and skypilot wrap the first other target named (default torchrun)."
        ),
    ],
    out: Annotated[str, typer.Option("--out", "-o", help="Folder to write the files into.")] = "launch",
    provider: Annotated[
        str | None, typer.Option(help="skypilot: cloud(s), comma-separated, e.g. aws or aws,gcp.")
    ] = None,
    pricing: Annotated[str, typer.Option(help="skypilot: spot asks for spot instances.")] = "on-demand",
    port: Annotated[int, typer.Option(help="Rendezvous port on the first node.")] = 29500,
) -> None:
    """Write the files that run a saved plan: launch scripts, configs, arguments; refuse in one line a
    target that cannot run it."""
    from planner.launch.plan import load_plan

    written = write_launch(load_plan(plan), target, out, provider, pricing, port)
    typer.echo(f"Wrote {len(written)} files to {out}: {', '.join(p.name for p in written)}")
