"""The LLM evaluator (costs/llm/evaluator.py): memory per Korthikanti et al. 2022 and ZeRO, the pipeline
schedule, parameter and FLOP conservation over every zoo transformer, and Megatron-LM's GPT-3
175B run reproduced with the shipped calibration."""

from __future__ import annotations

import numpy as np
import pytest

from costs.hardware import PRECISIONS
from costs.llm import evaluator as llm
from costs.llm import memory as llm_memory
from costs.llm import pipeline as llm_pipeline
from costs.llm import shard as llm_shard
from costs.model import evaluate, plans
from costs.modern import roofline
from costs.rules import MODERN
from planner import catalog
from planner.metrics.model import CostModel

TRANSFORMERS = ("bert-large", "gpt2-xl", "gpt3-175b", "llama3-8b", "llama3-70b", "mixtral-8x7b")
BF16 = PRECISIONS.index("bf16")


def _gpt3_dims(seq=2048):
    return llm_shard.dims(dict(catalog.net_costs("gpt3-175b", "modern").net.meta["model"], seq_len=seq))


@pytest.mark.parametrize("t", [1, 2, 8])
def test_activation_memory_is_korthikanti_eq_2_for_gpt3(t):
    """Korthikanti et al. 2022 (arXiv:2205.05198) §4.2: per layer, 16-bit activations,
    sbh (10 + 24/t + 5as/(ht)) with tensor parallelism, sbh (34/t + 5as/(ht)) with sequence
    parallelism as well, 34 sbh/t with selective recomputation, 2 sbh with full."""
    m = dict(_gpt3_dims(), dropout=True)  # the paper's GPT-3 layer has dropout
    s, b, h, a = 2048, 1, 12288, 96
    sbh = s * b * h
    got = lambda sp, rc: float(llm_memory.layer_activations(m, b, 2.0, t, sp, rc))  # noqa: E731
    assert got(False, 0) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert got(True, 0) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
    assert got(True, 1) == pytest.approx(sbh * 34 / t)
    assert got(False, 1) == pytest.approx(sbh * (10 + 24 / t))
    assert got(False, 2) == pytest.approx(2 * sbh)
    assert got(True, 2) == pytest.approx(2 * sbh / t)
    # without dropout: no masks (2 sbh) and no dropout output or mask of the scores (3as^2b)
    m["dropout"] = False
    assert got(False, 0) == pytest.approx(sbh * (8 + 24 / t + 2 * a * s / (h * t)))


def test_model_states_are_16_bytes_per_parameter_under_adam_and_zero_shards_them():
    """Rajbhandari et al. 2020 (ZeRO, arXiv:1910.02054) §3.1 and Figure 1: mixed-precision Adam
    keeps 2 + 2 + 12 = 16 bytes per parameter; stage 1 shards the 12, stage 2 also the
    gradients' 2, stage 3 also the weights' 2 (Nd = 64 in their figure: 4 + 12/64, 2 + 14/64,
    16/64)."""
    one = lambda zero, dp: float(llm_memory.state_bytes(1.0, 2.0, "adam", np.array(zero), dp))  # noqa: E731
    assert one(0, 64) == 16.0
    assert one(1, 64) == pytest.approx(4 + 12 / 64)
    assert one(2, 64) == pytest.approx(2 + 14 / 64)
    assert one(3, 64) == pytest.approx(16 / 64)
    assert float(llm_memory.state_bytes(1.0, 4.0, "adam", np.array(0), 1)) == 16.0  # fp32: 4+4+8
    assert float(llm_memory.state_bytes(1.0, 2.0, "sgd", np.array(0), 1)) == 8.0


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_shards_hold_the_parameters(name):
    """t shards hold every parameter once, except the norms (and biases) every shard keeps;
    every degree that divides the heads (GPT-2 XL's 25 heads: only 1)."""
    costs = catalog.net_costs(name, "modern")
    m = llm_shard.dims(costs.net.meta["model"])
    degrees = [t for t in (1, 2, 4, 8) if m["n_heads"] % t == 0]
    for tp in degrees:
        sh = llm_shard.shard(costs.net.meta["model"], tp, MODERN)
        total = sh.params[0] + m["n_layers"] * sh.params[1] + sh.params[2]
        if tp == 1:
            assert total == costs.total_params
        else:
            assert costs.total_params / tp <= total <= costs.total_params / tp * 1.02 + 1e6


