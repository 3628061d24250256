"""The LLM evaluator's model-parallel communication, term by term, against its paper's formula
written out here (costs/llm/evaluator.py): tensor- and sequence-parallel collectives, their
overlap, pipeline sends, the 1F1B bubble, stage balancing and expert all-to-alls. The toy GPU
and links (tests/llm_toy.py) have round numbers and ideal efficiency, so each term is closed form."""

from __future__ import annotations

import numpy as np
import pytest
from llm_toy import (
    BF16,
    DEVICES,
    FP32,
    IDEAL,
    NET_BW,
    NET_LAT,
    NVL_BW,
    NVL_LAT,
    evaluate,
    model,
    ring_allreduce,
)

from costs.llm import pipeline as llm_pipeline
from costs.llm import shard as llm_shard
from costs.modern.efficiency import Efficiency
from costs.modern.evaluator import layer_times
from costs.rules import MODERN

NONE, SELECTIVE, FULL = 0, 1, 2
ELEM = {BF16: 2, FP32: 4}


def _hidden(m: dict, b: int, precision: int) -> float:
    """Bytes of one microbatch's hidden state, b s h E."""
    return b * m["seq_len"] * m["d_model"] * ELEM[precision]


@pytest.mark.parametrize("precision", [BF16, FP32])
@pytest.mark.parametrize("t", [2, 4, 8])
def test_tensor_parallel_all_reduces_per_layer(t, precision):
    """Shoeybi et al. 2019 (arXiv:1909.08053) §3, Figure 4: two all-reduces of the b s h hidden
    state per layer in the forward pass (after attention, after the MLP) and two in the
    backward (their conjugates f); full recomputation repeats the forward's two (Narayanan et
    al. 2021, arXiv:2104.04473, §3.3). The vocabulary-parallel embedding and LM head add one
    each. A ring all-reduce over k GPUs moves 2(k-1)/k of the bytes in 2(k-1) steps, on the
    link inside the node."""
    m, b, mb = model(), 2, 3
    _, r = evaluate(
        m,
        batch=b,
        workers=t,
        gpus_per_node=8,
        tp=t,
        accumulation=mb,
        precision=precision,
        recompute=[NONE, SELECTIVE, FULL] * 2,
        sp=[False] * 3 + [True] * 3,
    )
    ar = ring_allreduce(_hidden(m, b, precision), t, NVL_BW, NVL_LAT)
    L = m["n_layers"]
    # sequence parallelism (Korthikanti et al. 2022, arXiv:2205.05198, §4.2.2) replaces each
    # all-reduce by a reduce-scatter and an all-gather: the same bytes, the same time
    for j, rc in enumerate([NONE, SELECTIVE, FULL]):
        per_layer = 6 if rc == FULL else 4
        assert r.tp_comm[j] == pytest.approx(mb * (per_layer * L + 2) * ar, rel=1e-12)
        assert r.tp_comm[j + 3] == pytest.approx(r.tp_comm[j], rel=1e-12)
    assert np.all(r.pp_comm == 0) and np.all(r.ep_comm == 0)
    np.testing.assert_allclose(r.act_comm, r.tp_comm, rtol=1e-12)


def test_one_gpu_has_no_tensor_parallel_traffic():
    _, r = evaluate(model(), batch=1, workers=1, gpus_per_node=8, tp=1)
    assert r.tp_comm[0] == 0 and r.act_comm[0] == 0


def _block_compute(m: dict, t: int, b: int, replicated: bool = False) -> np.ndarray:
    """(forward, backward) seconds of one block's tensor-parallel split layers (the GEMMs and
    attention) on the toy GPU, or of its ``replicated`` ones (norms, adds and dropout, which
    run whole on each GPU of the group)."""
    sh = llm_shard.shard(m, t, MODERN)
    times, _, inverse = layer_times(sh.terms, DEVICES, IDEAL, np.array([0]), np.array([BF16]), np.array([b]))
    rows = (sh.part == llm_shard.BLOCK) & (sh.replicated if replicated else ~sh.replicated)
    per_phase = times[rows].sum(axis=0)[:, inverse[0]]  # forward, backward-data, backward-weights
    return np.array([per_phase[0], per_phase[1] + per_phase[2]])


def _split_compute(m: dict, t: int, b: int) -> float:
    return float(_block_compute(m, t, b).sum())


