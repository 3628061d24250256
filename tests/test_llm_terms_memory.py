"""Memory per GPU of the LLM evaluator, term by term, against the papers' formulas written out
here: activations per layer and schedule (Korthikanti et al. 2022), the microbatches a pipeline
stage keeps in flight (Narayanan et al. 2021), and model states under ZeRO (Rajbhandari et al.
2020). The evaluator's memory is taken apart with the optimizer alone: under mixed precision,
Adam keeps 16 bytes per parameter and SGD 8 (2 + 2 weights and gradients, 4 fp32 master), so
with ZeRO 0 their difference is 8 bytes per parameter and what SGD adds to 8 per parameter is
the activations (tests/llm_toy.py has the toy transformer, a GPT-3-shaped layer)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from llm_toy import BF16, FP32, evaluate, model

from costs.hardware import PRECISIONS
from costs.llm import memory as llm_memory
from costs.llm import shard as llm_shard
from costs.modern.evaluator import Options

NONE, SELECTIVE, FULL = 0, 1, 2


def _korthikanti_layer(m: dict, b: int, t: int, sp: bool, rc: int) -> float:
    """Bytes of one layer's activations, 16-bit, per Korthikanti et al. 2022 (arXiv:2205.05198):
    eq. 2 with tensor parallelism, sbh (10 + 24/t + 5as/(ht)); §4.2.2 with sequence parallelism,
    sbh (34/t + 5as/(ht)); §5 selective recomputation drops the 5as/h attention terms; full
    recomputation keeps the layer's input, 2 sbh (2 sbh / t with sequence parallelism)."""
    s, h, a = m["seq_len"], m["d_model"], m["n_heads"]
    sbh = s * b * h
    attention = 0.0 if rc == SELECTIVE else 5 * a * s / (h * t)
    if rc == FULL:
        return 2 * sbh / (t if sp else 1)
    return sbh * (34 / t + attention) if sp else sbh * (10 + 24 / t + attention)


def _split(m: dict, **cols) -> tuple[float, float]:
    """(parameters, activation bytes) on the GPU that needs the most, from the evaluator's memory
    under Adam and SGD (ZeRO 0, bf16)."""
    _, adam = evaluate(m, Options("adam", 0.0), **cols)
    _, sgd = evaluate(m, Options("sgd", 0.0), **cols)
    params = (adam.memory[0] - sgd.memory[0]) / 8.0
    return params, sgd.memory[0] - 8.0 * params


def _toy_params(m: dict) -> int:
    """Parameters of the toy GPT: per layer 12 h^2 weights and 13 h biases and LayerNorm
    scales and shifts (QKV 3h, output h, MLP 4h + h, two norms 4h); token and position
    embeddings; the final norm; the LM head tied to the token embedding (Radford et al. 2019)."""
    h, L = m["d_model"], m["n_layers"]
    return L * (12 * h * h + 13 * h) + (m["vocab"] + m["max_positions"]) * h + 2 * h


@pytest.mark.parametrize("t", [1, 2, 4])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("rc", [NONE, SELECTIVE, FULL])
def test_activation_memory_of_one_stage(t, sp, rc):
    """One stage (p = 1) keeps, per microbatch: L layers' activations; the embedding's output
    (E sbh, /t with sequence parallelism); the fp32 logits of the loss, 4 s b v / t
    (Korthikanti et al. 2022, §4.3); under full recomputation also one layer's whole
    activations while it is recomputed."""
    m, b = model(), 2
    s, h, L = m["seq_len"], m["d_model"], m["n_layers"]
    params, act = _split(m, batch=b, workers=t, gpus_per_node=8, tp=t, sp=sp, recompute=rc, accumulation=4)
    if t == 1:
        assert params == _toy_params(m)
    want = L * _korthikanti_layer(m, b, t, sp, rc) + 2 * s * b * h / (t if sp else 1)
    want += 4 * s * b * math.ceil(m["vocab"] / t)
    if rc == FULL:
        want += _korthikanti_layer(m, b, t, sp, NONE)
    assert act == pytest.approx(want, rel=1e-12)


def test_flash_attention_keeps_the_row_statistics_instead_of_the_scores():
    """A flash kernel (Dao et al. 2022, arXiv:2205.14135) keeps no s x s scores, only the fp32
    row log-sum-exp, 4 a s b bytes per layer (split t ways), so selective recomputation saves
    nothing over it."""
    m, b, t = model(attention="flash"), 2, 2
    s, h, a, L = m["seq_len"], m["d_model"], m["n_heads"], m["n_layers"]
    _, act = _split(m, batch=b, workers=t, gpus_per_node=8, tp=t)
    want = L * (_korthikanti_layer(m, b, t, False, SELECTIVE) + 4 * a * s * b / t) + 2 * s * b * h
    assert act == pytest.approx(want + 4 * s * b * m["vocab"] / t, rel=1e-12)


