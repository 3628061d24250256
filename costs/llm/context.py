"""Context parallelism: the sequence of every sample split over ``cp`` GPUs.

Each GPU of a context-parallel group holds ``s / cp`` tokens of every sequence, so every
layer but the core attention does ``1 / cp`` of the work on ``1 / cp`` of the activations.
The core attention needs every earlier key and value: with the causal mask and the sequence
cut into ``2 cp`` chunks, GPU ``i`` holding chunks ``i`` and ``2 cp - 1 - i``, each GPU does
``1 / cp`` of the full attention (Megatron's split: "the sequence is cut into 2 * cp_size equal
chunks and rank r holds chunks r and 2 * CP - 1 - r", Megatron-Bridge API docs,
https://docs.nvidia.com/nemo/megatron-bridge/nightly/apidocs/bridge/bridge.models.inkling.modeling_inkling2.context_parallel.html,
read 2026-11-25; the sequence length must divide by ``2 cp``). Keys and values move in one of
three ways, named as Megatron-Core's ``--cp-comm-type`` (the table of
https://docs.nvidia.com/nemo/megatron-bridge/latest/training/hybrid-context-parallel.html, read
2026-11-25: p2p "ring-exchange of KV chunks", overlapped; all_gather "all-gather full KV before
attention", not overlapped; a2a Ulysses-style, "CP <= num_kv_heads"):

  p2p         ring attention (Liu et al. 2023, arXiv:2310.01889, §3): ``cp - 1`` steps, each
              sending the GPU's key/value chunk to the next GPU while the attention of the chunk
              in hand runs; the backward pass sends the keys, values and their gradients (twice
              the bytes). Only the communication longer than the attention it overlaps is exposed.
  all_gather  the keys and values all-gathered before the attention and their gradients
              reduce-scattered after its backward (the method of Llama 3: Dubey et al. 2024,
              arXiv:2407.21783, §3.3.2); the same bytes as p2p, not overlapped.
  a2a         DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv:2309.14509, §3.1): all-to-alls turn
              the sequence split into a head split before the attention (queries, keys, values)
              and back after it (output), each moving ``(cp - 1) / cp`` of the tensor; the
              backward pass the same for the gradients. A tensor-parallel shard's query heads
              must divide by ``cp`` and its key/value heads be at least ``cp``.

Bytes per GPU, per layer and microbatch, ``E`` bytes per element, ``kv`` the shard's key/value
heads, ``a`` its query heads, ``hd`` / ``vd`` the key and value head sizes: a key/value chunk is
``b (s / cp) kv (hd + vd) E``; p2p and all_gather move ``cp - 1`` chunks forward and twice that
backward; a2a moves ``(cp - 1) / cp`` of ``b (s / cp) (a hd + kv (hd + vd) + a vd) E`` each way.
Full recomputation repeats the forward's communication.
"""

from __future__ import annotations

import numpy as np

from costs.llm.memory import FULL

CP_COMM = ("p2p", "all_gather", "a2a")  # Megatron-Core's --cp-comm-type values
P2P, ALL_GATHER, A2A = range(3)


def local_heads(m: dict, t) -> tuple[np.ndarray, np.ndarray]:
    """Query and key/value heads of one tensor-parallel shard (key/value heads fewer than
    ``t`` are replicated, one per GPU, as :func:`costs.llm.shard.shard_model` builds them)."""
    t = np.asarray(t, dtype=float)
    kv = float(m["n_kv_heads"]) / t
    # t is a whole degree: a quotient of small whole numbers rounds to a whole number only
    # when it is one, so floor and a comparison give numpy's // and % (several times slower)
    return np.maximum(np.floor(m["n_heads"] / t), 1.0), np.where(kv == np.floor(kv), kv, 1.0)


def heads_split(m: dict, t, cp) -> np.ndarray:
    """Whether a2a (Ulysses) can run: the shard's query heads divide by ``cp`` and its
    key/value heads are at least ``cp``."""
    a, kv = local_heads(m, t)
    cp = np.asarray(cp, dtype=float)
    return (a % cp == 0) & (kv >= cp)


def times(m: dict, b, elem, t, cp, mode, recompute, bw, lat, attn_f, attn_b) -> np.ndarray:
    """Exposed context-parallel communication of one layer and microbatch (s), forward plus
    backward; ``attn_f`` / ``attn_b`` are the seconds of the core attention it can overlap
    (ring attention only). Zero where ``cp`` is 1."""
    cp = np.asarray(cp, dtype=float)
    a, kv = local_heads(m, t)
    hd = m["head_dim"]
    vd = (m.get("mla") or {}).get("v_head_dim", hd)
    tokens = np.asarray(b, dtype=float) * m["seq_len"] / cp
    chunk = tokens * kv * (hd + vd) * elem
    steps = cp - 1.0
    ring = steps * (chunk / bw + lat)  # one pass of the ring, or a ring all-gather
    p2p_f = np.maximum(ring - attn_f, 0.0)
    p2p_b = np.maximum(2.0 * ring - attn_b, 0.0)
    ulysses = steps / np.maximum(cp, 1.0) * tokens * (a * hd + kv * (hd + vd) + a * vd) * elem
    a2a = ulysses / bw + steps * lat
    fwd = np.select([mode == P2P, mode == ALL_GATHER], [p2p_f, ring], a2a)
    bwd = np.select([mode == P2P, mode == ALL_GATHER], [p2p_b, ring], a2a)
    total = fwd * np.where(recompute == FULL, 2.0, 1.0) + bwd
    return np.where(cp > 1, total, 0.0)


def crosses_nodes(t, cp, per_node) -> np.ndarray:
    """Whether a context-parallel group leaves its node: its ranks follow the tensor-parallel
    ones (Megatron-Core's and Llama 3's order: TP, CP, then PP and DP)."""
    return np.asarray(t) * np.asarray(cp) > np.asarray(per_node)
