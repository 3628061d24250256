"""Pipeline schedules (costs.llm.pipeline): 1F1B, zero-bubble ZB1P, DualPipe and DualPipeV.

Bubbles are the table of github.com/deepseek-ai/DualPipe (README at
3da1bbea53606543d7f5f232338fc58096db30e3, "Pipeline Bubbles and Memory Usage Comparison", read
2026-11-25): 1F1B (PP-1)(F+B); ZB1P (PP-1)(F+B-2W); DualPipe (PP/2-1)(F&B+B-3W) with 2x
parameters and PP+1 activations; DualPipeV the same over PP stages on PP/2 GPUs, 1x parameters.
"""

from __future__ import annotations

import dataclasses
import json
import shlex

import numpy as np
import pytest

from costs.llm import pipeline
from planner.cli import main

S = np.array


def _rows(values: tuple) -> np.ndarray:
    """A :class:`costs.llm.pipeline.Kinds` field as a (kinds, plans) array."""
    return np.vstack(np.broadcast_arrays(*values))


@pytest.mark.parametrize(
    "schedule, p, v, want",
    [
        # per microbatch F = 1, B = 2 (W = 1 of it), no communication: per_mb = 3
        ("1f1b", 8, 1, 7 * 3.0),  # (p - 1)(F + B)
        ("1f1b", 8, 2, 7 * 3.0 / 2),  # interleaved: / v (Narayanan et al. 2021, §2.2.2)
        ("zb1p", 8, 1, 7 * (3.0 - 2.0)),  # (p - 1)(F + B - 2W)
        ("dualpipe", 8, 1, 3 * (3.0 + 2.0 - 3.0)),  # (p/2 - 1)(F&B + B - 3W), F&B = F + B
        ("dualpipe", 2, 1, 0.0),  # two GPUs: no bubble
        ("dualpipev", 8, 1, 7 * (3.0 + 2.0 - 3.0) / 2),  # 16 chunks of half the work: (16/2 - 1)(...) / 2
    ],
)
def test_bubbles_are_the_published_formulas(schedule, p, v, want):
    code = S([pipeline.SCHEDULES.index(schedule)])
    got = pipeline.bubble(code, S([float(p)]), S([float(v)]), S([3.0]), S([2.0]), S([1.0]))
    assert float(got[0]) == pytest.approx(want)


def test_zero_bubble_and_dualpipe_never_idle_longer_than_1f1b():
    """Over random stage times (W at most the backward): ZB1P <= 1F1B, DualPipeV <= 1F1B."""
    rng = np.random.default_rng(0)
    n = 1000
    p = rng.integers(2, 65, n).astype(float)
    f = rng.uniform(0.1, 2, n)
    b = f * rng.uniform(1.5, 2.5, n)
    w = b * rng.uniform(0.2, 0.6, n)
    per_mb = f + b
    bubble = {
        s: pipeline.bubble(np.full(n, i), p, np.ones(n), per_mb, b, w)
        for i, s in enumerate(pipeline.SCHEDULES)
    }
    assert (bubble["zb1p"] <= bubble["1f1b"] + 1e-12).all()
    assert (bubble["dualpipev"] <= bubble["1f1b"] + 1e-12).all()
    assert (bubble["dualpipe"] <= bubble["dualpipev"] + 1e-12).all()


