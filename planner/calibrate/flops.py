"""Model FLOPs per sequence as a publication counts them, to read a published per-GPU teraFLOP/s.

A run reported as ``tflops_per_gpu`` did ``value * 1e12 * gpus`` FLOP/s by its authors' count, so
its throughput is that divided by the FLOPs they count per sequence. Each counting is named in the
run's ``flops_counting`` column; ``h`` is the hidden size, ``l`` the layers, ``s`` the sequence
length and ``V`` the vocabulary, all read from the net's ``model`` description.

``megatron-ptdp``: Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM, SC 2021 (https://arxiv.org/abs/2104.04473), equation 3 of section 5.1: 96 B s
l h^2 (1 + s/(6h) + V/(16 l h)) per batch of B sequences, i.e. 24 x 4 with the factor 4 for full
activation recomputation (a second forward pass) and 3 without, as the paper's first author ported
it (https://github.com/bigscience-workshop/Megatron-DeepSpeed/pull/251, 2022-02-21). It counts a GPT
with a 4h GELU feed-forward; the logit layer is not recomputed. Megatron-LM's README (commit
152aab3, 2021-01-11) agrees: its GPT-3 175B
example (1536 x 2048 tokens, 96 layers, h 12288, V 51200) takes about 32 s an iteration on 1024
GPUs, "resulting in 138 teraFLOPs per GPU"; the formula gives 137.7.

``megatron-core``: ``num_floating_point_operations`` in megatron/training/training.py of
Megatron-LM commit f2e5db4 (2024-07-15, the commit of its H100 scaling table): 12 B s l h^2 ((1 +
g/a + s/h) q/h + (f/h) k r + V/(2 l h)) with ``a`` heads, ``g`` key-value groups, ``q`` the
query projection size, ``f`` the feed-forward size, ``k`` experts per token and ``r`` 3/2 for a
gated (SwiGLU) feed-forward. Forward and backward only: recomputation is not counted.
"""

from __future__ import annotations

COUNTINGS = ("megatron-ptdp", "megatron-core")


def per_sequence(counting: str, model: dict, seq_len: int) -> float:
    """Model FLOPs per sequence of ``seq_len`` tokens under ``counting`` (a transformer ``model``
    description as in costs.specs.transformer_spec). ValueError when the counting does not apply."""
    h, layers, vocab, s = model["d_model"], model["n_layers"], model["vocab"], seq_len
    if counting == "megatron-ptdp":
        if model["d_ff"] != 4 * h or model.get("activation", "gelu") != "gelu" or model.get("moe"):
            raise ValueError("megatron-ptdp counts a GELU feed-forward of 4 x d_model only")
        return 96 * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))
    if counting == "megatron-core":
        a = model["n_heads"]
        g = model.get("n_kv_heads", a)
        q = a * model.get("head_dim", h // a)
        moe = model.get("moe")
        k = moe["top_k"] if moe else 1
        gated = 1.5 if model.get("activation") == "swiglu" else 1.0
        attention = (1 + g / a + s / h) * q / h
        return 12 * s * layers * h**2 * (attention + model["d_ff"] / h * k * gated + vocab / (2 * layers * h))
    raise ValueError(f"unknown FLOP counting '{counting}' (valid: {', '.join(COUNTINGS)})")
