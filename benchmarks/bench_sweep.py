"""A 48-study sweep on this machine: studies per minute and trials per second.

4 nets x 4 GPU budgets x 3 objectives (time, cost, time+cost), 200 trials each, local backend
(one process per core), journal-file storage in a temporary folder.

Run: python benchmarks/bench_sweep.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """name: bench48
trials: 200
seed: 0
grid:
  net: [alexnet, nin, vgg16, resnet50]
  budget: [8gpus, 16gpus, 32gpus, 64gpus]
  objective: [time, cost, "time,cost"]
options:
  gpu: A100,H100,L4,T4
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "bench48.yaml"
        spec.write_text(SPEC)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "planner", "sweep", "run", str(spec), "--results", tmp],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        dt = time.perf_counter() - t0
        t1 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "planner", "sweep", "run", str(spec), "--results", tmp],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        rerun = time.perf_counter() - t1
    studies, trials = 48, 48 * 200
    print(
        f"48-study sweep (local, journal file): {dt:.1f} s = {studies / dt * 60:.1f} studies/min, "
        f"{trials / dt:.0f} trials/s"
    )
    print(f"rerun of the finished sweep (skips every study): {rerun:.1f} s")


if __name__ == "__main__":
    main()
