"""Progress of a long calibration: a bar on a terminal, one plain line per fit otherwise (as
sweeps show their studies, :mod:`planner.sweep.run`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from planner.calibrate.fitting import Progress


@contextmanager
def shown(interactive: bool | None = None, stream=None) -> Iterator[Progress]:
    """A :data:`~planner.calibrate.fitting.Progress` callback for the length of the block;
    ``interactive`` None: a bar when ``stream`` (default stderr) is a terminal."""
    stream = stream or sys.stderr
    bar = stream.isatty() if interactive is None else interactive
    if not bar:

        def line(done: int, total: int, what: str) -> None:
            print(f"[{done}/{total}] fitted {what}", file=stream, flush=True)

        yield line
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=stream),
        transient=False,
    ) as progress:
        task = progress.add_task("fits (all runs, then one per held-out source)", total=None)

        def update(done: int, total: int, what: str) -> None:
            progress.update(task, completed=done, total=total, description=f"fitted {what[:48]}")

        yield update
