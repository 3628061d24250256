"""Search speed as ratios to `planner --help`, timed in the same run.

A shared or busy machine slows every process alike, so each command's wall time (process start
to exit) is divided by `planner --help`'s, timed in the same rounds; the commands take turns
in each round. Prints min and median of the repetitions and the ratio of the medians against
its target:

* the main job, `planner optimize alexnet --budget 16gpus`: <= 3x `--help`;
* `planner optimize llama3-70b --budget 512gpus` (a space too large to enumerate): <= 6x.

Then, in-process, how the search stage spends its time for each (valid plans, how the search
ran, seconds) and the enumeration rate in valid plans per second.

Run: python benchmarks/bench_search.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "--help": (["--help"], None),
    "main job": (["optimize", "alexnet", "--budget", "16gpus"], 3.0),
    "llama3-70b 512": (["optimize", "llama3-70b", "--budget", "512gpus"], 6.0),
}


def _wall(args: list[str], out: str) -> float:
    cmd = [sys.executable, "-m", "planner", *args]
    if args[0] == "optimize":
        cmd += ["--out", out]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def bench_commands(repeat: int) -> dict[str, list[float]]:
    """Wall times of every command, ``repeat`` rounds, the commands taking turns."""
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            for name, (args, _) in COMMANDS.items():
                times[name].append(_wall(args, f"{tmp}/{name.replace(' ', '_')}_{i}"))
    base = statistics.median(times["--help"])
    for name, (args, target) in COMMANDS.items():
        t = times[name]
        med = statistics.median(t)
        line = f"{name:16s} min {min(t):.2f} s  median {med:.2f} s"
        if target is not None:
            ratio = med / base
            verdict = "meets" if ratio <= target else "MISSES"
            line += f"  = {ratio:.1f}x --help (target <= {target:.0f}x: {verdict})"
        print(line + f"   [planner {' '.join(args)}]")
    return times


def bench_search() -> None:
    """In-process: how the search of each optimize command ran, and the enumeration rate."""
    from planner.pipeline import build
    from planner.request.optimize import OptimizeRequest
    from planner.search.certify import search_and_certify
    from planner.search.stream import enumerate_space

    for net, budget in (("alexnet", "16gpus"), ("llama3-70b", "512gpus")):
        req = OptimizeRequest(net, budget=(budget,))
        scorer, objectives = build(req)
        t0 = time.perf_counter()
        out = search_and_certify(scorer, objectives, req)
        s = out.search
        print(
            f"{net} {budget}: {s['valid_plans']:,} valid plans of {s['space_size']:,} combinations; "
            f"{s['method']} ({s['sampler'] or 'no sampler'}, {s['trials']} trials), "
            f"{s['evaluated_plans']:,} plans scored, search stage {time.perf_counter() - t0:.2f} s"
        )
    scorer, objectives = build(OptimizeRequest("llama3-8b", budget=("1024gpus",), global_batch=512))
    t0 = time.perf_counter()
    _, counts = enumerate_space(scorer, objectives)
    dt = time.perf_counter() - t0
    print(
        f"enumerate llama3-8b 1024 GPUs, global batch 512: {counts.valid:,} valid plans of "
        f"{counts.combinations:,} combinations in {dt:.2f} s = {counts.valid / dt:,.0f} plans/s"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    bench_commands(a.repeat)
    bench_search()