@pytest.mark.parametrize("t", [2, 4])
def test_sequence_parallelism_splits_the_replicated_layers(t):
    """Korthikanti et al. 2022 §4.2.2: sequence parallelism splits the layers tensor
    parallelism leaves whole (LayerNorm, dropout, residual adds) along the sequence, so each GPU
    runs 1/t of their work: per microbatch and layer, (1 - 1/t) of their time less."""
    m, b, mb = model(), 2, 3
    _, r = evaluate(m, batch=b, workers=t, gpus_per_node=8, tp=t, accumulation=mb, sp=[False, True])
    f, bwd = _block_compute(m, t, b, replicated=True)
    L = m["n_layers"]
    assert f > 0 and bwd > 0
    assert r.forward[0] - r.forward[1] == pytest.approx(mb * L * f * (1 - 1 / t), rel=1e-9)
    assert r.backward[0] - r.backward[1] == pytest.approx(mb * L * bwd * (1 - 1 / t), rel=1e-9)


@pytest.mark.parametrize("link_scale", [1.0, 1e4])
def test_overlapped_tensor_parallel_traffic_hides_behind_the_block_split_compute(link_scale):
    """Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers): each block's
    collectives run in chunks beside the GEMMs that produce or consume them, so only what
    outlasts the block's split compute is exposed, max(4 AR - compute, 0) per layer; the
    embedding's and head's all-reduces stay exposed. With the toy links the traffic outlasts
    the compute; 10^4 times faster links hide it whole."""
    m, b, t, mb = model(), 4, 4, 2
    eff = Efficiency(
        IDEAL.devices, IDEAL.links, IDEAL.gemm, IDEAL.vector, IDEAL.memory, np.array([1.0, link_scale])
    )
    _, r = evaluate(
        m,
        efficiency=eff,
        batch=b,
        workers=t,
        gpus_per_node=8,
        tp=t,
        accumulation=mb,
        tp_overlap=[False, True],
    )
    ar = ring_allreduce(_hidden(m, b, BF16), t, NVL_BW * link_scale, NVL_LAT)
    window = _split_compute(m, t, b)
    L = m["n_layers"]
    assert r.tp_comm[0] == pytest.approx(mb * (4 * L + 2) * ar, rel=1e-12)
    assert r.tp_comm[1] == pytest.approx(mb * (L * max(4 * ar - window, 0.0) + 2 * ar), rel=1e-9)
    if link_scale == 1.0:
        assert 4 * ar > window  # partly exposed
    else:
        assert 4 * ar < window and r.tp_comm[1] == pytest.approx(mb * 2 * ar, rel=1e-9)
    assert r.forward[0] == r.forward[1] and r.backward[0] == r.backward[1]


@pytest.mark.parametrize("p,v", [(2, 1), (4, 1), (4, 2)])
@pytest.mark.parametrize("per_node,bw,lat", [(8, NVL_BW, NVL_LAT), (4, NET_BW, NET_LAT)])
def test_pipeline_sends_per_microbatch(p, v, per_node, bw, lat):
    """Narayanan et al. 2021 (arXiv:2104.04473) §4.1: each microbatch sends its activation to
    the next stage and its gradient back, b s h per send, split t ways by the scatter/gather
    optimisation (b s h / t per GPU); interleaving v model chunks per GPU makes v times as many
    sends (§2.2.2). The link is the node's when the whole plan fits in one node, else the
    network."""
    m, b, t, mb = model(), 2, 2, 6
    workers = 8  # 4 / p replicas of t p GPUs: one node of 8, or two nodes of 4
    _, r = evaluate(
        m, batch=b, workers=workers, gpus_per_node=per_node, tp=t, pp=p, accumulation=mb, interleave=v
    )
    send = _hidden(m, b, BF16) / t / bw + lat
    assert r.pp_comm[0] == pytest.approx(mb * 2 * v * send, rel=1e-12)
    _, one = evaluate(m, batch=b, workers=t, gpus_per_node=per_node, tp=t, pp=1, accumulation=mb)
    assert one.pp_comm[0] == 0


