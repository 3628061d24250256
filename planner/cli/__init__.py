"""The `planner` command line (Typer): parse, call one pipeline function, print.

Each command lives in a module of this package and imports what it uses when it runs, so that
`planner --help` starts fast. :func:`main` turns every planner or usage error into one line.
"""

from __future__ import annotations

import sys

import typer

from planner.cli import calibrate, estimate, launch, optimize, profile, rerender  # noqa: F401  (register their commands)
from planner.cli.app import app
from planner.cli.sweep import sweep_app

app.add_typer(sweep_app, name="sweep")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; turn every planner or usage error into one line on stderr."""
    from costs.errors import PlannerError

    NoArgsIsHelpError, UsageError = _click_errors()
    Abort = typer.Abort

    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["optimize"], ["pareto"]):
        optimize.add_axis_options()
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="planner", standalone_mode=False)
    except PlannerError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except NoArgsIsHelpError as exc:
        # Typer's rich help prints itself while the error is built (its message is then "");
        # plain Click puts the help text in the message. Either way, show it once.
        message = exc.format_message()
        if message:
            typer.echo(message)
        return 0
    except UsageError as exc:
        typer.echo(f"error: {exc.format_message()}", err=True)
        return 2
    except Abort:
        typer.echo("aborted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # an output that cannot be written (a full disk, /proc, a read-only folder)
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"error: cannot write or read {where}{exc.strerror or exc}", err=True)
        return 2
    return result if isinstance(result, int) else 0


def _click_errors() -> tuple[type, type]:
    """Click's (or Typer's vendored Click's) NoArgsIsHelpError and UsageError. Click before 8.2
    has no NoArgsIsHelpError (a bare command prints its help and exits 0 through Click's own
    Exit), so a class no call raises stands in; SkyPilot, an optional extra, still pins
    click < 8.2."""
    try:  # recent Typer vendors Click
        from typer._click.exceptions import NoArgsIsHelpError, UsageError

        return NoArgsIsHelpError, UsageError
    except ImportError:
        from click import exceptions

        absent = type("NoArgsIsHelpError", (Exception,), {})
        return getattr(exceptions, "NoArgsIsHelpError", absent), exceptions.UsageError


def run() -> None:  # console-script entry
    sys.exit(main())
