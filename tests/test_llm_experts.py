"""Expert-parallel all-to-alls (costs.llm.experts), expert weights under expert parallelism, and
the DeepSeek-V3 and Qwen3 MoE runs they are checked on.

Sources: Lepikhin et al. 2020 (arXiv:2006.16668, §2.2) for the dispatch and combine; the
DeepSeek-V3 Technical Report (arXiv:2412.19437 v2) §2.1.2 and §4.2 (node-limited routing, at most
4 nodes), §3.2.1 (DualPipe overlaps the all-to-alls with the paired chunk's compute), §3.3.2-3.3.3
(FP8 dispatch in 1 x 128 tiles, BF16 combine), §3.5.1 (20 of the H800's 132 SMs communicate).
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest

from costs.llm import experts
from costs.llm import shard as llm_shard
from costs.rules import MODERN
from planner import catalog
from planner.calibrate import measurements
from planner.calibrate.fitting import predict
from planner.calibrate.predict import RunTable
from planner.metrics.model import default_profile

S, H, K = 4096, 2048, 8  # tokens, hidden, top-k of the hand-built plans below
NV, NV_LAT, IB, IB_LAT = 150e9, 1e-6, 50e9, 5e-6


def _ctx(ep, per_node=8, over=False, fp8=False, elem=2.0, t=1):
    one = lambda v, dt=float: np.array([v], dtype=dt)  # noqa: E731
    return SimpleNamespace(
        e=one(ep), t=one(t), per_node=one(per_node), hidden=one(S * H * elem), elem=one(elem),
        intra_bw=one(NV), intra_lat=one(NV_LAT), net_bw=one(IB), net_lat=one(IB_LAT),
        ep_overlap=one(over, bool), fp8=one(fp8, bool),
    )  # fmt: skip


def _a2a(ep, compute=0.0, nics=None, moe=None, full=False, **kw) -> float:
    moe = moe or {"n_experts": 128, "top_k": K}
    return float(experts.all_to_all_s(_ctx(ep, **kw), moe, np.array([full]), compute, nics)[0])


def test_inside_a_node_four_all_to_alls_move_k_copies_to_the_other_ranks():
    """Lepikhin et al. §2.2: dispatch and combine forward and backward, each token's k copies,
    (ep - 1)/ep of them to other GPUs; full recomputation repeats the forward pair."""
    one = S * H * 2.0 * K * 7 / 8 / NV + 7 * NV_LAT
    assert _a2a(8) == pytest.approx(4 * one)
    assert _a2a(8, full=True) == pytest.approx(6 * one)
    assert _a2a(1) == 0.0


@pytest.mark.parametrize("nics", [None, 8, 4])
def test_an_ep_group_wider_than_a_node_sends_over_the_node_ports(nics):
    """EP 16 over two nodes of 8: half of a token's copies leave the node and share its ports;
    NVLink carries the copies to the other 7 ranks of the node; the slower link binds."""
    share = 8 / (nics or 8)
    net = S * H * 2.0 * K * (1 / 2) * share / IB + 8 * IB_LAT
    intra = S * H * 2.0 * K * (7 / 16) / NV + 7 * NV_LAT
    assert _a2a(16, nics=nics) == pytest.approx(4 * max(net, intra))
    assert net > intra


def test_remote_nodes_a_token_reaches_and_the_node_limit():
    """k = 8 experts spread over 8 nodes reach 8 (1 - (7/8)^8) = 5.25 nodes; DeepSeek-V3 caps
    them at 4 (§4.2, M = 4): 4 x 7/8 = 3.5 remote nodes on average."""
    assert experts.remote_nodes(8, 8) == pytest.approx(7 * (1 - (7 / 8) ** 8))
    assert experts.remote_nodes(8, 8, cap=4) == pytest.approx(3.5)
    assert experts.remote_nodes(8, 1) == 0.0
    moe = {"groups": 8, "group_top_k": 4}  # n_group, topk_group of DeepSeek-V3's config.json
    assert experts.node_cap(moe, 8) == 4 and experts.node_cap(moe, 16) == 8 and experts.node_cap(moe, 2) == 2
    assert experts.node_cap({"n_experts": 8}, 8) is None


def test_overlapped_all_to_alls_send_once_per_node_fp8_dispatch_and_hide_behind_compute():
    """DeepEP-style sends: one copy per remote node (capped), forwarded over NVLink; under fp8 the
    dispatches carry 1 byte and a fp32 scale per 128 values, the combines 2 bytes. Behind compute
    that outlasts them only the SMs they hold are charged: compute x s / (1 - s), s = 20/132."""
    moe = {"n_experts": 256, "top_k": K, "groups": 8, "group_top_k": 4}
    remote = 3.5  # 8 nodes, at most 4 reached

    def one(elem):
        net = S * H * elem * remote / IB + 7 * IB_LAT
        intra = S * H * elem * (K * 7 / 64 + remote) / NV + 7 * NV_LAT
        return max(net, intra)

    total = 2 * (one(1 + 4 / 128) + one(2.0))
    assert _a2a(64, moe=moe, over=True, fp8=True) == pytest.approx(total)
    assert _a2a(64, moe=moe, over=True) == pytest.approx(4 * one(2.0))  # bf16: no FP8 dispatch
    s = 20 / 132
    assert _a2a(64, compute=1.0, moe=moe, over=True, fp8=True) == pytest.approx(s / (1 - s))
    assert _a2a(64, compute=1e-6, moe=moe, over=True, fp8=True) == pytest.approx(total - 1e-6)


def test_a_gpu_reads_and_writes_the_weights_of_its_own_experts_only():
    """At EP 64 a DeepSeek-V3 GPU holds 256/64 = 4 routed experts of 3 x 7168 x 2048 weights:
    252 fewer experts' weights move in each pass than at EP 1; the FLOPs do not change."""
    m = catalog.net_costs("deepseek-v3", "modern").net.meta["model"]
    whole, split = llm_shard.shard(m, 1, MODERN), llm_shard.shard(m, 1, MODERN, 64)
    moe = int(np.flatnonzero(whole.terms.act_a[:, 0] != split.terms.act_a[:, 0])[0])
    assert np.all(whole.terms.act_a[moe] - split.terms.act_a[moe] == 252 * 3 * 7168 * 2048)
    assert np.array_equal(whole.terms.tc, split.terms.tc)