@pytest.mark.parametrize("p,v", [(2, 1), (2, 4), (4, 1), (4, 2), (8, 1)])
@pytest.mark.parametrize("mb", [1, 8, 32])
def test_1f1b_bubble_is_p_minus_1_over_v_microbatch_times(p, v, mb):
    """Narayanan et al. 2021 §2.2.1-2.2.2: the 1F1B schedule idles (p - 1) microbatch times of
    the binding stage per step, (p - 1) / v with v interleaved chunks; the step is the m
    microbatches plus the bubble, plus the optimizer step."""
    m = model()
    _, r = evaluate(m, batch=1, workers=p, gpus_per_node=8, pp=p, accumulation=mb, interleave=v)
    busy = r.forward + r.backward + r.act_comm  # m microbatch times of the binding stage
    assert r.bubble[0] == pytest.approx((p - 1) / v / mb * busy[0], rel=1e-12)
    parts = r.forward + r.backward + r.update + r.sync + r.act_comm + r.overhead + r.input_stall + r.bubble
    assert r.total[0] == pytest.approx(parts[0], rel=1e-12)
    assert r.overhead[0] == 0 and r.samples[0] == mb  # an ideal host; one sequence per microbatch


def test_one_stage_has_no_bubble():
    _, r = evaluate(model(), batch=1, workers=1, gpus_per_node=8, pp=1, accumulation=8)
    assert r.bubble[0] == 0


@pytest.mark.parametrize(
    "L,p,emb,head,want",
    [
        # w = (L + (emb + head) / unit) / p block-equivalents per stage; the first stage takes
        # w - emb of blocks, the last w - head, the middle ones share the rest
        (16, 4, 0.0, 0.0, (4, 4, 4)),
        (16, 4, 0.0, 4.0, (5, 1, 5)),  # w = 5: the head is worth 4 blocks on the last stage
        (16, 2, 2.0, 0.0, (7, 9, 0)),  # w = 9: two stages split 16 blocks 7 + 9
        (30, 4, 1.0, 3.0, (8, 6, 8)),  # w = 8.5: rint(7.5) = 8, rint(5.5) = 6, ceil(16 / 2) = 8
        (8, 1, 3.0, 3.0, (8, 8, 0)),  # one stage holds everything
        (12, 3, 0.0, 0.0, (4, 4, 4)),  # three stages: one middle stage
        (8, 2, 10.0, 0.0, (0, 8, 0)),  # an embedding worth more than a stage: no block with it
        (8, 4, 0.0, 10.0, (4, 0, 2)),  # a head worth more than a stage: w = 4.5, rint(-5.5) -> 0
    ],
)
@pytest.mark.parametrize("unit", [1.0, 0.25, 3.0])
def test_stages_balance_the_embedding_and_head_in_block_equivalents(L, p, emb, head, want, unit):
    """Megatron-LM's balanced split (Narayanan et al. 2021, §2.2): the stages share the blocks so
    that the first (with the embedding) and the last (with the LM head and loss) carry the same
    work as a middle stage, in block-equivalents (the ends' seconds over a block's ``unit``);
    hand-computed cases, the same at any unit."""
    times = [np.array([x * unit]) for x in (1.0, emb, head)]
    n1, nl, mid = llm_pipeline._stages(L, np.array([float(p)]), *times)
    assert (int(n1[0]), int(nl[0]), int(mid[0])) == want


@pytest.mark.parametrize("p", [2, 4, 8])
def test_equal_stages_when_the_ends_are_light(p):
    """A small vocabulary (1,024 tokens) makes the embedding and head worth a fraction of a
    block: the 8 blocks split evenly, L / p per stage."""
    _, r = evaluate(model(), batch=1, workers=p, gpus_per_node=8, pp=p, accumulation=8)
    assert r.stage_blocks[0] == 8 // p
    if p == 4:  # 10 blocks: w = 2.5 + the ends' share, ceil(5 / 2) = 3 in the middle, 2 at the ends
        # (balance gives the first 3, one more than the 10 leave it: it gives the surplus back)
        _, r = evaluate(model(n_layers=10), batch=1, workers=p, gpus_per_node=8, pp=p, accumulation=8)
        assert r.stage_blocks[0] == 3
        h = 512  # a middle stage holds the most parameters: its gradients are the ones reduced
        assert r.sync_params[0] == 3 * (12 * h * h + 13 * h)
        n1, nl, mid = llm_pipeline._stages(10, np.array([4.0]), *(np.array([x]) for x in (1.0, 0.05, 0.05)))
        assert (n1[0], nl[0], mid[0]) == (2, 2, 3) and n1[0] + nl[0] + 2 * mid[0] == 10