@pytest.mark.parametrize("p", [2, 4])
def test_the_first_stage_keeps_min_p_m_microbatches(p):
    """1F1B (Narayanan et al. 2021, arXiv:2104.04473, §2.2.1; Korthikanti et al. 2022 §4): the
    first stage runs p forward passes before its first backward, so it keeps min(p, m)
    microbatches' activations of its L / p layers (and the embedding's output); beyond m = p
    the memory stops growing."""
    m, b = model(), 1
    s, h, L = m["seq_len"], m["d_model"], m["n_layers"]
    per_mb = L // p * _korthikanti_layer(m, b, 1, False, NONE) + 2 * s * b * h
    mem = {}
    for mb in (2, p, 4 * p):
        _, r = evaluate(m, batch=b, workers=p, gpus_per_node=8, pp=p, accumulation=mb)
        assert r.stage_blocks[0] == L // p
        mem[mb] = r.memory[0]
    assert mem[p] - mem[2] == pytest.approx((p - 2) * per_mb, rel=1e-12)
    assert mem[4 * p] == mem[p]
    # the first stage binds: its L / p blocks, the token and position embeddings, p microbatches
    params, act = _split(m, batch=b, workers=p, gpus_per_node=8, pp=p, accumulation=p)
    h = m["d_model"]
    assert params == L // p * (12 * h * h + 13 * h) + (m["vocab"] + m["max_positions"]) * h
    assert act == pytest.approx(p * per_mb, rel=1e-12)


def test_the_tied_copy_on_the_last_stage_is_the_word_embedding_alone():
    """Megatron-LM with tied embeddings and p > 1 keeps a copy of the word embedding (V/t x h)
    on the last stage for the LM head; the learned position table stays on the first. Here the
    first stage (2 blocks, V h + 256 h of embeddings) holds more than the last (2 blocks, the
    final norm 2h and the V h copy), so its parameters are the ones the all-reduce moves."""
    m = model()
    h, L, p = m["d_model"], m["n_layers"], 4
    _, r = evaluate(m, batch=1, workers=p, gpus_per_node=8, pp=p, accumulation=p)
    first = L // p * (12 * h * h + 13 * h) + (m["vocab"] + m["max_positions"]) * h
    assert r.sync_params[0] == first


@pytest.mark.parametrize("p,v", [(2, 2), (2, 4), (4, 2)])
def test_interleaving_keeps_1_plus_p_minus_1_over_pv_times_more(p, v):
    """Korthikanti et al. 2022 §4 (pipeline parallelism), for the interleaved schedule of
    Narayanan et al. 2021 §2.2.2: with v model chunks per GPU the first stage keeps
    1 + (p - 1) / (p v) times the activations of plain 1F1B (its warm-up runs p - 1 more
    chunk-microbatches, each 1/v of the stage's layers)."""
    m, b, mb = model(), 1, 8
    s, h, L = m["seq_len"], m["d_model"], m["n_layers"]
    per_mb = L // p * _korthikanti_layer(m, b, 1, False, NONE) + 2 * s * b * h
    _, r = evaluate(m, batch=b, workers=p, gpus_per_node=8, pp=p, accumulation=mb, interleave=[1, v])
    extra = min(p, mb) * (p - 1) / (p * v) * per_mb
    assert r.memory[1] - r.memory[0] == pytest.approx(extra, rel=1e-12)


def _megatron_peak_chunks(p: int, v: int, m: int, r: int) -> int:
    """Chunk forwards rank ``r`` holds at its peak under Megatron-Core's 1F1B: the warm-up
    count of megatron/core/pipeline_parallel/schedules.py (``p - r - 1`` plain; interleaved
    ``2 (p - r - 1) + (v - 1) G`` with microbatch groups G = p, capped at the step's ``m v``
    chunk forwards, all of them when m = p) and the first steady-state forward, which runs
    before the first backward."""
    total = m * v
    warm = p - r - 1 if v == 1 else 2 * (p - r - 1) + (v - 1) * p
    return total if warm >= total or (v > 1 and m == p) else warm + 1