def _one_gpu(name, **cols):
    costs = catalog.net_costs(name, "modern")
    devices = catalog.device_table(["H100_SXM"])
    links = catalog.link_table(["ib_ndr", "nvlink4"])
    p = plans(costs.n_layers, device=0, network=0, intra_link=1, precision=BF16, **cols)
    return costs, p, devices, links


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_one_gpu_compute_equals_the_layer_graph(name):
    """TP 1, PP 1: forward and backward equal the modern evaluator's sum over every layer of the
    whole net (one block times the layers is the same graph)."""
    from costs.modern import evaluator as modern

    costs, p, devices, links = _one_gpu(name, batch=2, workers=1, scheme=3)
    eff = catalog.efficiency(["H100_SXM"], ["ib_ndr", "nvlink4"])
    a = llm.evaluate(costs, p, devices, links, efficiency=eff)
    b = modern.evaluate(costs, p, devices, links, efficiency=eff)
    assert a.forward[0] == pytest.approx(b.forward[0], rel=1e-9)
    assert a.backward[0] == pytest.approx(b.backward[0], rel=1e-9)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_model_flops_are_the_whole_net_training_flops(name):
    costs, p, devices, links = _one_gpu(name, batch=3, workers=8, gpus_per_node=8, tp=2, pp=2, scheme=3)
    r = evaluate(costs, p, devices, links)
    t = roofline.terms(costs)
    per_sample = float((t.tc + t.vec).sum())
    assert r.model_flops[0] == pytest.approx(per_sample * 3 * 2, rel=1e-9)  # 3 per microbatch x dp 2


def test_full_recomputation_adds_one_forward_of_the_blocks():
    costs, p, devices, links = _one_gpu("gpt3-175b", batch=1, workers=8, gpus_per_node=8, recompute=[0, 2])
    r = evaluate(costs, p, devices, links)
    sh = llm_shard.shard(costs.net.meta["model"], 1, MODERN)
    extra = r.hardware_flops[1] - r.model_flops[1]
    assert extra == pytest.approx(96 * sh.fwd_flops[llm_shard.BLOCK] * 8, rel=1e-9)
    assert r.hardware_flops[0] == r.model_flops[0]
    assert r.backward[1] > r.backward[0]
    assert r.memory[1] < r.memory[0]


@pytest.mark.parametrize("pp", [2, 4, 8])
@pytest.mark.parametrize("m", [4, 16, 64])
def test_1f1b_bubble_is_p_minus_1_microbatch_times(pp, m):
    """Narayanan et al. 2021 §2.2.1: the 1F1B bubble is (p - 1) microbatch times, a fraction
    (p - 1) / m of the m microbatches; interleaving v stages divides it by v."""
    costs, p, devices, links = _one_gpu(
        "gpt3-175b", batch=1, workers=8 * pp, gpus_per_node=8, tp=8, pp=pp, accumulation=m, interleave=[1, 2]
    )
    r = evaluate(costs, p, devices, links)
    busy = r.forward + r.backward + r.act_comm  # m microbatch times of the binding stage
    assert r.bubble[0] == pytest.approx((pp - 1) / m * busy[0], rel=1e-9)
    assert r.bubble[1] == pytest.approx(r.bubble[0] / 2, rel=0.02)  # sends differ a little


def test_pipeline_stages_cover_every_layer():
    for L in (24, 80, 96):
        for p in (1, 2, 3, 4, 16):
            unit, emb, head = np.array([1.0]), np.array([0.3]), np.array([2.5])
            n1, nl, mid = llm_pipeline._stages(L, np.array([float(p)]), unit, emb, head)
            assert (n1 + nl + mid * max(p - 2, 0) if p > 1 else n1)[0] >= L
            if p > 1:
                assert n1[0] + nl[0] + mid[0] * (p - 2) - L < max(p - 2, 1)


def test_megatron_gpt3_175b_plan_fits_and_its_bubble_is_15_of_192():
    """Megatron-LM's GPT-3 175B run (TP 8, PP 16, 1,024 A100s, batch 1,536 of 2,048 tokens,
    microbatch 1, full recomputation) fits in 80 GB, and its 1F1B bubble is 15 of the 192
    microbatch times (its throughput against the published one: test_measurements_llm.py)."""
    from planner.estimate.estimate import estimate
    from planner.request.estimate import EstimateRequest

    rec = estimate(
        EstimateRequest(
            net="gpt3-175b",
            device="A100_80GB",
            network="ib_hdr",
            workers=(1024,),
            gpus_per_node=8,
            schemes=("ring",),
            tp=8,
            pp=16,
            microbatch=1,
            global_batch=1536,
            precision="bf16",
            recompute="full",
        )
    )[0]
    assert rec["fits_memory"] and rec["accumulation"] == 192 and rec["dp"] == 8
    assert rec["bubble_ms"] == pytest.approx(15 / 192 * (rec["total_ms"] - rec["bubble_ms"]), rel=0.05)


