"""The Typer application every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="planner",
    help="Plan deep-learning training runs with the PALEO performance model: "
    "how to train network X, on which hardware, fastest or cheapest.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
