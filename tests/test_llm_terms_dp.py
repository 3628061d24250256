"""The LLM evaluator's data-parallel traffic under each ZeRO stage and its FLOP counts, against
the papers' formulas written out here: ring and hierarchical all-reduces (Thakur et al. 2005),
ZeRO's traffic (Rajbhandari et al. 2020, §7), model FLOPs (Narayanan et al. 2021, §5.1; PaLM
appendix B) and the hardware FLOPs recomputation adds (tests/llm_toy.py: the toy GPU and links)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from llm_toy import FP32, IDEAL, NET_BW, NET_LAT, NVL_BW, NVL_LAT, evaluate, model, ring_allreduce

from costs.model import evaluate as evaluate_net
from costs.model import plans
from planner import catalog

NONE, SELECTIVE, FULL = 0, 1, 2


@pytest.mark.parametrize("dp", [2, 8])
@pytest.mark.parametrize("mb", [1, 4])
def test_zero_traffic_per_step(dp, mb):
    """Rajbhandari et al. 2020 (ZeRO, arXiv:1910.02054) §7: data parallelism all-reduces the
    gradients, a reduce-scatter and an all-gather (2 Psi); ZeRO 1 and 2 reduce-scatter the
    gradients and all-gather the updated parameters once; ZeRO 3 all-gathers the parameters
    before the forward and again before the backward of every microbatch and reduce-scatters the
    gradients after it (3 Psi). Here gradients are fp32 (4 bytes, as DDP reduces them under AMP)
    and parameters gathered in the training precision (2 bytes under bf16); ZeRO 0 and 1 reduce
    once per step, ZeRO 2 and 3 every microbatch (as accumulation does with sharded gradients).
    One node of dp GPUs: a flat ring over the node's link."""
    m = model()
    costs, r = evaluate(m, batch=1, workers=dp, gpus_per_node=8, zero=[0, 1, 2, 3], accumulation=mb)
    P = costs.total_params
    grads = ring_allreduce(4 * P, dp, NVL_BW, NVL_LAT)  # 2 (dp - 1) steps of 4P / dp bytes
    gather = ring_allreduce(2 * P, dp, NVL_BW, NVL_LAT) / 2  # (dp - 1) steps of 2P / dp bytes
    want = [grads, grads / 2 + gather, mb * grads / 2 + gather, mb * (grads / 2 + 2 * gather)]
    for z, w in enumerate(want):
        assert r.sync_total[z] == pytest.approx(w, rel=1e-12), z
        assert r.sync[z] == pytest.approx(w, rel=1e-12), z  # no buckets: nothing hides
    assert r.sync_params[0] == P and r.samples[0] == dp * mb


@pytest.mark.parametrize("dp", [2, 8])
def test_the_optimizer_steps_over_the_gpu_s_shard(dp):
    """Under ZeRO >= 1 each GPU updates only its 1/dp of the parameters (Rajbhandari et al. 2020
    §5.1): the memory-bound step reads and writes 1/dp of the bytes, at the memory bandwidth
    times its efficiency."""
    _, r = evaluate(model(), batch=1, workers=dp, gpus_per_node=8, zero=[0, 1, 2, 3])
    np.testing.assert_allclose(r.update[1:], r.update[0] / dp, rtol=1e-12)
    _, slow = evaluate(
        model(), efficiency=replace(IDEAL, memory=np.array([0.5])), batch=1, workers=dp, gpus_per_node=8
    )
    assert slow.update[0] == pytest.approx(2 * r.update[0], rel=1e-12)


def test_zero_3_moves_1_5_times_the_all_reduce_volume():
    """Rajbhandari et al. 2020 §7.2.2: ZeRO 3 moves 3 Psi against data parallelism's 2 Psi, 1.5x,
    when parameters and gradients have the same element size (fp32 training here); latency
    steps scale alike (2 all-gathers + 1 reduce-scatter = 3 half all-reduces)."""
    _, r = evaluate(model(), batch=1, workers=8, gpus_per_node=8, zero=[0, 3], precision=FP32)
    assert r.sync_total[1] == pytest.approx(1.5 * r.sync_total[0], rel=1e-12)