def test_deepseek_v3_like_balance_per_schedule():
    """61 layers on 16 GPUs with an LM head and a multi-token-prediction module worth 4.3 layers
    (DeepSeek-V3's shape): 1F1B gives the last stage no layer and some middle stages 5 of the
    57 left; DualPipe pairs the first stage with the last on a GPU, each GPU runs half of each
    per microbatch (the head burden halves, steps of half a layer): the ends 2 + 2.15, the
    middle 4.5; DualPipeV keeps both ends on GPU 0 in whole layers: 0 + 4.3, the rest 5."""
    one = S([1.0])
    args = (61, S([16.0]), one, S([120.0]), one, S([0.0]), S([4.3]))
    k = {s: pipeline.kinds(S([i]), *args) for i, s in enumerate(pipeline.SCHEDULES)}
    assert [float(x) for x in _rows(k["1f1b"].blocks)[:, 0]] == [4.0, 0.0, 5.0]
    assert [float(x) for x in _rows(k["dualpipe"].blocks)[:2, 0]] == [2.0, 4.5]
    assert (
        float(_rows(k["dualpipe"].head)[0, 0]) == 0.5
        and float(_rows(k["dualpipe"].param_blocks)[1, 0]) == 9.0
    )  # 2 copies
    assert [float(x) for x in _rows(k["dualpipev"].blocks)[:2, 0]] == [0.0, 5.0]
    assert float(_rows(k["dualpipev"].param_blocks)[1, 0]) == 5.0  # one copy
    assert (
        float(_rows(k["dualpipe"].flight)[1, 0]) == 17.0 and float(_rows(k["dualpipev"].flight)[1, 0]) == 16.5
    )  # PP + 1


def test_binding_kind_is_argmax_ties_and_nan_included():
    # the first of the largest loads binds, a NaN load counting as largest (np.argmax's rule)
    rng = np.random.default_rng(0)
    loads = [rng.integers(0, 3, 5000).astype(float) for _ in range(3)]  # many ties
    for row, every in zip(loads, (7, 11, 13), strict=True):
        row[::every] = np.nan
    assert (pipeline.binding(loads) == np.argmax(np.vstack(loads), axis=0)).all()
    first, second, third = S([1.0, 5.0, np.nan]), S([2.0, 5.0, 0.0]), S([2.0, 1.0, np.nan])
    assert pipeline.binding([first, second, third]).tolist() == [1, 0, 0]


def test_runnable_rules():
    code = {s: i for i, s in enumerate(pipeline.SCHEDULES)}
    rows = [  # schedule, p, v, microbatches, runnable
        ("1f1b", 7, 2, 3, True),
        ("zb1p", 7, 1, 3, True),
        ("dualpipe", 8, 1, 16, True),
        ("dualpipe", 7, 1, 16, False),  # odd
        ("dualpipe", 8, 1, 15, False),  # fewer than 2p microbatches
        ("dualpipev", 7, 1, 14, True),
        ("dualpipev", 8, 2, 16, False),  # its V is its own interleaving
    ]
    for s, p, v, m, ok in rows:
        assert bool(pipeline.runnable(S([code[s]]), S([p]), S([v]), S([m]))[0]) == ok, (s, p, v, m)


def _estimate(capsys, *extra) -> dict:
    base = (
        "estimate llama3-70b --device H100_SXM --workers 64 --gpus-per-node 8 --network ib_ndr --tp 4 --pp 8 "
    )
    base += "--sp --zero 2 --stack fsdp --microbatch 1 --global-batch 128 --format json"
    assert main([*base.split(), *extra]) == 0
    return json.loads(capsys.readouterr().out)[0]


def _breakdowns():
    """One llama3-70b plan (64 H100, TP 4, PP 8, ZeRO 2, 16 microbatches) under each schedule."""
    from costs.hardware import PRECISIONS
    from costs.model import evaluate, plans
    from planner import catalog

    costs = catalog.net_costs("llama3-70b", "modern")
    devices, links = catalog.device_table(["H100_SXM"]), catalog.link_table(["ib_ndr", "nvlink4"])
    eff = catalog.efficiency(["H100_SXM"], ["ib_ndr", "nvlink4"])
    p = plans(
        costs.n_layers, device=0, network=0, intra_link=1, precision=PRECISIONS.index("bf16"), batch=1,
        workers=64, gpus_per_node=8, tp=4, pp=8, sp=True, zero=2, accumulation=16, scheme=3,
        schedule=np.arange(len(pipeline.SCHEDULES)),
    )  # fmt: skip
    r = evaluate(costs, p, devices, links, efficiency=eff)
    return {s: {k: float(getattr(r, k)[i]) for k in ("bubble", "memory", "forward", "pp_comm", "total")}
            for i, s in enumerate(pipeline.SCHEDULES)}  # fmt: skip


