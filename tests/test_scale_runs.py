"""Accuracy at scale: Llama 3 405B's three published layouts (Grattafiori et al. 2024,
arXiv:2407.21783, Table 4; configs/measurements/scale.csv, held out of every fit) predicted by
`planner validate`, each within 15% of its published TFLOP/s per GPU, under the answer that
names no stack and under the megatron stack's profile."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from costs.comm.ranks import MEGATRON, PP_INSIDE_DP
from planner import catalog, fabrics
from planner.calibrate import measurements
from planner.calibrate.commands import load_profile
from planner.calibrate.fitting import predict
from planner.calibrate.predict import RunTable
from planner.cli import main

SCALE = catalog.configs_dir() / "measurements" / "scale.csv"


LLAMA3 = "meta-llama3-2024-table4"


def _errors(capsys, tmp_path, *extra) -> dict[int, float]:
    """Llama 3 405B's rows: row -> error (%) of `planner validate`."""
    out = tmp_path / "report"
    assert main(["validate", str(SCALE), "--out", str(out), *extra]) == 0
    capsys.readouterr()
    with open(out / "predictions.csv", newline="") as f:
        return {int(r["row"]): float(r["error_pct"]) for r in csv.DictReader(f) if r["source"] == LLAMA3}


def test_the_rows_are_the_published_layouts():
    runs = [r for r in measurements.load(SCALE) if r.source == LLAMA3]
    got = [(r.gpus, r.tp, r.cp, r.pp, r.gpus // (r.tp * r.cp * r.pp), r.seq_len, r.value) for r in runs]
    assert got == [
        (8192, 8, 1, 16, 64, 8192, 430.0),
        (16384, 8, 1, 16, 128, 8192, 400.0),
        (16384, 8, 16, 16, 8, 131072, 380.0),
    ]
    # 16M tokens per step each: DP x microbatches x sequence
    assert all(r.gpus // (r.tp * r.cp * r.pp) * r.accumulation * r.seq_len == 2**24 for r in runs)
    assert runs[2].cp_comm == "all_gather"


def test_llama3_405b_layouts_within_15_percent_without_a_stack(capsys, tmp_path):
    errors = [e for _, e in sorted(_errors(capsys, tmp_path).items())]
    assert len(errors) == 3
    assert all(abs(e) <= 15.0 for e in errors), errors


def test_llama3_405b_layouts_under_the_megatron_profile(capsys, tmp_path):
    """Meta's stack is its own; the Megatron-Core class is the nearest shipped one. Its FLOP
    counting is not published: a causal count of the attention would make the 128k layout's
    measured rate 1.4x higher (configs/measurements/scale.csv notes). All three come within 15%
    (-2%, -0%, +13%; the 128k layout, whose step is mostly attention, was +19% before Megatron-Core's
    2024 README runs were costed with the interleaved schedule they ran, which moved the megatron
    profile's Hopper rates)."""
    profile = catalog.configs_dir() / "profiles" / "megatron.toml"
    errors = [e for _, e in sorted(_errors(capsys, tmp_path, "--calibration", str(profile)).items())]
    assert len(errors) == 3
    assert all(abs(e) <= 15.0 for e in errors), errors


def _tflops(order: str, fabric: str) -> list[float]:
    """Llama 3 405B's rows predicted in rank ``order`` on ``fabric``: TFLOP/s per GPU, as
    `planner validate` predicts them (the shipped default profile, no stack)."""
    runs = [replace(r, rank_order=order) for r in measurements.load(SCALE) if r.source == LLAMA3]
    fab = fabrics.get(fabric).fabric
    pred = predict(RunTable(runs, "modern"), load_profile(None), None if fab.flat else fab)
    return [r.value * p / r.samples_per_s for r, p in zip(runs, pred, strict=True)]


def test_llama3_405b_layouts_on_metas_own_fabric(capsys, tmp_path):
    """The same rows on the cluster they ran on (`planner validate --fabric meta-llama3-roce`:
    pods of 3,072 GPUs at full bisection, 1:7 above), in the rank order they ran in, [TP, CP, PP,
    DP] (§3.3.2; the rows' rank_order tp-cp-ep-pp-dp): a pipeline fills t c p = 128 (2,048 with
    CP 16) consecutive GPUs, inside a pod, and a data-parallel ring has 24 ranks a pod (64 x 3,072
    / 8,192; 128 x 3,072 / 16,384), more than 7: nothing is slowed, so the fabric changes no row."""
    assert {r.rank_order for r in measurements.load(SCALE) if r.source == LLAMA3} == {PP_INSIDE_DP}
    flat = _errors(capsys, tmp_path / "flat")
    meta = _errors(capsys, tmp_path / "meta", "--fabric", "meta-llama3-roce")
    assert len(meta) == 3 and meta == flat
    # --rank-order overrides the rows': in Megatron-Core's order the pipeline crosses pods
    forced = _errors(capsys, tmp_path / "forced", "--fabric", "meta-llama3-roce", "--rank-order", MEGATRON)
    published = [430.0, 400.0, 380.0]
    got = [p * (1.0 + forced[row] / 100.0) for p, row in zip(published, sorted(forced), strict=True)]
    assert got == pytest.approx(_tflops(MEGATRON, "meta-llama3-roce"), abs=0.1)
    code = main(["validate", str(SCALE), "--fabric", "meta-llama3-roce", "--held-out"])
    assert code == 2 and "refits are on one non-blocking network" in capsys.readouterr().err


def test_llama3_405b_layouts_in_either_rank_order():
    """Published 430, 400 and 380 TFLOP/s per GPU (arXiv:2407.21783, Table 4). In Llama 3's order
    Meta's fabric slows nothing (above); in Megatron-Core's default the pipeline is outermost, so
    its 16 stages span the whole job: 16 x 3,072 / 8,192 = 6 stages a pod (a send keeps 6/7 of
    the NIC), over 16,384 GPUs 3 (3/7). The 8,192-GPU layout then loses under 1%, the 16,384-GPU
    ones a few per cent. The orders tie on the non-blocking fabric: TP 8 fills each node, so the
    same traffic leaves it either way."""
    flat = _tflops(MEGATRON, "nonblocking")
    assert _tflops(PP_INSIDE_DP, "nonblocking") == pytest.approx(flat, rel=1e-12)
    meta = _tflops(PP_INSIDE_DP, "meta-llama3-roce")
    megatron = _tflops(MEGATRON, "meta-llama3-roce")
    assert meta == pytest.approx(flat, rel=1e-12)
    assert meta == pytest.approx([405.3, 382.9, 331.5], abs=0.05)
    assert megatron == pytest.approx([403.5, 369.5, 326.7], abs=0.05)
    drop = [1.0 - b / a for a, b in zip(meta, megatron, strict=True)]
    assert 0.0 < drop[0] < 0.01 and all(0.01 < d < 0.05 for d in drop[1:]), drop
