"""Exhaustive enumeration: speed and peak memory, end to end and on its own.

For each case, in a fresh process each time (peak RSS from the kernel's rusage of that process):

* ``planner optimize NET --budget N --precision any --exhaustive always``: wall time and peak
  RSS of the whole command;
* the enumeration alone (what ``--exhaustive always`` adds to the search): valid plans scored
  per second and the process's peak RSS.

Repeats give ranges (the machine may be shared). To compare with another checkout, run it with
that checkout first on PYTHONPATH: the command and the enumeration use whichever planner is
imported (a checkout without planner.search.stream enumerates with scored.exhaustive).

Run: python benchmarks/bench_enumerate.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = (("inception_v3", 4096), ("alexnet", 256))


def _run(args: list[str], cwd: str) -> tuple[float, float, str]:
    """(wall s, peak RSS MB, stdout) of one child process, which imports the planner this one
    does (run from ``cwd``, so that `python -m` does not pick up a checkout in the current folder)."""
    import planner

    env = {**os.environ, "PYTHONPATH": str(Path(planner.__file__).resolve().parents[1])}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=cwd, env=env
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, out  # ru_maxrss: kB on Linux


def enumerate_once(net: str, budget: int) -> None:
    """(in a child) Enumerate one space as `optimize --exhaustive always` does; print
    'plans seconds'."""
    from planner.pipeline import build
    from planner.request.optimize import OptimizeRequest

    req = OptimizeRequest(net, budget=(f"{budget}gpus",), precision="any", exhaustive="always")
    scorer, objectives = build(req)
    t0 = time.perf_counter()
    try:
        from planner.result.optimize import needs
        from planner.search.stream import enumerate_space
    except ImportError:  # a checkout that scores the whole space at once
        from planner.search.scored import exhaustive

        n = len(exhaustive(scorer, objectives))
    else:
        n = enumerate_space(scorer, objectives, needs(scorer, objectives, req))[1].valid
    print(n, time.perf_counter() - t0)


def _range(xs: list[float], fmt: str) -> str:
    return f"{fmt.format(min(xs))}-{fmt.format(max(xs))}" if len(xs) > 1 else fmt.format(xs[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--enumerate-once", nargs=2, metavar=("NET", "GPUS"))
    a = ap.parse_args()
    if a.enumerate_once:
        enumerate_once(a.enumerate_once[0], int(a.enumerate_once[1]))
        return
    for net, gpus in CASES:
        walls, rss, rates, erss = [], [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(a.repeat):
                cmd = [sys.executable, "-m", "planner", "optimize", net, "--budget", f"{gpus}gpus"]
                cmd += ["--precision", "any", "--exhaustive", "always", "--out", f"{tmp}/{i}"]
                w, r, _ = _run(cmd, tmp)
                walls.append(w)
                rss.append(r)
                _, r, out = _run(
                    [sys.executable, str(Path(__file__).resolve()), "--enumerate-once", net, str(gpus)], tmp
                )
                n, s = out.split()
                rates.append(int(n) / float(s))
                erss.append(r)
        print(
            f"{net} {gpus} GPUs, --precision any --exhaustive always ({int(n):,} valid plans): "
            f"command {_range(walls, '{:.1f}')} s, peak {_range(rss, '{:,.0f}')} MB; "
            f"enumeration {_range(rates, '{:,.0f}')} plans/s, peak {_range(erss, '{:,.0f}')} MB "
            f"({a.repeat} runs)"
        )


if __name__ == "__main__":
    main()
