"""How close are the published 8-GPU ResNet-50 runs, each predicted without its source?

The runs: every 8-GPU ResNet-50 row of configs/measurements/cnn.csv from NVIDIA's
DeepLearningExamples (sources ``nvidia-dle-rn50-*``) and MLPerf Training (``mlperf-*``), one node
of 8 or two of 4. Each is predicted as ``planner validate --stack optimized-cnn --held-out`` does:
the optimized-cnn stack's runs refitted without the run's source (the leave-one-source-out fold of
``planner calibrate --stack optimized-cnn``), then that fold's profile predicts the run. The
scaling is in the prediction (the 8 GPUs, their links, the synchronisation terms), and so is the
run's data loader where the source states it (the ``data_loader`` column).

Run: python benchmarks/rn50_eight_gpu.py      (one refit per source, about 1-2 minutes on 2 cores)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.calibrate import fitting  # noqa: E402
from planner.calibrate.predict import RunTable  # noqa: E402
from planner.stacks import registry  # noqa: E402
from planner.stacks import runs as stack_runs  # noqa: E402

STACK = "optimized-cnn"
TOLERANCE = 0.10  # |predicted / measured - 1|
PREFIXES = ("nvidia-dle-rn50-", "mlperf-")


def is_target(run) -> bool:
    """An 8-GPU ResNet-50 run of DeepLearningExamples or MLPerf Training."""
    return run.net == "resnet50" and run.gpus == 8 and run.source.startswith(PREFIXES)


def held_out(workers: int | None = None) -> tuple[list, np.ndarray]:
    """(the target runs, each one's held-out predicted samples/s), in file order."""
    table = RunTable(stack_runs.select(registry.get(STACK)).runs, fitting.RULES)
    target = np.array([is_target(r) for r in table.runs])
    sources = sorted({s for s, t in zip(table.sources, target) if t})
    logr = fitting.leave_one_source_out(table, workers=workers, only=sources)
    runs = [r for r, t in zip(table.runs, target) if t]
    return runs, table.measured[target] * np.exp(logr[target])


def rows(runs, predicted: np.ndarray) -> list[dict]:
    """One record per run: what it is, measured and predicted samples/s, the error."""
    return [
        {
            "source": r.source,
            "gpu": r.device,
            "precision": r.precision,
            "nodes": f"{r.gpus // r.gpus_per_node}x{r.gpus_per_node}",
            "batch": r.batch_per_gpu,
            "loader": "-" if r.data_loader == "none" else r.data_loader,
            "measured": r.samples_per_s,
            "predicted": float(p),
            "error": float(p / r.samples_per_s - 1.0),
        }
        for r, p in zip(runs, predicted, strict=True)
    ]


def main() -> None:
    runs, predicted = held_out()
    table = rows(runs, predicted)
    head = f"{'source':34} {'gpu':15} {'prec':5} {'nodes':5} {'batch':>5} {'loader':7} {'measured':>9} {'held-out':>9} {'error':>7}"
    print(head)
    for t in table:
        mark = "" if abs(t["error"]) <= TOLERANCE else "  miss"
        print(
            f"{t['source']:34} {t['gpu']:15} {t['precision']:5} {t['nodes']:5} {t['batch']:>5} {t['loader']:7} "
            f"{t['measured']:>9.0f} {t['predicted']:>9.0f} {t['error']:>+7.1%}{mark}"
        )
    within = sum(abs(t["error"]) <= TOLERANCE for t in table)
    one_node = [t for t in table if t["nodes"] == "1x8"]
    within_one = sum(abs(t["error"]) <= TOLERANCE for t in one_node)
    print(
        f"\nwithin {TOLERANCE:.0%}: {within} of {len(table)} runs ({within_one} of {len(one_node)} on one 8-GPU node)"
    )
    ape = np.abs([t["error"] for t in table]) * 100
    print(f"median |error| {np.median(ape):.1f}%, largest {ape.max():.1f}%")


if __name__ == "__main__":
    main()