@pytest.mark.parametrize(
    "p,v,m", [(2, 1, 8), (4, 1, 3), (4, 2, 8), (4, 2, 4), (8, 4, 16), (16, 8, 32), (16, 8, 16)]
)
def test_each_rank_holds_megatrons_warm_up_plus_one(p, v, m):
    """The first, second and last pipeline ranks' microbatches in flight (in whole stages: v
    chunks each) are Megatron-Core's warm-up count plus one, over v: under interleaving every
    rank holds about p microbatches, not only the first (Llama 3 405B: rank 1 holds 141 chunks
    of 8, 17.6 stages, where plain 1F1B's rank 1 holds 15)."""
    from costs.llm.pipeline import in_flight

    got = [float(x) for x in in_flight(p, v, m)]
    want = [_megatron_peak_chunks(p, v, m, r) / v for r in (0, 1, p - 1)]
    assert got == pytest.approx(want, rel=1e-12)


def test_llama3_405b_split_puts_7_layers_on_the_ends():
    """126 layers on 16 stages: 8 on each middle stage, 7 on the first and the last, the split
    Llama 3 405B ran ("we reduce one Transformer layer each from the first and the last
    stages", Dubey et al. 2024, arXiv:2407.21783, §3.3.2); the balance alone would put 8 on
    the first and leave a middle stage one short, where fewer microbatches are in flight."""
    from costs.llm.pipeline import _stages

    one = np.array([1.0])
    n1, nl, mid = _stages(126, np.array([16.0]), one, 0.01 * one, 0.7 * one)
    assert (n1[0], nl[0], mid[0]) == (7, 7, 8)


@pytest.mark.parametrize("dp", [2, 8])
def test_zero_shards_the_model_states(dp):
    """Rajbhandari et al. 2020 (ZeRO, arXiv:1910.02054) §5, Figure 1: mixed-precision Adam keeps
    2 + 2 + 12 bytes per parameter (16-bit weights and gradients; fp32 master weights,
    momentum and variance); stage 1 shards the 12 over the dp GPUs, stage 2 also the
    gradients' 2, stage 3 also the weights' 2, and then holds one gathered layer and the next
    (prefetch) whole: 2 x 2 bytes x a layer's parameters."""
    m = model()
    h, P = m["d_model"], _toy_params(m)
    block = 12 * h * h + 13 * h
    _, r = evaluate(m, batch=1, workers=dp, gpus_per_node=8, zero=[0, 1, 2, 3], accumulation=2)
    mem = r.memory
    assert mem[0] - mem[1] == pytest.approx(P * 12 * (1 - 1 / dp), rel=1e-12)
    assert mem[1] - mem[2] == pytest.approx(P * 2 * (1 - 1 / dp), rel=1e-12)
    assert mem[2] - mem[3] == pytest.approx(P * 2 * (1 - 1 / dp) - 2 * 2 * block, rel=1e-12)
    _, sgd = evaluate(m, Options("momentum", 0.0), batch=1, workers=dp, gpus_per_node=8, zero=[0, 1])
    # momentum keeps one fp32 state (4 bytes) beside the fp32 master weights: 2 + 2 + 4 + 4
    assert sgd.memory[0] - sgd.memory[1] == pytest.approx(P * 8 * (1 - 1 / dp), rel=1e-12)
    assert mem[0] - sgd.memory[0] == pytest.approx(P * 4, rel=1e-12)  # Adam's second state
    _, fp32 = evaluate(m, batch=1, workers=dp, gpus_per_node=8, precision=0, zero=[0, 3])
    # fp32 training keeps 4 + 4 + 8 bytes (no master copy); ZeRO 3 shards them all
    assert fp32.memory[0] - fp32.memory[1] == pytest.approx(P * 16 * (1 - 1 / dp) - 2 * 4 * block, rel=1e-12)


def test_zero_without_data_parallelism_shards_nothing():
    """One data-parallel replica: every ZeRO stage keeps the 16 bytes per parameter whole (ZeRO 3
    still holds its gathered layer and the next, 2 x 2 bytes x 12 h^2 + 13 h)."""
    m = model()
    h = m["d_model"]
    _, r = evaluate(m, batch=1, workers=1, gpus_per_node=8, zero=[0, 1, 2, 3])
    assert r.memory[1] == r.memory[0] and r.memory[2] == r.memory[0]
    assert r.memory[3] - r.memory[0] == pytest.approx(2 * 2 * (12 * h * h + 13 * h), rel=1e-12)


def test_expert_parallelism_divides_the_expert_parameters():
    """Expert parallelism over e GPUs leaves each GPU n_experts / e of every MoE layer's experts
    (Lepikhin et al. 2020, §2.2); the router stays whole. Toy experts: 4 GELU MLPs of 4h
    without biases, 8 h^2 weights each."""
    m = model(moe={"n_experts": 4, "top_k": 2}, dropout=False, bias=False)
    h, L = m["d_model"], m["n_layers"]
    experts = L * 4 * 8 * h * h
    _, r = evaluate(m, batch=1, workers=4, gpus_per_node=8, ep=[1, 2, 4])
    for j, e in enumerate([1, 2, 4]):
        assert r.memory[0] - r.memory[j] == pytest.approx(16 * experts * (1 - 1 / e), rel=1e-12)


