"""The goodput options of `optimize` and `pareto` (and the keys of a sweep spec), declared once:
whether time to train counts failures, checkpoints and restarts, and their parameters
(:mod:`planner.goodput` has the cited defaults)."""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from planner import goodput

_OPTIONS: tuple[tuple[str, object, object, object], ...] = (
    (
        "goodput",
        str,
        "on",
        typer.Option(
            help="on (default): time to train, GPU-hours, cost and energy are the expected wall time of a run "
            "that fails, saves checkpoints and restarts; off: the failure-free best case."
        ),
    ),
    (
        "failures_per_1k_gpu_hours",
        float | None,
        None,
        typer.Option(
            help="Job-stopping failures per 1,000 GPU-hours (default "
            f"{goodput.FAILURES_PER_1K_GPU_HOURS:.4f}: Llama 3 405B's 419 unexpected interruptions "
            "in 54 days on 16,384 H100, arXiv:2407.21783)."
        ),
    ),
    (
        "ckpt_write_gbs",
        float | None,
        None,
        typer.Option(
            help="Checkpoint write bandwidth, GB/s for all writers together (default "
            f"{goodput.CKPT_WRITE_GBS:,.0f}: Llama 3's Tectonic storage, 2 TB/s sustained); reloads read at it too."
        ),
    ),
    (
        "restart_min",
        float | None,
        None,
        typer.Option(
            help="Minutes to relaunch the job after a failure (detection, diagnosis, node replacement, "
            f"start-up), before it reloads its checkpoint (default {goodput.RESTART_MIN:g}: MegaScale's "
            "detection and diagnosis on > 10,000 GPUs, arXiv:2402.15627)."
        ),
    ),
    (
        "async_ckpt",
        bool,
        False,
        typer.Option(
            "--async-ckpt/--no-async-ckpt",
            help="Asynchronous checkpoints (PyTorch DCP async_save, Megatron-Core): only the copy to host "
            "memory stops training; the write runs behind it.",
        ),
    ),
)
NAMES = tuple(name for name, *_ in _OPTIONS)


def parameters() -> list[inspect.Parameter]:
    """A keyword parameter per goodput option, for a Typer command's signature."""
    return [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, opt]
        )
        for name, kind, default, opt in _OPTIONS
    ]


def request_fields(opts: dict) -> dict:
    """The OptimizeRequest fields of the goodput options in ``opts`` (defaults where absent)."""
    return {name: opts.get(name, default) for name, _, default, _ in _OPTIONS}