@pytest.mark.parametrize("rc", [NONE, FULL])
def test_two_stages_are_balanced_to_half_a_block(rc):
    """With a 65,536-token vocabulary the LM head is worth 7-10 blocks: the balanced split
    (Narayanan et al. 2021, §2.2) gives the last stage that many fewer blocks, so the binding
    stage's microbatch is within half a block of the average of the two (rounding to whole
    blocks). A block's time u and the ends' E + H come from one-stage runs of 8 and 16 layers;
    full recomputation makes a block heavier (its forward again), so the head is worth fewer."""
    per = {}
    for L in (8, 16):
        _, r = evaluate(model(vocab=65536, n_layers=L), batch=1, workers=1, gpus_per_node=8, recompute=rc)
        per[L] = float((r.forward + r.backward + r.act_comm)[0])
    u = (per[16] - per[8]) / 8
    _, r = evaluate(model(vocab=65536, n_layers=16), batch=1, workers=2, gpus_per_node=8, pp=2, recompute=rc)
    binding = float((r.forward + r.backward + r.act_comm - r.pp_comm)[0])
    assert per[16] / 2 <= binding <= per[16] / 2 + u / 2
    assert per[16] - 16 * u > 5 * u  # the ends are worth several blocks
    assert r.stage_blocks[0] == (13 if rc == NONE else 5)  # the first stage binds, or the last


MOE = dict(n_experts=4, top_k=2)


@pytest.mark.parametrize("first_dense", [0, 2])
# groups inside a node; a group across nodes splits its copies between NVLink and the network
# (costs/llm/experts.py), pinned in closed form by tests/test_llm_experts.py
@pytest.mark.parametrize("e,per_node,bw,lat", [(2, 4, NVL_BW, NVL_LAT), (4, 8, NVL_BW, NVL_LAT)])
def test_expert_all_to_alls(e, per_node, bw, lat, first_dense):
    """Lepikhin et al. 2020 (GShard, arXiv:2006.16668) §2.2: each MoE layer dispatches its
    tokens to the experts and combines them back, two all-to-alls forward and two backward (two
    more with full recomputation); each GPU sends the (e - 1)/e of its b s k h routed elements
    bound for the other e - 1 GPUs, in e - 1 messages. Dense layers (DeepSeek-V3's first ones)
    send nothing: only the sparse layers' share of the L layers pays."""
    m = model(moe={**MOE, "first_dense": first_dense}, dropout=False)
    b, t, mb, L = 2, 2, 3, m["n_layers"]
    _, r = evaluate(
        m, batch=b, workers=8, gpus_per_node=per_node, tp=t, ep=e, accumulation=mb, recompute=[NONE, FULL]
    )
    a2a = _hidden(m, b, BF16) * MOE["top_k"] * (e - 1) / e / bw + (e - 1) * lat
    sparse = (L - first_dense) / L
    assert r.ep_comm[0] == pytest.approx(mb * L * sparse * 4 * a2a, rel=1e-12)
    assert r.ep_comm[1] == pytest.approx(mb * L * sparse * 6 * a2a, rel=1e-12)
    np.testing.assert_allclose(r.act_comm, r.tp_comm + r.ep_comm, rtol=1e-12)
    _, one = evaluate(m, batch=b, workers=8, gpus_per_node=per_node, tp=t, ep=1, accumulation=mb)
    assert one.ep_comm[0] == 0
    assert one.tp_comm[0] == pytest.approx(r.tp_comm[0], rel=1e-12)  # EP does not touch TP


def test_pipelined_experts_wait_in_the_bubble_too():
    """The bubble is (p - 1) / v microbatch times of the binding stage, its all-to-alls
    included (Narayanan et al. 2021 §2.2.1)."""
    m = model(moe=MOE, dropout=False)
    _, r = evaluate(m, batch=1, workers=8, gpus_per_node=8, tp=2, pp=2, ep=2, accumulation=4)
    assert r.ep_comm[0] > 0
    np.testing.assert_allclose(r.act_comm, r.tp_comm + r.pp_comm + r.ep_comm, rtol=1e-12)
    busy = r.forward + r.backward + r.act_comm
    assert r.bubble[0] == pytest.approx(busy[0] / 4, rel=1e-12)


def test_a_dense_model_sends_no_all_to_all():
    _, r = evaluate(model(), batch=2, workers=8, gpus_per_node=8, tp=2, ep=4)
    assert r.ep_comm[0] == 0
