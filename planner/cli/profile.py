"""`planner profile`: measure training steps on the local GPU (or CPU) with PyTorch; print,
write the rows `planner calibrate` reads, and compare each layer with the cost model."""

from __future__ import annotations

import importlib.util
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.app import app
from planner.cli.model_options import Attention

INSTALL_HINT = "planner profile needs PyTorch: pip install 'planner[profile]' (or pip install torch)"


class ProfilePrecision(str, Enum):
    fp32 = "fp32"
    tf32 = "tf32"
    bf16 = "bf16"
    fp16 = "fp16"


class LayerFmt(str, Enum):
    text = "text"
    json = "json"
    csv = "csv"


def _require_torch() -> None:
    from planner.errors import BadInput

    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or blocked torch
        found = False
    if not found:
        raise BadInput(INSTALL_HINT)


def _check_output(output: str | None) -> None:
    from planner.errors import BadInput

    if output and Path(output).is_dir():
        raise BadInput(f"-o {output}: is a folder; give a file name such as profile.csv")
    if output and not Path(output).resolve().parent.is_dir():
        raise BadInput(f"-o {output}: folder {Path(output).parent} does not exist")


@app.command()
def profile(
    net: Annotated[str, typer.Argument(help="Zoo name, PALEO JSON spec or Hugging Face config.json.")],
    batch: Annotated[
        str | None, typer.Option(help="Batch sizes per GPU, e.g. 32,64 (default: the spec's).")
    ] = None,
    seq_len: Annotated[
        int | None, typer.Option(help="Transformers: tokens per sequence (default: the spec's).")
    ] = None,
    attention: Attention = None,
    precision: Annotated[
        ProfilePrecision, typer.Option(help="fp32, tf32, or bf16/fp16 autocast with fp32 master weights.")
    ] = ProfilePrecision.fp32,
    optimizer: Annotated[str, typer.Option(help="sgd, momentum (0.9) or adam.")] = "momentum",
    steps: Annotated[int, typer.Option(help="Timed steps (the median is reported).")] = 10,
    warmup: Annotated[int, typer.Option(help="Untimed steps first (autotuning, allocator warm-up).")] = 3,
    device: Annotated[str, typer.Option(help="auto (the GPU if PyTorch sees one), cuda or cpu.")] = "auto",
    device_key: Annotated[
        str | None,
        typer.Option(
            help="Catalog key of the GPU (default: read from its name); on the CPU, the GPU to predict for."
        ),
    ] = None,
    max_memory_gb: Annotated[
        float | None, typer.Option(help="Memory limit: a batch above it is reported as out of memory.")
    ] = None,
    peaks: Annotated[
        bool, typer.Option("--peaks/--no-peaks", help="Also measure matmul TFLOP/s and copy bandwidth.")
    ] = True,
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", help="Write the rows (CSV for planner calibrate); peaks beside it."),
    ] = None,
    layers: Annotated[
        bool, typer.Option("--layers", help="Per-layer measured vs predicted times, sorted by error.")
    ] = False,
    format: Annotated[
        LayerFmt, typer.Option("--format", help="--layers output: text, json or csv.")
    ] = LayerFmt.text,
    html: Annotated[str | None, typer.Option(help="--layers: write an HTML bar chart here.")] = None,
    calibration: Annotated[
        str | None, typer.Option(help="Calibration profile for the predictions (default: the shipped one).")
    ] = None,
) -> None:
    """Measure training steps on the local GPU (or CPU) with PyTorch: rows for calibrate.

    NET is built from planner's own spec; forward, backward and optimizer step are timed, the
    median over --steps after --warmup. --layers compares each layer with the cost model."""
    _require_torch()
    from planner.cli.profile_output import print_layers, print_steps
    from planner.profile.run import Request
    from planner.profile.run import profile as run
    from planner.request.parse import parse_int_list

    _check_output(output)
    req = Request(
        net=net,
        batches=tuple(parse_int_list(batch, "--batch")) if batch else (),
        seq_len=seq_len,
        attention=attention,
        precision=precision.value,
        optimizer=optimizer,
        steps=steps,
        warmup=warmup,
        device=device,
        device_key=device_key,
        max_memory_gb=max_memory_gb,
        peaks=peaks,
        layers=layers,
        calibration=calibration,
    )
    result = run(req)
    if layers:
        print_layers(result, format.value, html)
    else:
        print_steps(result, output)
