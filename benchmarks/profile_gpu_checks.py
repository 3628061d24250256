"""The real-GPU checks of `planner profile` (issue 15's "done when"), on the local GPU:

1. `planner profile resnet50 --precision bf16 --batch 64,256` against the plain PyTorch loop
   (benchmarks/torch_reference_loop.py, torchvision's ResNet-50, same batch and precision):
   images/s of each and their ratio (target: within 10%).
2. A profile fitted with `planner calibrate` on ResNet-50's runs only, predicting the other zoo
   CNNs measured by `planner profile` on the same GPU (fp32, tf32, bf16; batch 64 to 256):
   median absolute percentage error of images/s (target: 15%).
3. `planner profile resnet50 --precision bf16 --batch 256 --layers`: the share of the measured
   step the layers and the optimizer account for (target: 90%).

Prints the figures; writes the CSV files and the per-layer JSON into --out. Needs a CUDA GPU
and torchvision. Run: python benchmarks/profile_gpu_checks.py --out results/gpu_checks
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

CNNS = ("resnet50", "vgg16", "alexnet", "inception_v3", "densenet121")


def sh(*argv: str) -> str:
    print("+", " ".join(argv), flush=True)
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def planner(*argv: str) -> str:
    return sh(sys.executable, "-m", "planner", *argv)


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def check_reference(out: Path, steps: str) -> None:
    mine, ref = out / "resnet50-bf16.csv", out / "reference-resnet50-bf16.csv"
    planner(
        "profile", "resnet50", "--precision", "bf16", "--batch", "64,256", "--steps", steps, "-o", str(mine)
    )
    sh(
        sys.executable, "benchmarks/torch_reference_loop.py", "--nets", "resnet50", "--precisions", "bf16",
        "--batches", "64,256", "--steps", steps, "--out", str(ref),
    )  # fmt: skip
    theirs = {int(r["batch"]): float(r["samples_per_s"] or "nan") for r in rows(ref)}
    for r in rows(mine):
        n = int(r["batch_per_gpu"])
        ratio = float(r["value"]) / theirs[n]
        print(f"1. resnet50 bf16 batch {n}: planner profile {float(r['value']):,.0f}/s, "
              f"reference loop {theirs[n]:,.0f}/s, ratio {ratio:.3f}")  # fmt: skip


def check_calibration(out: Path, steps: str) -> None:
    from planner.calibrate import measurements
    from planner.calibrate.fitting import calibrate, predict
    from planner.calibrate.predict import RunTable

    files = {}
    for net in CNNS:
        for precision in ("fp32", "tf32", "bf16"):
            path = out / f"{net}-{precision}.csv"
            if not path.exists():
                planner("profile", net, "--precision", precision, "--batch", "64,128,256", "--steps", steps,
                        "--no-peaks", "-o", str(path))  # fmt: skip
            files.setdefault(net, []).append(path)
    fit_runs = [r for p in files["resnet50"] for r in measurements.load(p)]
    prof = calibrate(fit_runs, [p.name for p in files["resnet50"]], loso=False).profile
    others = [
        r for net in CNNS[1:] for p in files[net] for r in measurements.load(p) if r.batch_per_gpu >= 64
    ]
    pred = predict(RunTable(others, "modern"), prof)
    ape = [abs(p / r.samples_per_s - 1) * 100 for p, r in zip(pred, others)]
    print(f"2. fitted on resnet50's {len(fit_runs)} runs, {len(others)} runs of the other CNNs: "
          f"median APE {statistics.median(ape):.1f}%, max {max(ape):.1f}%")  # fmt: skip


def check_layers(out: Path, steps: str) -> None:
    text = planner("profile", "resnet50", "--precision", "bf16", "--batch", "256", "--steps", steps,
                   "--layers", "--format", "json")  # fmt: skip
    (out / "layers-resnet50-bf16-256.json").write_text(text)
    t = json.loads(text)["batches"]["256"]
    print(f"3. resnet50 bf16 batch 256 --layers: layers + optimizer cover {t['layers_cover']:.1%} of the "
          f"hooked step {t['measured_step_ms']:.2f} ms (plain step {t['plain_step_ms']:.2f} ms)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/gpu_checks")
    ap.add_argument("--steps", default="20")
    ap.add_argument("--only", default="1,2,3", help="which checks, e.g. 1,3")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    checks = {"1": check_reference, "2": check_calibration, "3": check_layers}
    for k in args.only.split(","):
        checks[k](out, args.steps)


if __name__ == "__main__":
    main()