@pytest.mark.parametrize("t,per_node", [(1, 8), (2, 8), (2, 4), (4, 8), (8, 8)])
@pytest.mark.parametrize("link_eff", [(1.0, 1.0), (0.5, 0.8)])
def test_data_parallel_groups_fill_the_node_after_tensor_parallelism(t, per_node, link_eff):
    """Megatron-LM's rank order puts the t tensor-parallel GPUs of a replica side by side, so a
    node of ``per_node`` GPUs holds g = per_node / t data-parallel ranks of each group. The
    gradient all-reduce over d = 32 / t replicas on n = d / g nodes is hierarchical: a ring
    reduce-scatter and all-gather inside the node (2 (g - 1) steps of S / g), the ring across
    nodes on each GPU's S / g (2 (n - 1) / n of it, 2 (n - 1) steps on the network). Each link
    runs at its efficiency times its bandwidth."""
    workers = 32
    eff = replace(IDEAL, link=np.array(link_eff))
    _, r = evaluate(model(), efficiency=eff, batch=1, workers=workers, gpus_per_node=per_node, tp=t)
    d = workers // t
    g = max(per_node // t, 1)
    n = d // g
    S = 4 * r.sync_params[0]
    net_bw, nvl_bw = NET_BW * link_eff[0], NVL_BW * link_eff[1]
    inner = 2 * (g - 1) / g * S / nvl_bw + 2 * (g - 1) * NVL_LAT
    outer = 2 * (n - 1) / n * S / g / net_bw + 2 * (n - 1) * NET_LAT
    assert r.sync_total[0] == pytest.approx(inner + outer, rel=1e-12)


def _gpt3(rc: int):
    """GPT-3 175B (the catalog's description), TP 8, one microbatch of one sequence per GPU."""
    costs = catalog.net_costs("gpt3-175b", "modern")
    devices, links = catalog.device_table(["H100_SXM"]), catalog.link_table(["ib_ndr", "nvlink4"])
    p = plans(
        costs.n_layers, device=0, network=0, intra_link=1, precision=3, batch=1, workers=16, gpus_per_node=8,
        tp=8, recompute=rc, scheme=3,
    )  # fmt: skip
    m = costs.net.meta["model"]
    return m, evaluate_net(costs, p, devices, links)


def test_model_flops_are_narayanan_s_count():
    """Narayanan et al. 2021 (arXiv:2104.04473) §5.1: a GPT step of B sequences of s tokens
    (L layers, hidden h, vocabulary V) costs 72 B s L h^2 (1 + s / (6h) + V / (12 L h)) FLOPs
    without recomputation: 6 x the matmul parameters per token plus the attention scores'
    12 L h s (PaLM appendix B's 6N + 12 L H Q T, full s x s scores). The evaluator adds the
    norms', softmax's and GELU's vector work, under 0.1% at GPT-3's size."""
    m, r = _gpt3(NONE)
    B, s, L, h, V = r.samples[0], m["seq_len"], m["n_layers"], m["d_model"], m["vocab"]
    narayanan = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    assert r.model_flops[0] == pytest.approx(narayanan, rel=1e-3)
    assert r.model_flops[0] > narayanan  # the vector work is on top
    assert r.hardware_flops[0] == r.model_flops[0]


def test_full_recomputation_adds_one_forward_of_the_layers():
    """Narayanan et al. 2021 §5.1: with full recomputation the hardware runs 96 B s L h^2
    (1 + s / (6h) + V / (16 L h)): one more forward pass of the L layers (2 B s L (12 h^2 +
    2 s h)), not of the LM head; model FLOPs stay the 72 of the count above."""
    m, r = _gpt3(FULL)
    B, s, L, h, V = r.samples[0], m["seq_len"], m["n_layers"], m["d_model"], m["vocab"]
    assert r.hardware_flops[0] == pytest.approx(
        96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)), rel=1e-3
    )
    _, base = _gpt3(NONE)
    assert r.model_flops[0] == base.model_flops[0]


def test_selective_recomputation_adds_the_core_attention_forward():
    """Korthikanti et al. 2022 (arXiv:2205.05198) §5: selective recomputation reruns only the
    core attention (Q K^T, softmax, P V): 4 B s^2 h L matmul FLOPs and the softmax's
    5 a s^2 per sequence and layer (max, subtract, exp, sum, divide), against 24 B s h^2 L
    + 4 B s^2 h L for a full forward: 2.7% at GPT-3's size."""
    m, r = _gpt3(SELECTIVE)
    _, base = _gpt3(NONE)
    B, s, L, h, a = r.samples[0], m["seq_len"], m["n_layers"], m["d_model"], m["n_heads"]
    extra = B * L * (4 * s * s * h + 5 * a * s * s)
    assert r.hardware_flops[0] - base.model_flops[0] == pytest.approx(extra, rel=1e-3)


def test_a_causal_flash_kernel_counts_half_the_scores():
    """A flash kernel on a causal mask (Dao et al. 2022, arXiv:2205.14135) skips the masked
    tiles, about half, and the evaluator counts the FLOPs it runs: per token 6 x the matmul
    parameters (the input embedding is a lookup, not a matmul) plus 6 L h s, half PaLM's
    12 L h s; Llama 3 70B's GQA and SwiGLU change neither."""
    costs = catalog.net_costs("llama3-70b", "modern")
    devices, links = catalog.device_table(["H100_SXM"]), catalog.link_table(["ib_ndr", "nvlink4"])
    p = plans(
        costs.n_layers, device=0, network=0, intra_link=1, precision=3, batch=1, workers=8, tp=8, scheme=3
    )
    r = evaluate_net(costs, p, devices, links)
    m = costs.net.meta["model"]
    L, h, s, V = m["n_layers"], m["d_model"], m["seq_len"], m["vocab"]
    per_token = 6 * (costs.total_params - V * h) + 6 * L * h * s
    assert r.model_flops[0] / (r.samples[0] * s) == pytest.approx(per_token, rel=2e-3)