def test_costs_rules_without_llm_columns_are_unchanged():
    """CNNs never reach the LLM evaluator; their plans keep the neutral model-parallel columns."""
    costs = catalog.net_costs("resnet50", "modern")
    assert not llm.applies(costs)
    assert llm.applies(catalog.net_costs("bert-large", "modern"))
    assert CostModel.of("modern").modern


def test_a_mixture_of_experts_is_tiled_by_its_expert_gemms():
    """The MoE layer's GEMM shape (which sets its tile and wave utilisation) is its largest GEMM,
    the experts' up projection (tokens x top-k rows, 2 d_ff columns for SwiGLU), not the router's
    8 columns (which put the layer at a few per cent of peak before)."""
    m = catalog.net_costs("mixtral-8x7b", "modern").net.meta["model"]
    sh = llm_shard.shard(m, 2, MODERN)
    moe = int(np.flatnonzero(sh.terms.tc[:, 0] == sh.terms.tc[:, 0].max())[0])
    assert sh.terms.gm_n[moe, 0] == m["seq_len"] * m["moe"]["top_k"]
    assert sh.terms.gn[moe, 0] == 2 * m["d_ff"] // 2


def test_overlapped_tensor_parallel_communication_is_hidden_behind_the_split_compute():
    """--tp-overlap (Megatron-Core's --tp-comm-overlap): the TP collectives of a block are
    exposed only beyond its split compute, so never more than without overlap, and the rest of
    the plan is unchanged."""
    costs, p, devices, links = _one_gpu(
        "gpt3-175b",
        batch=1,
        workers=64,
        gpus_per_node=8,
        tp=8,
        pp=8,
        accumulation=16,
        tp_overlap=[False, True],
    )
    r = evaluate(costs, p, devices, links)
    assert r.tp_comm[1] < r.tp_comm[0]
    assert r.forward[1] == r.forward[0] and r.backward[1] == r.backward[0] and r.memory[1] == r.memory[0]
    assert r.total[1] < r.total[0]


def test_measured_runs_carry_their_tp_overlap():
    from planner.calibrate import measurements

    runs = measurements.load(catalog.configs_dir() / "measurements" / "llm.csv")
    core = [r for r in runs if r.source == "megatron-core-readme-2024-h100"]
    assert core and all(r.tp_overlap for r in core)
    assert not any(r.tp_overlap for r in runs if r.source.startswith("megatron-lm-readme"))


@pytest.mark.parametrize("network", ["ib_ndr", "eth100"])
@pytest.mark.parametrize("workers", [16, 64])
def test_zero_traffic_and_the_pass_it_hides_behind(workers, network):
    """Per step with m microbatches, G the fp32 gradient all-reduce and W a bf16 parameter
    all-gather (W = G / 4: half the bytes, half an all-reduce; Rajbhandari et al. 2020 §7):
    ZeRO 0 moves G, ZeRO 1 G/2 + W, ZeRO 2 m G/2 + W, ZeRO 3 m (G/2 + 2 W). Reductions hide
    behind a backward pass; ZeRO 1's and 2's gather behind the next step's first forward
    (Megatron-Core's --overlap-param-gather); ZeRO 3's gathers behind both passes."""
    from costs.comm import overlap
    from costs.modern.evaluator import Options

    m = 4
    costs, p, devices, _ = _one_gpu(
        "llama3-8b", batch=1, workers=workers, gpus_per_node=8, scheme=3, accumulation=m, zero=[0, 1, 2, 3]
    )
    r = evaluate(costs, p, devices, catalog.link_table([network, "nvlink4"]))
    g = r.sync_total[0]
    assert r.sync_total[1] == pytest.approx(0.75 * g, rel=1e-3)
    assert r.sync_total[2] == pytest.approx(m * g / 2 + g / 4, rel=1e-3)
    assert r.sync_total[3] == pytest.approx(m * g, rel=1e-3)
    w = r.sync_total[1] - g / 2
    f, b = r.forward[0] / m, r.backward[0] / m  # one microbatch's passes
    nbytes, bucket = 4.0 * r.sync_params[0], Options().bucket_bytes
    hide = lambda comm, window: float(overlap.exposed(comm, window, nbytes, bucket))  # noqa: E731
    assert r.sync[0] == pytest.approx(hide(g, b), rel=1e-9)
    assert r.sync[1] == pytest.approx(hide(g / 2, b) + hide(w, f), rel=1e-9)
    assert r.sync[2] == pytest.approx(m * hide(g / 2, b) + hide(w, f), rel=1e-9)
    assert r.sync[3] == pytest.approx(m * (hide(g / 2 + w, b) + hide(w, f)), rel=1e-9)
    if network == "eth100":  # gather and reduction together outlast the backward, apart they do not
        assert g / 2 + w > b and r.sync[1] < 0.5 * hide(g / 2 + w, b)
