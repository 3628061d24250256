"""FP8 training (Transformer Engine): the linear layers' GEMMs run at the FP8 tensor-core peak,
attention, the LM head and every memory-bound layer as under bf16; CNNs are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costs.hardware import PRECISIONS
from costs.modern import evaluator as modern
from costs.specs.transformer import FP8_TYPES
from planner import catalog
from planner.cli import main
from planner.metrics import memory


def _layer_seconds(net: str, device: str, precision: str, batch: int = 1):
    costs = catalog.net_costs(net, "modern", "gemm")
    devices = catalog.device_table([device])
    eff = catalog.efficiency([device], [catalog.device(device).device.intra_link])
    fwd, bwd = modern.layer_seconds(costs, devices, eff, 0, PRECISIONS.index(precision), batch)
    return costs.net, fwd, bwd, devices.peak[0]


@pytest.mark.parametrize("net", ["llama3-8b", "gpt3-175b", "mixtral-8x7b"])
def test_only_linear_and_expert_layers_change(net):
    spec, f8, b8 = _layer_seconds(net, "H100_SXM", "fp8")[:3]
    _, f16, b16, peak = _layer_seconds(net, "H100_SXM", "bf16")
    types = np.array([s.type for s in spec.layers])
    fp8 = np.isin(types, list(FP8_TYPES))
    assert fp8.any() and (~fp8).any()
    # everything else is costed exactly as in bf16: attention, the LM head, norms, adds
    np.testing.assert_allclose(f8[~fp8], f16[~fp8], rtol=1e-9)
    np.testing.assert_allclose(b8[~fp8], b16[~fp8], rtol=1e-9)
    # the big GEMMs are compute-bound: twice the peak (H100 datasheet 1,979 vs 989 TFLOP/s
    # dense, the same GEMM efficiency by default) halves them; smaller ones gain less
    ratio = peak[PRECISIONS.index("bf16")] / peak[PRECISIONS.index("fp8")]
    assert ratio == pytest.approx(0.5, rel=1e-3)
    r = np.concatenate([f8[fp8] / f16[fp8], b8[fp8] / b16[fp8]])
    assert np.all(r >= ratio - 1e-9) and np.all(r <= 1.0 + 1e-12)


def test_large_linear_gemms_take_half_the_time():
    """Llama 3 8B, 4 x 8,192 tokens: its linear GEMMs are compute-bound at both rates."""
    spec, f8, b8, peak = _layer_seconds("llama3-8b", "H100_SXM", "fp8", batch=4)
    _, f16, b16, _ = _layer_seconds("llama3-8b", "H100_SXM", "bf16", batch=4)
    linear = np.array([s.type == "Linear" for s in spec.layers])
    ratio = peak[PRECISIONS.index("bf16")] / peak[PRECISIONS.index("fp8")]
    np.testing.assert_allclose(f8[linear] / f16[linear], ratio, rtol=0.02)


def test_fp8_keeps_bf16_bytes_per_parameter():
    for opt in ("sgd", "momentum", "adam"):
        assert memory.bytes_per_param("fp8", opt) == memory.bytes_per_param("bf16", opt)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["estimate", "alexnet", "--precision", "fp8"], "--precision fp8 applies to transformers"),
        (["optimize", "resnet50", "--budget", "8gpus", "--precision", "fp8"], "--precision fp8 applies"),
        (
            ["estimate", "llama3-8b", "--device", "A100_80GB", "--precision", "fp8"],
            "A100_80GB has no fp8 peak",
        ),
    ],
)
def test_fp8_refused_where_it_does_not_apply(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and not out


def test_fp8_estimate_is_faster_but_not_twice(capsys):
    args = ["estimate", "llama3-8b", "--workers", "8", "--gpus-per-node", "8", "--zero", "1"]
    args += ["--microbatch", "1", "--global-batch", "64", "--scheme", "ring", "--format", "json"]
    t = {}
    for p in ("bf16", "fp8"):
        code, out, _ = run(capsys, *args, "--precision", p)
        assert code == 0
        (rec,) = json.loads(out)
        assert rec["precision"] == p
        t[p] = rec["total_ms"]
    # attention, norms and the optimizer step do not speed up: less than the peaks' 2x
    assert 1.2 < t["bf16"] / t["fp8"] < 2.0


def _front_precisions(tmp_path, net: str, budget: str) -> set[str]:
    out = tmp_path / net
    argv = ["pareto", net, "--budget", budget, "--gpu", "H100_SXM", "--precision", "any", "--out", str(out)]
    assert main(argv) == 0
    front = json.loads((out / "run.json").read_text())["report"]["front"]
    return {p["precision"] for p in front}


def test_any_precision_offers_fp8_to_transformers_only(tmp_path, capsys):
    assert "fp8" in _front_precisions(tmp_path, "llama3-8b", "16gpus")
    assert "fp8" not in _front_precisions(tmp_path, "alexnet", "4gpus")
