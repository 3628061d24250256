"""Golden outputs of seeded end-to-end runs. Regenerate on purpose only, after checking the
change is intended: PLANNER_REGEN_GOLDEN=1 python -m pytest tests/test_golden.py"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from planner.cli import main

GOLDEN = Path(__file__).parent / "golden"
# wall-clock times, environment, and the sampler's trajectory (it may change with Optuna's
# version; the answers below are certified by enumeration and must not)
VOLATILE = {
    "seconds",
    "versions",
    "run_dir",
    "cache_hits",
    "evaluated_plans",
    "refinement_rounds",
    "gap",
    "front_found_by_search",
}


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _same(a, b, path="") -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), path
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _check(name: str, data) -> None:
    path = GOLDEN / name
    if os.environ.get("PLANNER_REGEN_GOLDEN"):
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"regenerated {path.name}")
    _same(data, json.loads(path.read_text()))


@pytest.mark.parametrize(
    "name,args",
    [
        ("optimize_alexnet_16gpus.json", ["optimize", "alexnet", "--budget", "16gpus"]),
        # PALEO's rule set stays selectable: the main job as it was answered before the modern rules
        (
            "optimize_alexnet_16gpus_paleo.json",
            ["optimize", "alexnet", "--budget", "16gpus", "--rules", "paleo-2018", "--precision", "fp32"],
        ),
        (
            "optimize_resnet50_cost.json",
            [
                "optimize",
                "resnet50",
                "--budget",
                "$500",
                "--objective",
                "cost",
                "--gpu",
                "A100,H100,L4",
                "--seed",
                "7",
            ],
        ),
        (
            "optimize_vgg16_pareto.json",
            ["optimize", "vgg16", "--budget", "32", "--objective", "time,cost", "--gpu", "V100,T4,A10G"],
        ),
    ],
)
def test_optimize_golden(name, args, capsys, tmp_path):
    assert main([*args, "--format", "json", "--out", str(tmp_path / "run")]) == 0
    _check(name, _strip(json.loads(capsys.readouterr().out)))


def test_estimate_golden(capsys):
    args = [
        "estimate",
        "inception_v3",
        "--device",
        "A100_80GB",
        "--network",
        "ib_hdr",
        "--gpus-per-node",
        "8",
        "--workers",
        "1,8,16,64,256",
        "--precision",
        "bf16",
        "--parallel",
        "hybrid",
        "--format",
        "json",
    ]
    assert main(args) == 0
    _check("estimate_inception_v3_a100.json", json.loads(capsys.readouterr().out))


# The LLM evaluator end to end at fixed layouts: a dense model with TP, SP, interleaved PP, ZeRO 1
# and full recomputation at two data-parallel degrees; a mixture of experts with EP over the nodes.
LLM_ESTIMATES = {
    "estimate_llama3_70b_h100.json": [
        "llama3-70b", "--workers", "64,128", "--tp", "8", "--pp", "4", "--interleave", "2", "--sp",
        "--zero", "1", "--recompute", "full", "--global-batch", "256",
    ],
    "estimate_mixtral_8x7b_h100.json": [
        "mixtral-8x7b", "--workers", "64", "--tp", "2", "--pp", "4", "--ep", "8", "--zero", "1",
        "--recompute", "full", "--global-batch", "256",
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LLM_ESTIMATES))
def test_estimate_llm_golden(name, capsys):
    args = [
        "estimate",
        *LLM_ESTIMATES[name],
        "--device",
        "H100_SXM",
        "--network",
        "ib_ndr",
        "--gpus-per-node",
        "8",
        "--microbatch",
        "1",
        "--precision",
        "bf16",
        "--format",
        "json",
    ]
    assert main(args) == 0
    _check(name, json.loads(capsys.readouterr().out))