LLAMA = dict(activation="swiglu", norm="rmsnorm", dropout=False, attention="flash", bias=False, n_kv_heads=2)
SHAPES = {
    "llama (SwiGLU, GQA, flash)": model(**LLAMA),
    "moe (top 2 of 8)": model(**LLAMA, moe={"n_experts": 8, "top_k": 2}),
    "moe (top 2 + 1 shared of d_ff 256)": model(
        **LLAMA, moe={"n_experts": 8, "top_k": 2, "n_shared": 1, "d_ff": 256}
    ),
    "qwen3 / gemma 2 (qk and post norms)": model(**LLAMA, qk_norm=True, post_norms=True),
    "mla": model(
        **{**LLAMA, "n_kv_heads": 8},
        head_dim=48,
        mla={
            "q_lora_rank": 96,
            "kv_lora_rank": 64,
            "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 16,
            "v_head_dim": 32,
        },
    ),
}


def _generalised_layer(m: dict, b: int, t: int, sp: bool) -> float:
    """Korthikanti et al.'s count, tensor by tensor, for the shapes they did not cover (the
    module docstring of costs/llm/memory.py): kept whole on each GPU (split t ways with
    sequence parallelism), 16-bit, the two norm inputs, the QKV input, the k MLP inputs of
    the experts a token uses, Gemma 2's two branch-output norm inputs and MLA's query and
    key/value latents (each twice: its norm's input and its up-projection's); split t ways, Q and K ((a + kv) hd), V (kv vd), the attention-output
    input (a vd), Qwen3's per-head q/k norm inputs ((a + kv) hd), and per expert the
    activation input (2 d_ff for SwiGLU) and the down-projection input (d_ff); a flash kernel's
    fp32 row log-sum-exp (4 a s b)."""
    s, h, a, kv, hd, E = m["seq_len"], m["d_model"], m["n_heads"], m["n_kv_heads"], m["head_dim"], 2
    moe, mla = m.get("moe") or {}, m.get("mla") or {}
    k = moe.get("top_k", 1) + moe.get("n_shared", 0)
    ff = moe.get("d_ff", m["d_ff"])
    vd = mla.get("v_head_dim", hd)
    sb = s * b
    whole = E * sb * (2 * h + h + k * h + (2 * h if m.get("post_norms") else 0))
    whole += 2 * E * sb * (mla.get("q_lora_rank", 0) + mla.get("kv_lora_rank", 0))
    split = E * sb * ((a + kv) * hd + kv * vd + a * vd + k * (2 * ff + ff))
    split += E * sb * (a + kv) * hd if m.get("qk_norm") else 0
    return whole / (t if sp else 1) + (split + 4 * a * s * b) / t


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("t,sp", [(1, False), (2, False), (2, True), (4, True)])
def test_activations_of_the_modern_layer_shapes(name, t, sp):
    m = llm_shard.dims(SHAPES[name])
    got = float(llm_memory.layer_activations(m, 3, 2.0, t, sp, NONE))
    assert got == pytest.approx(_generalised_layer(m, 3, t, sp), rel=1e-12)
    s, h = m["seq_len"], m["d_model"]
    full = float(llm_memory.layer_activations(m, 3, 2.0, t, sp, FULL))
    assert full == pytest.approx(2 * s * 3 * h / (t if sp else 1), rel=1e-12)  # the layer input only


@pytest.mark.parametrize("tied,rc", [(False, NONE), (True, NONE), (True, FULL)])
def test_the_last_stage_holds_the_head_its_logits_and_a_tied_copy(tied, rc):
    """Two stages of 4 blocks (rotary positions: no position table). The last stage holds the
    final norm (2h), the LM head (V h; with tied embeddings Megatron-LM keeps a copy of the
    first stage's embedding there, its gradient all-reduced between the two), one microbatch's
    activations and the fp32 logits, 4 s b V (Korthikanti et al. 2022 §4.3): with one
    microbatch per step it needs more than the first stage, and its parameters are the ones
    the data-parallel all-reduce moves. Under full recomputation it keeps each layer's input
    and one layer's whole activations while recomputing it."""
    m = model(positional="rope", tied=tied)
    s, h, V, L = m["seq_len"], m["d_model"], m["vocab"], m["n_layers"]
    cols = dict(batch=1, workers=2, gpus_per_node=8, pp=2, accumulation=1, recompute=rc)
    params, act = _split(m, **cols)
    _, r = evaluate(m, **cols)
    block = 12 * h * h + 13 * h
    assert r.stage_blocks[0] == L // 2
    assert params == L // 2 * block + 2 * h + V * h
    assert r.sync_params[0] == params
    want = L // 2 * _korthikanti_layer(m, 1, 1, False, rc) + 4 * s * V
    if rc == FULL:
        want += _korthikanti_layer(m, 1, 1, False, NONE)
    assert act == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("dp", [1, 2, 8])