def test_evaluator_schedules_against_1f1b():
    """One plan, four schedules: ZB1P idles less at 1F1B's memory and compute; DualPipeV idles
    less still and holds one copy of the weights; DualPipe holds two (more memory), idles least
    and hides its sends."""
    r = _breakdowns()
    assert r["zb1p"]["bubble"] < r["1f1b"]["bubble"]
    assert (r["zb1p"]["memory"], r["zb1p"]["forward"]) == (r["1f1b"]["memory"], r["1f1b"]["forward"])
    assert r["dualpipev"]["bubble"] < r["1f1b"]["bubble"]
    assert r["dualpipe"]["bubble"] < r["dualpipev"]["bubble"]
    assert r["dualpipe"]["memory"] > r["1f1b"]["memory"]
    assert r["dualpipe"]["pp_comm"] == 0.0 < r["1f1b"]["pp_comm"]


def test_estimate_reports_the_schedule(capsys):
    r = {s: _estimate(capsys, "--pp-schedule", s) for s in ("1f1b", "zb1p", "dualpipev")}
    assert all(x["pp_schedule"] == s for s, x in r.items())
    assert r["zb1p"]["bubble_ms"] < r["1f1b"]["bubble_ms"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--pp-schedule", "gpipe"], "--pp-schedule 'gpipe' (valid: 1f1b, zb1p, dualpipe, dualpipev)"),
        (
            ["--pp", "1", "--pp-schedule", "zb1p"],
            "--pp-schedule zb1p schedules a pipeline: it needs --pp 2 or more",
        ),
        (
            ["--pp-schedule", "dualpipev", "--global-batch", "8"],
            "needs --interleave 1, at least 2 x pp = 16 microbatches",
        ),
        (
            ["--pp-schedule", "dualpipe"],
            "--stack fsdp has no dualpipe pipeline schedule (valid: 1f1b, zb1p, dualpipev",
        ),
        (
            ["--stack", "megatron", "--pp-schedule", "zb1p", "--zero", "1"],
            "--stack megatron has no zb1p pipeline schedule",
        ),
    ],
)
def test_bad_schedules_are_one_line(capsys, extra, message):
    base = "estimate llama3-70b --device H100_SXM --workers 64 --gpus-per-node 8 --tp 4 --pp 8 --sp --zero 2 "
    base += "--stack fsdp --microbatch 1 --global-batch 128"
    assert main([*base.split(), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_optimize_searches_schedules_and_reproduces(capsys):
    """--pp-schedule on optimize is a searched axis; the stack keeps what it runs (megatron only
    1F1B); the Reproduce line re-scores the answer exactly."""
    args = "optimize llama3-70b --budget 64gpus --gpu H100_SXM --network ib_ndr --format json".split()
    assert main([*args, "--stack", "fsdp", "--pp", "4,8", "--pp-schedule", "1f1b,zb1p,dualpipev"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best["pp_schedule"] in ("zb1p", "dualpipev") and best["pp"] > 1
    line = shlex.split(best["estimate_command"])
    assert line[line.index("--pp-schedule") + 1] == best["pp_schedule"]
    assert main([*line[1:], "--format", "json"]) == 0
    again = json.loads(capsys.readouterr().out)[0]
    assert again["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-9)
    assert (
        main([*args, "--stack", "megatron", "--pp", "4,8", "--pp-schedule", "zb1p"]) != 0
    )  # megatron: no ZB1P
    capsys.readouterr()


def test_launch_maps_schedules_to_torchtitan_and_megatron_refuses(tmp_path):
    """torchtitan names torch.distributed.pipelining's schedules (InterleavedZeroBubble for ZB1P,
    DualPipeV with two stages a GPU); torchtitan's ConfigManager takes them; Megatron refuses."""
    from planner.launch.plan import LaunchPlan
    from planner.launch.registry import TARGETS
    from planner.launch.target import Refused
    from planner.launch.torchtitan import _parallelism

    model = {"n_layers": 80}
    base = LaunchPlan(
        net="llama3-70b", gpus=64, gpus_per_node=8, device="H100_SXM", network="ib_ndr", precision="bf16",
        scheme="ring", microbatch=1, accumulation=16, global_batch=128, tp=4, pp=8, sp=True, zero=2, model=model,
    )  # fmt: skip
    zb = _parallelism(dataclasses.replace(base, pp_schedule="zb1p"))
    v = _parallelism(dataclasses.replace(base, pp_schedule="dualpipev"))
    assert zb["pipeline_parallel_schedule"] == "InterleavedZeroBubble"
    assert v["pipeline_parallel_schedule"] == "DualPipeV" and v["pipeline_parallel_layers_per_stage"] == 5
    with pytest.raises(
        Refused, match="--target megatron cannot run this plan: it runs no zb1p pipeline schedule"
    ):
        TARGETS["megatron"].check(dataclasses.replace(base, pp_schedule="zb1p", zero=1))


@pytest.mark.parametrize(
    "schedule, name", [("1f1b", "1F1B"), ("zb1p", "InterleavedZeroBubble"), ("dualpipev", "DualPipeV")]
)
def test_torchtitan_config_manager_reads_the_schedule(tmp_path, schedule, name):
    """The torchtitan target's options for a pipeline plan (1F1B, ZB1P, DualPipeV) parse with
    torchtitan's own ConfigManager (0.3) and ParallelDims, and torch.distributed.pipelining knows
    the schedule. torchtitan 0.3 refuses CUDA graphs with a pipeline: the options turn them off."""
    pytest.importorskip("torchtitan", reason="torchtitan is not installed: pip install '.[launch]'")
    from torch.distributed.pipelining.schedules import get_schedule_class
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import ParallelDims

    from planner.launch.plan import LaunchPlan
    from planner.launch.registry import emit, parse_targets
    from planner.launch.target import LaunchOptions
    from planner.launch.torchtitan import CONFIGS

    model = catalog_model("llama3-70b")
    plan = LaunchPlan(
        net="llama3-70b", gpus=64, gpus_per_node=8, device="H100_SXM", network="ib_ndr", precision="bf16",
        scheme="ring", microbatch=1, accumulation=16, global_batch=128, tp=4, pp=8, sp=True, zero=2,
        model=model, seq_len=model["seq_len"], pp_schedule=schedule,
    )  # fmt: skip
    files = emit(plan, parse_targets("torchtitan"), LaunchOptions())
    args = shlex.split(files["torchtitan_args.txt"])
    module, config = CONFIGS[plan.net]
    cfg = ConfigManager().parse_args(["--module", module, "--config", config, *args])
    assert cfg.parallelism.pipeline_parallel_schedule == name
    assert get_schedule_class(name) is not None
    assert ParallelDims.from_config(cfg.parallelism, world_size=plan.gpus).world_size == plan.gpus


def catalog_model(net: str) -> dict:
    from planner import catalog

    return catalog.net_spec(net)["model"]


def test_optimize_target_keeps_to_the_schedules_the_engine_runs(capsys):
    """--target narrows --pp-schedule to what the engine runs (Megatron-Core: 1F1B, refused in one
    line otherwise) and, unasked, searches every schedule it has (torchtitan: ZB1P, DualPipeV)."""
    base = ["optimize", "llama3-70b", "--budget", "64gpus", "--gpu", "H100_SXM", "--format", "json"]
    assert main([*base, "--target", "megatron", "--pp-schedule", "zb1p"]) == 2
    err = capsys.readouterr().err
    assert "--pp-schedule zb1p: --target megatron runs none of it (it takes: 1f1b)" in err
    assert len(err.strip().splitlines()) == 1
    assert main([*base, "--target", "torchtitan", "--stack", "fsdp", "--pp", "4,8"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best["pp_schedule"] in ("zb1p", "dualpipev")
