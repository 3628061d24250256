"""Optimizer speed: the main command end to end, and exhaustive enumeration of the space.

Prints the wall time of `planner optimize alexnet --budget 16gpus` (process start to exit;
target under 3 s) and the time to enumerate and score the default search space of alexnet and
inception_v3 at several GPU budgets, with the number of plans scored (target: a million plans
in under 1 s).

Run: python benchmarks/bench_optimize.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time

from planner.pipeline import build
from planner.request.optimize import OptimizeRequest
from planner.search.scored import exhaustive


def bench_command(args: tuple[str, ...] = ("alexnet", "--budget", "16gpus"), repeat: int = 3) -> float:
    """Best wall time of `planner optimize ARGS` from process start to exit (seconds), printed."""
    exe = shutil.which("planner")
    cmd = [exe] if exe else [sys.executable, "-m", "planner"]
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            t0 = time.perf_counter()
            run = [*cmd, "optimize", *args, "--out", f"{tmp}/{i}"]
            subprocess.run(run, check=True, stdout=subprocess.DEVNULL)
            best = min(best, time.perf_counter() - t0)
    print(f"planner optimize {' '.join(args)}: {best:.2f} s (best of {repeat}, process start to exit)")
    return best


def bench_enumeration(net: str, budget: int, precision: str = "fp32") -> None:
    scorer, objectives = build(OptimizeRequest(net, budget=(f"{budget}gpus",), precision=precision))
    t0 = time.perf_counter()
    s = exhaustive(scorer, objectives)
    dt = time.perf_counter() - t0
    print(
        f"enumerate {net:13s} budget {budget:4d} {precision:4s}: {len(s):>9,} plans "
        f"({scorer.space.raw_size:,} combinations) in {dt:.3f} s = {len(s) / dt:,.0f} plans/s"
    )


if __name__ == "__main__":
    bench_command()
    for net in ("alexnet", "inception_v3"):
        for budget in (16, 256):
            bench_enumeration(net, budget)
        bench_enumeration(net, 256, "any")
