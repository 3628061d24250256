"""End to end against model cards: `planner optimize` with goodput on (the default) against the
GPU-hours Meta publishes, and the two nets' exact parameter counts.

Sources (read 2026-11-25):
* Llama 2 70B: 1,720,320 A100-80GB GPU-hours for 2T tokens, "total GPU time required for training
  each model" (https://github.com/meta-llama/llama/blob/0e3444bca7a3e02f25f2c9f9e778866fecdae567/MODEL_CARD.md).
* Llama 3.1 405B: 30.84M H100-80GB GPU-hours
  (https://github.com/meta-llama/llama-models/blob/1b5892739868e5333fb7f022ba91218f0ae5f9c2/models/llama3_1/MODEL_CARD.md);
  15.6T tokens on up to 16,384 H100 over 400 Gb/s links (arXiv:2407.21783).

What the predictions say (planner's numbers when these tests were written, printed by the
tests on failure): Llama 3.1 405B on 16,384 H100 over ib_ndr, TP 8 x PP 32 x DP 64 with 4
virtual stages and TP communication overlapped, 29.8M GPU-hours (-3.5%), of which goodput loss
7.4% (2.2M GPU-hours, about 590 failures at a 10 min relaunch each, planner.goodput.RESTART_MIN
from MegaScale, plus the reload and the lost work); failure-free it would be 27.6M (-10.7%). The
planner's MFU for that plan (40.1%) is inside the 38-41% the Llama 3 paper measured (Table 4).
Llama 2 70B on 2,048 A100 over 200 Gb/s InfiniBand (ib_hdr) predicts 1.13M GPU-hours (-34.5%),
goodput loss 1.0%: the gap is throughput, not goodput (MFU 68% predicted for TP 4 with its
communication overlapped, 43.5% implied by the card: 6 x 70e9 x 2e12 / (1,720,320 h x 3600 x
312e12); llm-foundry's MPT-70B on 64 A100 ran at the same hardware efficiency, 74% of peak with
its recomputed forward counted).

Goodput against the evidence (planner.goodput's docstring quotes the sources):
* Llama 3 405B on 16,384 H100 reports "higher than 90% effective training time" (arXiv:2407.21783,
  Section 3.3.4): the prediction, 92.6%, is above it (97.7% when no relaunch time was counted).
  The paper's figure also absorbs 47 planned interruptions, which the failure rate leaves out.
* The same run's 466 interruptions in 54 days at > 90% leave under 16.7 min per interruption
  for everything; the prediction spends 13.7 min per failure (relaunch, reload, half a
  checkpoint segment and the checkpoints' share).
"""

from __future__ import annotations

import json

import pytest

from planner import catalog
from planner.cli import main

LLAMA2_70B_CARD_GPU_HOURS = 1_720_320
LLAMA31_405B_CARD_GPU_HOURS = 30.84e6


def _best(capsys, tmp_path, *args) -> dict:
    code = main(["optimize", *args, "--format", "json", "--out", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)["best"]


def test_llama2_70b_parameter_count_is_exact():
    # per layer: q, o 8192^2 each, k, v 8192 x 1024 each, SwiGLU 3 x 8192 x 28672, two RMSNorm gains;
    # untied 32000 x 8192 embedding and head; the final norm
    layer = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    total = 80 * layer + 2 * 32000 * 8192 + 8192
    assert total == 68_976_648_192
    assert catalog.net_costs("llama2-70b", "modern", "gemm", None, None).total_params == total


def test_llama31_405b_parameter_count_is_exact():
    layer = 2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248 + 2 * 16384
    total = 126 * layer + 2 * 128256 * 16384 + 16384
    assert total == 405_853_388_800
    assert catalog.net_costs("llama3.1-405b", "modern", "gemm", None, None).total_params == total


def test_llama31_405b_gpu_hours_against_the_card(capsys, tmp_path):
    """The default search includes the interleaved pipeline (Llama 3 ran one, the paper's
    §3.3.2) and the tensor-parallel overlap the megatron stack runs, and its best plan's
    GPU-hours are within 25% of the card. Without interleaving (--interleave 1) the best plan is
    TP 8 x DP 2,048 at 32% MFU and misses by about 22% (34% before the TP overlap was searched by
    default): pinned, not tuned."""
    args = ("llama3.1-405b", "--budget", "16384gpus", "--gpu", "H100_SXM", "--network", "ib_ndr")
    b = _best(capsys, tmp_path, *args)
    err = b["gpu_hours"] / LLAMA31_405B_CARD_GPU_HOURS - 1
    loss = 1 - b["useful_gpu_hours"] / b["gpu_hours"]
    assert b["interleave"] > 1 and b["pp"] > 1
    assert b["tokens_per_s"] * b["useful_time_s"] == pytest.approx(15.6e12, rel=0.01)
    assert abs(err) <= 0.25, f"405B: {b['gpu_hours']:,.0f} GPU-hours ({err:+.1%}), goodput loss {loss:.1%}"
    # ~3 h MTBF with a 10 min relaunch: 5-10% lost (0.01-0.05 before the relaunch was counted)
    assert loss == pytest.approx(1 - b["goodput"]) and 0.05 < loss < 0.10
    # Llama 3: "higher than 90% effective training time" over 466 interruptions in 54 days
    assert b["goodput"] > 0.90
    per_failure_min = b["lost_hours"] * 60 / b["failures"]  # relaunch, reload, lost work, checkpoints
    assert per_failure_min < 54 * 24 * 60 * 0.10 / 466  # 16.7 min for all of it
    plain = _best(capsys, tmp_path / "plain", *args, "--interleave", "1")
    err = plain["gpu_hours"] / LLAMA31_405B_CARD_GPU_HOURS - 1
    assert 0.15 < err < 0.30, f"405B, no interleaving: {err:+.1%}"


def test_llama2_70b_gpu_hours_and_goodput_loss(capsys, tmp_path):
    b = _best(
        capsys, tmp_path, "llama2-70b", "--budget", "2048gpus", "--gpu", "A100_80GB", "--network", "ib_hdr"
    )
    err = b["gpu_hours"] / LLAMA2_70B_CARD_GPU_HOURS - 1
    loss = 1 - b["useful_gpu_hours"] / b["gpu_hours"]
    assert b["tokens_per_s"] * b["useful_time_s"] == pytest.approx(2e12, rel=0.01)
    # The card's 25% is missed by throughput (module docstring), not by goodput: pinned, not tuned.
    assert -0.40 < err < -0.25, f"70B: {b['gpu_hours']:,.0f} GPU-hours ({err:+.1%}), goodput loss {loss:.1%}"
    # 2,048 GPUs: a failure every ~25 h, a 0.5 s checkpoint; about 24 failures at ~15 min each
    # (the 10 min relaunch among them) cost ~1% (0.3% before the relaunch was counted)
    assert 0.005 < loss < 0.02
