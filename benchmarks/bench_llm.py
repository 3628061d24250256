"""Transformer evaluator throughput (issue target: 2,000,000 plans/s on one core).

Scores a grid of llama3-8b and gpt3-175b plans with every model-parallel axis varied: 6
devices x workers 8..1024 x tensor 1..8 x pipeline 1..16 x ZeRO 0..3 x recomputation x
sequence parallelism x microbatch 1..8 x
AllReduce scheme x microbatches per step (737,280 plans), in one evaluator call per net, and prints plans per
second. The grid is scored twice; the second (warm: shards built) is reported. A third grid turns on the context- and
expert-parallel axes (mixtral-8x7b at 32k tokens: cp 1..8 with its key/value exchanges, ep 1..8;
issue target 2,000,000 plans/s with them on). Then times `planner optimize llama3-70b --budget
512gpus` (target 3 s) and `planner optimize llama3.1-405b --budget 16384gpus` (target 3 s) from
process start to exit.

Run: python benchmarks/bench_llm.py
"""

from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # one core

import time  # noqa: E402

import numpy as np  # noqa: E402
from bench_optimize import bench_command  # noqa: E402  (this folder is on sys.path)

from costs.model import evaluate, plans  # noqa: E402
from planner import catalog  # noqa: E402
from planner.metrics.model import CostModel  # noqa: E402

DEVICES = ["A100_40GB", "A100_80GB", "H100_SXM", "H200", "B200", "MI300X"]
WORKERS = [8, 16, 32, 64, 128, 256, 512, 1024]


def grid(n_layers: int, wide: bool = False) -> dict[str, np.ndarray]:
    axes = dict(
        device=np.arange(len(DEVICES)),
        workers=np.array(WORKERS),
        tp=np.array([1, 2, 4, 8]),
        pp=np.array([1, 2, 4, 8, 16]),
        zero=np.arange(4),
        recompute=np.arange(3),
        sp=np.array([False, True]),
        batch=np.array([1, 2, 4, 8]),
        scheme=np.arange(4),
        accumulation=np.array([8, 64]),
    )
    if wide:  # context and expert parallelism on; fewer schemes and devices keep the grid alike
        axes.update(cp=np.array([1, 2, 4, 8]), cp_comm=np.arange(3), ep=np.array([1, 2, 4, 8]))
        axes.update(device=np.arange(2), scheme=np.array([1]), batch=np.array([1, 2]), zero=np.array([1, 3]))
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {k: m.ravel() for k, m in zip(axes, mesh, strict=True)}


def bench(net: str, seq_len: int | None = None, wide: bool = False) -> None:
    costs = catalog.net_costs(net, "modern", seq_len=seq_len)
    devices = catalog.device_table(DEVICES)
    links = catalog.link_table(["ib_ndr"] + [catalog.device(d).device.intra_link for d in DEVICES])
    model = CostModel.of("modern", optimizer="adam")
    g = grid(costs.n_layers, wide)
    p = plans(
        costs.n_layers,
        network=0,
        intra_link=1 + g["device"],
        gpus_per_node=8,
        precision=3,
        **g,
    )
    kw = model.kwargs(devices, links)
    evaluate(costs, p, devices, links, **kw)  # warm: shard costs built and cached
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        r = evaluate(costs, p, devices, links, **kw)
        best = min(best, time.perf_counter() - t0)
    assert np.isfinite(r.total).all()
    label = f"{net} cp/ep" if wide else net
    print(
        f"{label:18s} {len(p):>10,} plans in {best:6.3f} s: {len(p) / best / 1e6:5.2f} M plans/s (target 2.0)"
    )


if __name__ == "__main__":
    for name in ("llama3-8b", "gpt3-175b"):
        bench(name)
    bench("mixtral-8x7b", seq_len=32768, wide=True)
    bench_command(("llama3-70b", "--budget", "512gpus"))  # target 3 s
    bench_command(("llama3.1-405b", "--budget", "16384gpus", "--gpu", "H100_SXM"))  # target 3 s