def test_the_deepseek_v3_zoo_net_has_671b_parameters_and_37b_activated():
    """Model card (README of github.com/deepseek-ai/DeepSeek-V3 at 9b4e978): 671B total, 37B
    activated; exact counts as tests/test_hf_architectures.py derives them from config.json. The
    zoo net trains the multi-token-prediction module too (11,610,067,968 more parameters)."""
    from costs.specs import layers, transformer

    net = catalog.net_costs("deepseek-v3", "modern").net
    main = [s for s in net.layers if not s.name.startswith("mtp")]
    total = sum(layers.params(s) for s in main)
    idle = sum(layers.params(s) - transformer.moe_active_params(s) for s in main if s.type == "MoE")
    assert (total, total - idle) == (671_026_404_352, 37_552_282_624)
    assert sum(layers.params(s) for s in net.layers) - total == 11_610_067_968
    assert net.meta["training"]["tokens"] == 14_800_000_000_000


@pytest.fixture(scope="module")
def moe_runs() -> list[measurements.Run]:
    runs = [
        r for p in measurements.shipped((*measurements.SHIPPED, "scale.csv")) for r in measurements.load(p)
    ]
    return [r for r in runs if r.net in ("deepseek-v3", "qwen3-30b-a3b")]


def _ratio(runs, source) -> float:
    (run,) = [r for r in runs if r.source == source]
    return float(predict(RunTable([run], "modern"), default_profile())[0] / run.samples_per_s)


def test_the_deepseek_v3_run_has_its_published_layout(moe_runs):
    """§3.2: PP 16, EP 64 over 8 nodes, ZeRO-1, no TP, on 2,048 H800; §4.2: 15,360 sequences of
    4,096 tokens; the value is 14.8T tokens / 2.664M GPU-hours = 1,543 tokens/s per GPU."""
    (r,) = [r for r in moe_runs if r.net == "deepseek-v3"]
    assert (r.gpus, r.tp, r.pp, r.ep, r.zero, r.device, r.precision) == (2048, 1, 16, 64, 1, "H800", "fp8")
    assert r.gpus // r.pp * r.batch_per_gpu * r.accumulation == 15360 and r.seq_len == 4096
    assert r.ep * 1 > 8 and r.ep_overlap  # spans nodes of 8; HAI-LLM overlaps the all-to-alls
    assert 14.8e12 / (2.664e6 * 3600) == pytest.approx(r.value, rel=5e-4)


def test_deepseek_v3_predicted_against_its_published_rate(moe_runs):
    """Predicted / measured 1.24 (2026-11-25, shipped profile; the run is in no fit), inside the
    issue's 25%, with the run's DualPipe schedule (``pp_schedule dualpipe``) and its
    multi-token-prediction module costed. Compute binds; the all-to-alls hide behind it and cost
    the 20 SMs they hold. Not modelled, all slowing the measured run: restarts, evaluation and
    checkpoints over two months, the batch ramp, expert load imbalance. The same run under 1F1B
    predicts 1.05: the last stage then holds the LM head and the module (4.3 layers' time) and
    some middle stages 5 of the 57 layers left, where DualPipe pairs the first stage with the
    last on each GPU. Without the module: 1.30 (1F1B). Exposed all-to-alls (a plain all-to-all,
    one copy per expert) under 1F1B would predict 0.61."""
    ratio = _ratio(moe_runs, "deepseek-v3-report-2024-h800")
    assert 1.15 < ratio < 1.25
    (run,) = [r for r in moe_runs if r.net == "deepseek-v3"]
    one_f = _ratio([dataclasses.replace(run, pp_schedule="1f1b")], run.source)
    assert 0.95 < one_f < 1.15


