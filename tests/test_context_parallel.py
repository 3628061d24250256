"""Context parallelism (costs/llm/context.py and the LLM evaluator): each term against its
closed form, what splitting the sequence does to compute, memory and the data-parallel group,
the search axis, the CLI's refusals, and the launch targets that carry it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costs.hardware import PRECISIONS
from costs.llm import context
from costs.llm import memory as llm_memory
from costs.llm import shard as llm_shard
from costs.llm.evaluator import evaluate as llm_evaluate
from costs.model import plans
from costs.modern.efficiency import Efficiency
from planner import catalog
from planner.cli import main

BF16 = PRECISIONS.index("bf16")


def _cli(capsys, *argv) -> tuple[int, str]:
    """Exit code and output (stdout, then stderr) of one command."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def _llama(seq=32768):
    costs = catalog.net_costs("llama3-70b", "modern", seq_len=seq)
    return costs, llm_shard.dims(costs.net.meta["model"])


def test_ring_attention_hides_its_kv_exchange_behind_the_attention():
    """Ring attention (Liu et al. 2023, arXiv:2310.01889 §3): cp - 1 sends of one key/value chunk
    forward, twice that backward (keys, values and their gradients); only what the attention
    cannot cover is exposed. Llama 3 70B's TP 8 shard: one key/value head of 128 + 128."""
    _, m = _llama(32768)
    cp, b, e, bw, lat = 4, 1, 2.0, 50e9, 5e-6
    chunk = b * 32768 / cp * 1 * (128 + 128) * e
    ring = (cp - 1) * (chunk / bw + lat)
    got = lambda mode, f, bk, rc=0: float(  # noqa: E731
        context.times(m, b, e, 8, cp, np.array(mode), np.array(rc), bw, lat, f, bk)
    )
    assert got(context.P2P, 0.0, 0.0) == pytest.approx(3 * ring)  # nothing to hide behind
    assert got(context.P2P, 1.0, 1.0) == 0.0  # the attention covers it all
    assert got(context.P2P, ring / 2, 0.0) == pytest.approx(ring / 2 + 2 * ring)
    # Llama 3's all-gather: the same bytes, never overlapped
    assert got(context.ALL_GATHER, 1.0, 1.0) == pytest.approx(2 * ring)
    # full recomputation repeats the forward's exchange
    assert got(context.ALL_GATHER, 1.0, 1.0, rc=2) == pytest.approx(3 * ring)
    assert float(context.times(m, b, e, 8, 1, np.array(0), np.array(0), bw, lat, 0.0, 0.0)) == 0.0


def test_ulysses_moves_q_k_v_and_the_output_once_each_way():
    """DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv:2309.14509 §3.1): all-to-alls of Q, K, V and
    the output, (cp - 1)/cp of each, forward and backward. Llama 3 70B, TP 1: 64 query heads,
    8 key/value heads of 128."""
    _, m = _llama(32768)
    cp, b, e, bw = 8, 1, 2.0, 100e9
    tokens = 32768 / cp
    nbytes = (cp - 1) / cp * tokens * (64 * 128 + 8 * 256 + 64 * 128) * e
    got = float(context.times(m, b, e, 1, cp, np.array(context.A2A), np.array(0), bw, 0.0, 1.0, 1.0))
    assert got == pytest.approx(2 * nbytes / bw)
    # the heads of a shard spread over the group: 64/8 query heads, 8/8 key/value heads at TP 1;
    # at TP 8 one key/value head is left, fewer than cp 2
    assert bool(context.heads_split(m, 1, 8)) and not bool(context.heads_split(m, 8, 2))


def _plans(costs, **cols):
    base = dict(device=0, network=0, intra_link=1, precision=BF16, gpus_per_node=8, scheme=3, batch=1)
    return plans(costs.n_layers, **{**base, **cols})


def _run(costs, p, ideal=True):
    devices = catalog.device_table(["H100_SXM"])
    links = catalog.link_table(["ib_ndr", "nvlink4"])
    eff = (
        Efficiency.ideal(devices, links) if ideal else catalog.efficiency(["H100_SXM"], ["ib_ndr", "nvlink4"])
    )
    return llm_evaluate(costs, p, devices, links, efficiency=eff)


def test_cp_splits_the_work_and_the_activations_of_a_sequence():
    """Same sequences per step, twice the GPUs in a context-parallel pair: each GPU does half the
    FLOPs (the attention balanced over the pair), stores half the activations, and the model
    FLOPs of a step do not change."""
    costs, m = _llama(32768)
    p = _plans(costs, workers=[8, 16], tp=8, cp=[1, 2], sp=True, recompute=2)
    r = _run(costs, p)
    assert r.samples[0] == r.samples[1] == 1  # dp 1 both: the pair shares one sequence
    assert r.model_flops[0] == pytest.approx(r.model_flops[1])
    assert r.forward[1] == pytest.approx(r.forward[0] / 2, rel=0.02)  # ideal rates: linear in tokens
    one = float(llm_memory.layer_activations(m, 1, 2.0, 8, True, 0, 1))
    two = float(llm_memory.layer_activations(m, 1, 2.0, 8, True, 0, 2))
    assert two == pytest.approx(one / 2)
    assert r.memory[1] < r.memory[0]
    assert r.cp_comm[0] == 0.0


