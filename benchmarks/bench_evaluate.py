"""Evaluator throughput and command start-up time.

Scores every combination of 15 devices x 10 networks x workers 1..256 x 8 batch sizes x
4 schemes (1,228,800 plans) for alexnet and inception_v3 in one call each, on one core, and
prints plans per second (targets: 1,000,000 for alexnet, 200,000 for inception_v3), under
paleo-2018 and under modern (target: modern at least half of paleo-2018's rate). Then times
`planner estimate alexnet` and `planner --help` from process start to exit (target: 0.6 s).

Run: python benchmarks/bench_evaluate.py
"""

from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # one core

import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from costs.comm import schemes as comm  # noqa: E402
from costs.model import evaluate, plans  # noqa: E402
from planner import catalog  # noqa: E402

DEVICES = [
    "TITAN_X",
    "K40",
    "K80",
    "P100",
    "V100_16GB",
    "V100_32GB",
    "T4",
    "A10G",
    "L4",
    "A100_40GB",
    "A100_80GB",
    "H100_SXM",
    "H100_PCIE",
    "H200",
    "B200",
]
NETWORKS = [
    "aws",
    "ethernet",
    "ethernet20",
    "infiniband",
    "eth25",
    "eth100",
    "eth200",
    "eth400",
    "ib_hdr",
    "ib_ndr",
]
BATCHES = [8, 16, 32, 64, 128, 256, 512, 1024]


def grid(n_layers: int):
    d, n, k, b, s = np.meshgrid(
        np.arange(len(DEVICES)),
        np.arange(len(NETWORKS)),
        np.arange(1, 257),
        np.array(BATCHES),
        np.arange(len(comm.SCHEME_NAMES)),
        indexing="ij",
    )
    return plans(
        n_layers,
        device=d.ravel(),
        network=n.ravel(),
        workers=k.ravel(),
        batch=b.ravel(),
        scheme=s.ravel(),
        intra_link=n.ravel(),
        gpus_per_node=1,
        ppp_comp=0.62,
        ppp_comm=0.72,
    )


def bench_net(name: str, repeat: int = 3, rules: str = "paleo-2018") -> float:
    costs = catalog.net_costs(name, rules)
    devices = catalog.device_table(DEVICES)
    links = catalog.link_table(NETWORKS)
    p = grid(costs.n_layers)
    extra = {"efficiency": catalog.efficiency(DEVICES, NETWORKS)} if costs.rules.modern else {}
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = evaluate(costs, p, devices, links, **extra)
        _ = r.total
        best = min(best, time.perf_counter() - t0)
    rate = len(p) / best
    print(f"{name:14s} {rules:10s} {len(p):,} plans in {best:.3f} s: {rate:,.0f} plans/s")
    return rate


def bench_command(args: list[str], repeat: int = 5) -> float:
    exe = shutil.which("planner")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "planner", *args]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    print(f"planner {' '.join(args):24s} {best:.3f} s (best of {repeat})")
    return best


if __name__ == "__main__":
    for net in ("alexnet", "inception_v3"):
        paleo = bench_net(net)
        modern = bench_net(net, rules="modern")
        print(f"{net:14s} modern / paleo-2018 = {modern / paleo:.2f} (target >= 0.5)")
    bench_command(["estimate", "alexnet"])
    bench_command(["--help"])