def test_qwen3_30b_a3b_runs_with_expert_weights_and_node_crossing(moe_runs):
    """Qwen3-30B-A3B (llm.csv): Megatron-Bridge FP8 on 16 H100 (EP 16 over two nodes) moved from
    0.56 to 1.00 (each GPU reads its 8 experts' weights, not all 128; half of a token's copies
    stay inside the node); NeMo AutoModel on 8 H100 (batch 4, one node) from 0.80 to 0.79."""
    assert 0.92 < _ratio(moe_runs, "megatron-bridge-26.04.01-h100-fp8") < 1.12
    assert 0.72 < _ratio(moe_runs, "nemo-automodel-2025-10-h100-bf16") < 0.88


def test_ep_overlap_option_estimate_and_errors(capsys):
    """--ep-overlap hides the all-to-alls of a plan whose EP group spans two nodes; it needs
    --ep 2 or more, and optimize's on/off choices are checked: one line, exit 2."""
    from planner.cli import main

    base = "estimate qwen3-30b-a3b --device H100_SXM --workers 16 --gpus-per-node 8 --network ib_ndr "
    base += "--ep 16 --microbatch 1 --global-batch 1024 --precision fp8 --zero 1 --format json"
    rows = []
    for extra in ([], ["--ep-overlap"]):
        assert main([*base.split(), *extra]) == 0
        rows.append(json.loads(capsys.readouterr().out)[0])
    plain, hidden = rows
    assert (plain["ep_overlap"], hidden["ep_overlap"]) == ("off", "on")
    assert hidden["ep_comm_ms"] < plain["ep_comm_ms"] and hidden["total_ms"] < plain["total_ms"]
    assert main(["estimate", "qwen3-30b-a3b", "--ep-overlap"]) == 2
    err = capsys.readouterr().err
    assert "--ep-overlap overlaps the expert all-to-alls: it needs --ep 2 or more, got --ep 1" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["optimize", "qwen3-30b-a3b", "--budget", "16gpus", "--ep-overlap", "maybe"]) == 2
    assert "--ep-overlap 'maybe' (valid: on, off, or on,off)" in capsys.readouterr().err
    assert main([*base.split(), "--ep-overlap", "--stack", "fsdp", "--zero", "3"]) == 2
    assert "--stack fsdp has no expert all-to-all overlap (--ep-overlap)" in capsys.readouterr().err


def test_megatron_launch_maps_ep_overlap_and_refuses_what_megatron_core_refuses(tmp_path):
    """Megatron-LM at d98e8a6: --overlap-moe-expert-parallel-comm (model_parallel_config.py) with
    the flex dispatcher on DeepEP; TransformerConfig asserts virtual pipeline stages when PP > 1
    and no full recomputation; Megatron-Core's own config accepts the arguments."""
    from test_launch import llm
    from test_launch_tools import _mcore, files_for, need, tokens

    from planner.launch.registry import TARGETS

    kw = dict(net="mixtral-8x7b", gpus=64, tp=1, ep=8, ep_overlap=True, zero=1, microbatch=1, sp=False)
    plan = llm(**kw, pp=1, interleave=1, recompute="none")
    megatron = TARGETS["megatron"]
    assert megatron.refusal(plan) is None
    args = megatron.arguments(plan)
    assert "--overlap-moe-expert-parallel-comm" in args
    assert args[args.index("--moe-token-dispatcher-type") + 1] == "flex"
    assert args[args.index("--moe-flex-dispatcher-backend") + 1] == "deepep"
    assert "virtual_pipeline_model_parallel_size must be specified" in megatron.refusal(
        llm(**kw, pp=2, interleave=1, recompute="none")
    )
    assert "disable full recomputation" in megatron.refusal(llm(**kw, pp=1, interleave=1, recompute="full"))
    assert "no expert all-to-all overlap setting" in TARGETS["nemo"].refusal(plan)
    need("megatron.core")
    config, _ = _mcore(tokens(files_for(plan, "megatron", tmp_path) / "megatron_args.txt"), plan)
    assert config.overlap_moe_expert_parallel_comm and config.moe_flex_dispatcher_backend == "deepep"