def test_cp_attention_is_the_whole_sequence_share_not_the_short_sequence():
    """Per GPU the core attention is 1/cp of the whole sequence's (quadratic in s), not the
    attention of a sequence s/cp long (1/cp^2): the shard at s/cp with the attention put back."""
    costs, _ = _llama(65536)
    p = _plans(costs, workers=[8, 32], tp=8, cp=[1, 4], sp=True, recompute=2)
    r = _run(costs, p)
    short = catalog.net_costs("llama3-70b", "modern", seq_len=16384)
    q = _run(short, _plans(short, workers=8, tp=8, sp=True, recompute=2))
    # at cp 4 a GPU has the tokens of the 16k run but 4x its attention work (s^2 / 4 vs (s/4)^2)
    assert r.forward[1] > q.forward[0] * 1.2
    assert r.forward[1] == pytest.approx(r.forward[0] / 4, rel=0.02)


def test_gradients_and_zero_shards_span_data_and_context_parallel_gpus():
    """The cp GPUs of a pair hold the same weights: ZeRO shards the states over dp x cp
    (Megatron-Core's data-parallel group with context parallelism) and the gradient collective
    runs over them."""
    costs, _ = _llama(32768)
    p = _plans(costs, workers=[64, 64], tp=8, cp=[1, 2], zero=1, sp=True, recompute=2)
    r = _run(costs, p, ideal=False)
    states = [float(llm_memory.state_bytes(1.0, 2.0, "adam", np.array(1), d)) for d in (8, 8)]
    assert states[0] == states[1]  # 8 replicas (cp 1) and 4 replicas x cp 2 shard alike
    assert r.samples[0] == 2 * r.samples[1]  # but the cp 2 plan trains half the sequences
    assert r.sync_params[0] == r.sync_params[1]


def test_dp_counts_context_parallel_gpus_once():
    costs, _ = _llama(32768)
    p = _plans(costs, workers=128, tp=8, cp=4, pp=2, accumulation=3)
    assert float(_run(costs, p).samples[0]) == 1 * 2 * 3  # dp = 128 / (8 x 4 x 2) = 2


def test_long_sequences_search_context_parallelism_and_pick_it_where_memory_binds(capsys, tmp_path):
    """llama3-70b at 64k tokens on 64 H100: without CP no plan keeps a sequence's activations
    within 80 GB at TP <= 8 without recomputation; the search finds CP by default."""
    args = ["optimize", "llama3-70b", "--budget", "64gpus", "--gpu", "H100_SXM", "--network", "ib_ndr"]
    args += ["--seq-len", "65536", "--format", "json", "--out", str(tmp_path)]
    code, out = _cli(capsys, *args)
    assert code == 0, out
    best = json.loads(out)["best"]
    assert best["cp"] > 1
    assert best["cp_comm_ms"] >= 0.0 and "ep_comm_ms" in best  # the answer shows the exchange it costs
    code, out = _cli(capsys, *args[:-2], "--out", str(tmp_path / "no-cp"), "--cp", "1")
    assert code == 0, out
    no_cp = json.loads(out)["best"]
    assert no_cp["iteration_ms"] > best["iteration_ms"]


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--cp", "3"], "--cp 3 needs a sequence length divisible by 2 x cp = 6"),
        (["--cp", "0"], "--cp must be a positive integer"),
        (["--cp", "2", "--cp-comm", "ring"], "--cp-comm 'ring' (valid: p2p, all_gather, a2a)"),
        (["--cp", "2", "--cp-comm", "a2a", "--tp", "8"], "--cp-comm a2a spreads heads"),
        (["--cp", "4"], "is not a multiple of tp x pp x cp = 4"),
    ],
)
def test_estimate_refuses_bad_context_parallelism_in_one_line(capsys, extra, words):
    args = ["estimate", "llama3-70b", "--device", "H100_SXM", "--workers", "2", "--gpus-per-node", "8"]
    code, out = _cli(capsys, *args, *extra)
    assert code == 2, out
    line = out.strip()
    assert words in line and "\n" not in line and "Traceback" not in line


def test_optimize_refuses_cp_that_does_not_split_the_sequence(capsys):
    code, out = _cli(capsys, "optimize", "llama3-8b", "--budget", "8gpus", "--cp", "3")
    assert code == 2 and "--cp 3 needs a sequence length divisible by 2 x cp = 6" in out
    code, out = _cli(capsys, "optimize", "resnet50", "--budget", "8gpus", "--cp", "2")
    assert code == 2 and "--cp needs a transformer net" in out
    code, out = _cli(capsys, "optimize", "llama3-8b", "--budget", "8gpus", "--cp", "2", "--cp-comm", "ring")
    assert code == 2 and "--cp-comm 'ring' (valid: comma-separated of p2p, all_gather, a2a)" in out


def test_plain_pytorch_stack_cannot_run_context_parallelism(capsys):
    args = ["estimate", "llama3-8b", "--device", "H100_SXM", "--workers", "2", "--gpus-per-node", "8"]
    code, out = _cli(capsys, *args, "--cp", "2", "--stack", "pytorch")
    assert code == 2 and "--stack pytorch has no context parallelism (--cp)" in out


def test_estimate_reports_cp_and_its_exchange(capsys):
    args = ["estimate", "llama3-70b", "--device", "H100_SXM", "--workers", "32", "--gpus-per-node", "8"]
    args += [
        "--tp",
        "8",
        "--cp",
        "4",
        "--seq-len",
        "131072",
        "--sp",
        "--recompute",
        "full",
        "--format",
        "json",
    ]
    recs = json.loads(_cli(capsys, *args, "--cp-comm", "all_gather")[1])
    ring = json.loads(_cli(capsys, *args)[1])
    assert recs[0]["cp"] == 4 and recs[0]["cp_comm"] == "all_gather" and recs[0]["dp"] == 1
    assert recs[0]["cp_comm_ms"] > 0.0  # the all-gather is exposed
    assert ring[0]["cp_comm_ms"] < recs[0]["cp_comm_ms"]  # the ring hides behind the attention
