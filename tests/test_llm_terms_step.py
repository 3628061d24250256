"""The LLM evaluator's per-step terms outside communication and memory: kernel launches on the
host, the optimizer step, and what a mixture of experts after dense layers weighs. On one GPU
the LLM evaluator (one block times the layers, costs/llm/evaluator.py) must answer what the
modern evaluator answers over every layer of the same graph (costs/modern/evaluator.py), with
host and kernel overheads switched on so that kernel and tensor counts matter."""

from __future__ import annotations

from dataclasses import replace

import pytest
from llm_toy import BF16, DEVICES, IDEAL, LINKS, RING, model, net_costs

from costs.llm import evaluator as llm
from costs.llm import shard as llm_shard
from costs.modern import evaluator as modern
from costs.modern.evaluator import Options
from costs.plans import plans
from costs.rules import MODERN

# a host that launches a kernel every millisecond, a 10 us floor per kernel: the step is
# host-bound and the optimizer step kernel-bound, so both count kernels and parameter tensors
SLOW_HOST = replace(IDEAL, host_per_kernel_s=1e-3, kernel_min_s=1e-5, iteration_s=2e-4)

NETS = {
    "dense": model(),
    "moe after dense layers": model(moe={"n_experts": 4, "top_k": 2, "first_dense": 2}, dropout=False),
    "moe": model(moe={"n_experts": 4, "top_k": 2}, dropout=False, attention="flash"),
    "sliding window, every layer": model(window=64, attention="flash", dropout=False),
    "sliding window, half the layers": model(
        window=64, local_layers=[0, 2, 4, 6], attention="flash", dropout=False
    ),
}


@pytest.mark.parametrize("name", sorted(NETS))
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_one_gpu_step_is_the_layer_graph_s(name, optimizer):
    """TP 1, PP 1, one GPU, 4 microbatches: forward, backward, the optimizer step (bytes over
    the memory bandwidth or kernels x the kernel floor, whichever is longer) and the host's
    kernel launches (kernels x dispatch time, beyond the GPU's time, plus a framework time per
    microbatch) equal the modern evaluator's over the whole graph."""
    costs = net_costs(NETS[name])
    p = plans(
        costs.n_layers, device=0, network=0, intra_link=1, precision=BF16, scheme=RING, batch=2, workers=1,
        accumulation=4, recompute=0,
    )  # fmt: skip
    opt = Options(optimizer, 0.0)
    a = llm.evaluate(costs, p, DEVICES, LINKS, efficiency=SLOW_HOST, options=opt)
    b = modern.evaluate(costs, p, DEVICES, LINKS, efficiency=SLOW_HOST, options=opt)
    for field in ("forward", "backward", "update", "overhead", "total"):
        assert getattr(a, field)[0] == pytest.approx(getattr(b, field)[0], rel=1e-9), field
    assert a.overhead[0] > 4 * 2e-4  # host-bound: the launches outlast the GPU
    step_bytes_s = costs.total_params * {"adam": 16, "sgd": 8}[optimizer] / 2e12
    assert a.update[0] > 2 * step_bytes_s  # kernel-bound: tensors x kernels x 10 us
    assert a.local_params[0] == costs.total_params


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_a_shard_holds_its_share_of_a_layer(t):
    """Megatron-LM's split (Shoeybi et al. 2019, §3): each of t GPUs holds a/t query heads and
    their output-projection rows, d_ff/t of the SwiGLU MLP (gate, up and down) and the whole
    RMSNorms; key/value heads fewer than t are replicated, one per GPU (Megatron-Core's GQA).
    Bias-free toy: h 512, 8 heads of 64, 2 KV heads, d_ff 2,048."""
    m = model(activation="swiglu", norm="rmsnorm", bias=False, dropout=False, attention="flash", n_kv_heads=2)
    h, a, kv, hd, ff = 512, 8, 2, 64, 2048
    kv_per_gpu = kv // t if kv % t == 0 else 1
    want = h * hd * a // t * 2 + 2 * h * hd * kv_per_gpu + 3 * h * ff // t + 2 * h
    sh = llm_shard.shard(m, t, MODERN)
    assert sh.params[llm_shard.BLOCK] == want


def test_a_host_bound_pipeline_step_lasts_its_kernel_launches():
    """With one second per kernel launch the host binds: the step (less the data-parallel
    traffic and the framework time per microbatch) lasts exactly its launches, a whole number of
    seconds, whatever the pipeline's bubble and sends (which the GPU's time, not the host's,
    includes)."""
    slowest = replace(IDEAL, host_per_kernel_s=1.0, iteration_s=2e-4)
    costs = net_costs(model())
    p = plans(
        costs.n_layers, device=0, network=0, intra_link=1, precision=BF16, scheme=RING, batch=1, workers=2, pp=2,
        gpus_per_node=8, accumulation=4,
    )  # fmt: skip
    r = llm.evaluate(costs, p, DEVICES, LINKS, efficiency=slowest, options=Options("adam", 0.0))
    assert r.bubble[0] > 0
    launches = float((r.total - r.sync)[0]) - 4 * 2e-4
    assert launches > 100 and abs(launches - round(launches)) < 1e-6
