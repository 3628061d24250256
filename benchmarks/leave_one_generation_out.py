"""How wrong is a prediction for a GPU generation the calibration has never seen?

Leave-one-generation-out: for each GPU generation of a measurement file, fit the modern rules on
the other generations' runs (`planner calibrate --no-loso`) and predict the held-out generation's
runs with that profile (`planner validate`). The spread of those errors (RMS of log(predicted /
measured)) is what an answer on an unseen generation should carry; planner/result/confidence.py
uses it (UNSEEN_SD_LOG). Also prints the B200 runs of new-gpus.csv, which no shipped fit has seen,
under the default profile.

Run: python benchmarks/leave_one_generation_out.py        (about 5-10 minutes on 2 cores)
"""

from __future__ import annotations

import csv
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner import catalog  # noqa: E402

MEASUREMENTS = ROOT / "configs" / "measurements"
MIN_RUNS = 4  # a generation with fewer held-out runs says too little


def _generation(device: str) -> str:
    known = catalog.devices()
    if device in known:
        return str(known[device].raw.get("generation", device))
    return {"K80_DIE": "Kepler", "A100_80GB_PCIE": "Ampere"}.get(device, device)


def _planner(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"planner {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def _log_errors(report: Path) -> list[float]:
    """log(predicted / measured) of every row of a validate report's predictions.csv."""
    rows = list(csv.DictReader((report / "predictions.csv").open()))
    out = []
    for r in rows:
        p, m = float(r["predicted"]), float(r["measured"])
        if p > 0 and m > 0:
            out.append(math.log(p / m))
    return out


def _validate(path: Path, profile: Path | None, out: Path) -> list[float]:
    args = ["validate", str(path), "--out", str(out)]
    if profile is not None:
        args += ["--calibration", str(profile)]
    text = _planner(*args)
    folder = Path(text.strip().splitlines()[-1].split("Report: ")[-1].split("/report.html")[0])
    return _log_errors(folder)


def hold_out(name: str, tmp: Path) -> list[tuple[str, int, list[float]]]:
    """(generation, runs, log errors) for each generation of one measurement file held out."""
    rows = list(csv.DictReader((MEASUREMENTS / name).open()))
    header = list(rows[0].keys())
    gens = sorted({_generation(r["device"]) for r in rows})
    out = []
    for g in gens:
        test = [r for r in rows if _generation(r["device"]) == g]
        train = [r for r in rows if _generation(r["device"]) != g]
        if len(test) < MIN_RUNS or not train:
            continue
        paths = {}
        for kind, subset in (("train", train), ("test", test)):
            paths[kind] = tmp / f"{name}-{g}-{kind}.csv"
            with paths[kind].open("w", newline="") as f:
                w = csv.DictWriter(f, header)
                w.writeheader()
                w.writerows(subset)
        profile = tmp / f"{name}-{g}.toml"
        # from the cited defaults: a shipped stack's profile as the prior was fitted on the
        # held-out generation too, and would carry its scales into the prediction
        _planner(
            "calibrate",
            str(paths["train"]),
            "--no-loso",
            "--no-progress",
            "--from-defaults",
            "-o",
            str(profile),
        )
        out.append((g, len(test), _validate(paths["test"], profile, tmp / f"v-{name}-{g}")))
    return out


def _row(label: str, n: int, errs: list[float]) -> str:
    ape = [abs(math.exp(e) - 1) for e in errs]
    rms = math.sqrt(sum(e * e for e in errs) / len(errs))
    bias = math.exp(statistics.median(errs)) - 1
    return f"| {label} | {n} | {statistics.median(ape):.1%} | {bias:+.1%} | {rms:.3f} |"


def main() -> None:
    print("| held-out generation | runs | median APE | bias | RMS log error |")
    print("|---|---|---|---|---|")
    pooled: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in ("cnn.csv", "llm.csv"):
            for g, n, errs in hold_out(name, tmp):
                print(_row(f"{name}: {g}", n, errs), flush=True)
                pooled.append(math.sqrt(sum(e * e for e in errs) / len(errs)))
        b200 = _validate(MEASUREMENTS / "new-gpus.csv", None, tmp / "v-b200")
        print(_row("new-gpus.csv: Blackwell (no shipped fit has one)", len(b200), b200))
        pooled.append(math.sqrt(sum(e * e for e in b200) / len(b200)))
    print(f"\nmedian over held-out generations of the RMS log error: {statistics.median(pooled):.3f}")


if __name__ == "__main__":
    main()