def test_fp32_gradient_buffers_follow_megatrons_table(dp):
    """Megatron-LM's bytes per parameter (README.md at d086a2e3b020ff78db9d29915f7cfe886e085f13,
    "Distributed Optimizer"; d the data-parallel size): bf16 parameters with fp32 gradients 18,
    6 + 12/d with the distributed optimizer (ZeRO 1); fp16 parameters and gradients 20,
    4 + 16/d; fp32 16, 8 + 8/d. An engine with fp32 gradient buffers (Options.fp32_grads) holds
    exactly these; one without holds 16-bit gradients (2 + 2 + 12)."""
    m = model()
    P = _toy_params(m)
    fp16 = PRECISIONS.index("fp16")
    table = {BF16: (18, 6 + 12 / dp), fp16: (20, 4 + 16 / dp), FP32: (16, 8 + 8 / dp)}
    for precision, (plain, distributed) in table.items():
        cols = dict(batch=1, workers=dp, gpus_per_node=8, precision=precision, zero=[0, 1])
        _, fp32 = evaluate(m, Options("adam", 0.0, fp32_grads=True), **cols)
        _, sgd = evaluate(m, Options("sgd", 0.0, fp32_grads=True), **cols)
        states = fp32.memory - sgd.memory  # Adam's 8 bytes of moments, sharded by ZeRO 1
        activations = sgd.memory[0] - (plain - 8) * P
        assert fp32.memory[0] == pytest.approx(plain * P + activations, rel=1e-12)
        assert fp32.memory[1] == pytest.approx(distributed * P + activations, rel=1e-12)
        assert states[0] == pytest.approx(8 * P, rel=1e-12)
        _, param = evaluate(m, Options("adam", 0.0), **cols)
        # without fp32 buffers: bf16 keeps 2-byte gradients (2 less), fp16 no fp32 copy (4 less)
        less = {BF16: 2, fp16: 4, FP32: 0}[precision]
        assert fp32.memory[0] - param.memory[0] == pytest.approx(less * P, rel=1e-12)


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("t,sp", [(1, False), (2, True)])
def test_fp8_keeps_one_byte_inputs_of_the_linear_layers(name, t, sp):
    """Under FP8, Transformer Engine's linear layers keep the FP8 cast of their input for the
    weight-gradient GEMM (transformer_engine/pytorch/module/linear.py and layernorm_mlp.py at
    0004dbd0231cb02d7b47d45344900a494fa13f46: ``saved_inputmat = inputmat`` when wgrad runs in
    FP8; ``ln_out`` and the activation output ``gelu_out`` are FP8 casts): the QKV input, the
    k MLP inputs and the k down-projection inputs (d_ff each) take 1 byte instead of 2, and the
    output projection keeps a 1-byte copy of the attention output beside the attention
    kernel's 16-bit one. Norm inputs, Q, K, V, the fc1 outputs and the latents stay 16-bit."""
    m = llm_shard.dims(SHAPES[name])
    s, h, a, hd = m["seq_len"], m["d_model"], m["n_heads"], m["head_dim"]
    moe, mla = m.get("moe") or {}, m.get("mla") or {}
    k, ff, vd = (
        moe.get("top_k", 1) + moe.get("n_shared", 0),
        moe.get("d_ff", m["d_ff"]),
        mla.get("v_head_dim", hd),
    )
    sb = s * 3
    bf16 = float(llm_memory.layer_activations(m, 3, 2.0, t, sp, NONE))
    fp8 = float(llm_memory.layer_activations(m, 3, 2.0, t, sp, NONE, fp8=True))
    saved = sb * (h + k * h) / (t if sp else 1) + sb * (k * ff - a * vd) / t
    assert bf16 - fp8 == pytest.approx(saved, rel=1e-12)
    # full recomputation keeps the 16-bit layer input either way
    full = [float(llm_memory.layer_activations(m, 3, 2.0, t, sp, FULL, fp8=f)) for f in (False, True)]
    assert full[0] == full[1]
