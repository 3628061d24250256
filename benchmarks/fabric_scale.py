"""Llama 3 405B's Table 4 layouts (configs/measurements/scale.csv) predicted on each fabric of
configs/fabrics.toml that holds them, in each rank order (costs/comm/ranks.py: Megatron-Core's
default tp-cp-ep-dp-pp, and Llama 3's tp-cp-ep-pp-dp, which the rows ran in), as `planner
validate` predicts them (the shipped default profile, no stack): TFLOP/s per GPU, published
against predicted.

    python benchmarks/fabric_scale.py

The published figures are Meta's (Dubey et al. 2024, arXiv:2407.21783, Table 4), measured on its
RoCE cluster (configs/fabrics.toml [meta-llama3-roce]). Nothing here is fitted to them.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import product

from costs.comm.ranks import ORDERS
from planner import catalog, fabrics
from planner.calibrate import measurements
from planner.calibrate.commands import load_profile
from planner.calibrate.fitting import predict
from planner.calibrate.predict import RunTable

SOURCE = "meta-llama3-2024-table4"


def table() -> list[dict]:
    """One row per (layout, fabric, rank order): GPUs, TP, CP, PP, DP, published and predicted
    TFLOP/s per GPU."""
    runs = [
        r
        for r in measurements.load(catalog.configs_dir() / "measurements" / "scale.csv")
        if r.source == SOURCE
    ]
    profile = load_profile(None)
    out = []
    for info, order in product(fabrics.fabrics().values(), ORDERS):
        size = info.fabric.max_gpus
        if size is not None and max(r.gpus for r in runs) > size:
            continue
        ordered = [replace(r, rank_order=order) for r in runs]
        pred = predict(RunTable(ordered, "modern"), profile, None if info.fabric.flat else info.fabric)
        for r, p in zip(ordered, pred, strict=True):
            out.append(
                {
                    "fabric": info.key,
                    "rank_order": order,
                    "gpus": r.gpus,
                    "layout": f"TP {r.tp} CP {r.cp} PP {r.pp} DP {r.gpus // (r.tp * r.cp * r.pp)}",
                    "published": r.value,
                    "predicted": r.value * p / r.samples_per_s,
                }
            )
    return out


if __name__ == "__main__":
    for row in table():
        ratio = row["predicted"] / row["published"]
        print(
            f"{row['fabric']:<18} {row['rank_order']:<15} {row['gpus']:>6,} {row['layout']:<24}"
            f" published {row['published']:5.0f}"
            f"  predicted {row['predicted']:6.1f} TFLOP/s per GPU ({ratio:.2f}x)"
        )
