"""What `planner profile` prints and writes (no torch): the step table, the peaks, the rows
file and its peaks side file, and the per-layer comparison in text, JSON, CSV or HTML."""

from __future__ import annotations

from pathlib import Path

import typer

from planner.profile import compare
from planner.profile.rows import CPU, PEAK_COLUMNS, to_csv
from planner.report import render
from planner.report.text import attention_words

STEP_COLUMNS = [
    ("batch", "batch"),
    ("status", "status"),
    ("forward_ms", "fwd ms"),
    ("backward_ms", "bwd ms"),
    ("optimizer_ms", "opt ms"),
    ("step_ms", "step ms"),
    ("samples_per_s", "samples/s"),
    ("peak_memory_gb", "peak GB"),
    ("predicted_samples_per_s", "predicted/s"),
    ("ratio", "pred/meas"),
]


def _where(result) -> str:
    e = result.env
    driver = f", driver {e.driver}" if e.driver else ""
    text = f"{result.net} on {e.name} ({e.key}{driver}, torch {e.torch}){attention_words(result.attention)}"
    if result.device == "cpu":
        text += "; measured on the CPU: planner calibrate refuses CPU rows (a GPU profile needs GPU runs)"
        if result.predict_key:
            text += f"; predictions for {result.predict_key}"
    return text


def _step_record(step, predicted) -> dict:
    rec = {"batch": step.batch, "status": step.status}
    if step.status == "ok":
        rec |= {
            "forward_ms": step.forward * 1e3,
            "backward_ms": step.backward * 1e3,
            "optimizer_ms": step.optimizer * 1e3,
            "step_ms": step.step * 1e3,
            "samples_per_s": step.batch / step.step,
        }
        if step.peak_memory_bytes:
            rec["peak_memory_gb"] = step.peak_memory_bytes / 1e9
    if predicted is not None:
        rec["predicted_samples_per_s"] = step.batch / predicted.step
        if step.status == "ok":
            rec["ratio"] = rec["predicted_samples_per_s"] / rec["samples_per_s"]
    return rec


def _write(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.partial")
    tmp.write_text(text)
    tmp.replace(target)  # whole or not at all


def print_steps(result, output: str | None) -> None:
    typer.echo(_where(result))
    records = [_step_record(s, result.predicted.get(s.batch)) for s in result.steps]
    cols = [c for c in STEP_COLUMNS if any(c[0] in r for r in records)]
    typer.echo(render.table(records, cols, 2))
    if result.peaks:
        typer.echo(
            "Peaks: "
            + "; ".join(
                f"{p['kind']} {p['precision']} {p['value']} {p['unit']}".replace("  ", " ")
                for p in result.peaks
            )
        )
    if not output:
        typer.echo("Not saved: give -o FILE to keep the rows for planner calibrate.")
        return
    target = Path(output)
    _write(target, to_csv(result.rows))
    saved = f"Saved: {target}"
    if result.peaks:
        side = target.with_name(target.stem + ".peaks.csv")
        _write(side, to_csv(result.peaks, PEAK_COLUMNS))
        saved += f" and {side}"
    if result.env.key != CPU:
        saved += f" (fit a profile with: planner calibrate {target} -o profile.toml)"
    typer.echo(saved)


def print_layers(result, fmt: str, html: str | None) -> None:
    tables = {n: t for n, t in result.layers.items()}
    if fmt == "json":
        typer.echo(
            render.to_json(
                {
                    "net": result.net,
                    "device": result.env.key,
                    "batches": {str(n): t for n, t in tables.items()},
                }
            )
        )
    elif fmt == "csv":
        recs = [{"batch": n, **r} for n, t in tables.items() if isinstance(t, dict) for r in t["rows"]]
        typer.echo(render.to_csv(recs), nl=False)
    else:
        typer.echo(_where(result))
        for n, t in tables.items():
            _layers_text(n, t, result.predict_key)
    if html:
        pages = {n: t for n, t in tables.items() if isinstance(t, dict)}
        if pages:
            n, t = next(iter(pages.items()))
            _write(Path(html), compare.chart(t, f"{result.net}, batch {n}: measured vs predicted per layer"))
            if fmt == "text":
                typer.echo(f"Chart: {html}")


def _layers_text(n: int, t, key: str | None) -> None:
    if not isinstance(t, dict):
        typer.echo(f"\nbatch {n}: {t}")
        return
    pred = (
        f", predicted {t['predicted_step_ms']:,.2f} ms on {key}"
        if key
        else " (no prediction: give --device-key)"
    )
    plain = t.get("plain_step_ms")
    marks = f" (without the per-layer marks: {plain:,.2f} ms)" if plain else ""
    typer.echo(
        f"\nbatch {n}: measured step {t['measured_step_ms']:,.2f} ms{marks}{pred}; the layers and the "
        f"optimizer account for {t['layers_cover']:.1%} of it, the rest is 'other'"
    )
    has = key is not None
    keep = lambda cols: [c for c in cols if has or not c[0].startswith(("predicted", "error", "ratio"))]  # noqa: E731
    typer.echo(render.table(compare.shares_for_text(t["shares"]), keep(compare.SHARE_COLUMNS), 2))
    typer.echo("")
    rows = [{k: ("" if v is None else v) for k, v in r.items()} for r in t["rows"]]
    typer.echo(render.table(rows, keep(compare.ROW_COLUMNS), 3))
