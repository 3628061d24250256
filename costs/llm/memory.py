"""Memory per GPU of a transformer plan: model states under ZeRO, and activations.

Model states, bytes per parameter held by a GPU (Rajbhandari et al. 2020, "ZeRO",
arXiv:1910.02054, §3.1 and §5): mixed precision keeps 16-bit weights (2) and gradients (2),
fp32 master weights (4) and the optimizer's fp32 states (Adam 8, momentum 4, SGD 0): 16 bytes
per parameter under Adam; fp32/tf32 training keeps 4 + 4 + the states. ZeRO shards them over
the ``dp`` GPUs of the data-parallel group: stage 1 the master weights and optimizer states,
stage 2 also the gradients, stage 3 (FSDP's full sharding) also the weights; stage 3 keeps a
gathered block and the next one (prefetch) whole. An engine that accumulates gradients in fp32
buffers (``fp32_grads``: Megatron-Core's DDP) holds, per Megatron-LM's table of bytes per
parameter (README.md of NVIDIA/Megatron-LM at d086a2e3b020ff78db9d29915f7cfe886e085f13,
"Distributed Optimizer"): bf16 parameters with fp32 gradients, 18 bytes, 6 +
12/d with the distributed optimizer; fp16 parameters and gradients plus an fp32 copy of the
gradients that the optimizer shards, 20 bytes, 4 + 16/d; fp32, 16 bytes, 8 + 8/d. FP8 training
keeps bf16 weights and gradients (the FP8 casts are transient), so it counts as bf16.

Activations per transformer layer and microbatch (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", arXiv:2205.05198, §4), generalised to
grouped-query attention, SwiGLU, flash attention and any element size ``E``; ``s`` sequence,
``b`` microbatch, ``h`` hidden, ``a`` heads, ``t`` tensor-parallel degree. Kept whole on every
GPU of the tensor-parallel group (split by ``t`` only with sequence parallelism): the two norm
inputs (2Esbh), the QKV and MLP inputs (2Esbh) and the dropout masks (2sbh with dropout).
Split by ``t``: Q and K (E sb (a + kv) hd), V (E sb kv hd), the attention-output input
(E sbh), the MLP activation input (E sb d_up) and the down-projection input (E sb d_ff), times
top-k for a mixture of experts (``d_ff`` then one expert's width); the inputs of per-head
query and key norms (E sb (a + kv) hd, Qwen3) and of norms on the branch outputs (2Esbh whole,
Gemma 2); with MLA, value heads of v_head_dim and the query and key/value latents (2E sb
(q_lora_rank + kv_lora_rank), whole); a standard attention kernel also keeps the softmax output
(E a s^2 b) and, with dropout, its mask and output (a s^2 b + E a s^2 b); flash attention
keeps the row log-sum-exp (4 a s b) instead. For GPT-3's shapes with E = 2 this is the paper's
``sbh (10 + 24/t + 5as/(ht))`` (eq. 2), ``sbh (34 + 5as/h) / t`` with sequence parallelism.
Under FP8 (``fp8``: Transformer Engine's fp8_autocast) each linear layer keeps
the FP8 cast of its input for the weight-gradient GEMM, one byte per element, instead of the
16-bit input (transformer_engine/pytorch/module/linear.py, ``_Linear.forward``: ``saved_inputmat
= inputmat`` or its FP8 transpose when the recipe runs wgrad in FP8; layernorm_mlp.py keeps the
norm's output and the activation's output in FP8 the same way, and the norm input and the fc1
output in 16 bits; NVIDIA/TransformerEngine at 0004dbd0231cb02d7b47d45344900a494fa13f46): the
QKV and MLP inputs and the down-projection input take one byte, and the attention output's FP8
copy, which the output projection keeps beside the 16-bit output the attention kernel keeps,
adds one. Selective recomputation drops the s^2 terms; full recomputation keeps only each layer's input
(E sbh, /t with sequence parallelism) plus one layer's activations while it is recomputed.
The last stage also keeps the fp32 logits (4 s b vocab / t).
"""

from __future__ import annotations

import numpy as np

NONE, SELECTIVE, FULL = range(3)
RECOMPUTE = ("none", "selective", "full")
# fp32 optimizer-state bytes per parameter (master weights excluded)
STATE_BYTES = {"sgd": 0.0, "momentum": 4.0, "adam": 8.0}


def state_bytes(params, elem, optimizer: str, zero, dp, fp32_grads=False, fp16=False) -> np.ndarray:
    """Bytes of weights, gradients, master weights and optimizer states for ``params``
    parameters on one GPU, with ZeRO stage ``zero`` over ``dp`` data-parallel GPUs;
    ``fp32_grads``: the engine accumulates gradients in fp32 (see the module docstring), ``fp16``:
    the plans train in fp16 (which keeps fp16 gradients and an fp32 copy with the optimizer)."""
    elem = np.asarray(elem, dtype=float)
    dp = np.maximum(np.asarray(dp, dtype=float), 1.0)
    mixed = elem < 4
    master = np.where(mixed, 4.0, 0.0)
    main = np.asarray(fp32_grads) & mixed
    grad = np.where(main & ~np.asarray(fp16), 4.0, elem)
    copy = np.where(main & np.asarray(fp16), 4.0, 0.0)  # fp16: the optimizer's fp32 gradients
    weights = np.where(zero >= 3, elem / dp, elem)
    grads = np.where(zero >= 2, grad / dp, grad)
    states = (master + copy + STATE_BYTES[optimizer]) / np.where(zero >= 1, dp, 1.0)
    return params * (weights + grads + states)


def activations(m: dict, b, elem, tp, sp, recompute, cp=1, fp8=False) -> tuple[np.ndarray, np.ndarray]:
    """(stored under ``recompute``, stored without recomputation): bytes of one transformer
    layer's activations per microbatch on one GPU, both from one pass over the terms (the
    second is the layer being recomputed under full recomputation); ``fp8``: the linear layers
    keep FP8 inputs (see the module docstring)."""
    s, h, a, kv, hd = m["seq_len"], m["d_model"], m["n_heads"], m["n_kv_heads"], m["head_dim"]
    k = m["moe"]["top_k"] + (m["moe"].get("n_shared") or 0) if m.get("moe") else 1  # experts a token uses
    ff = m["moe"].get("d_ff", m["d_ff"]) if m.get("moe") else m["d_ff"]
    up = ff * (2 if m["activation"] in ("swiglu", "geglu") else 1)
    drop = 1.0 if m.get("dropout") else 0.0
    t = np.asarray(tp, dtype=float)
    whole_div = np.where(sp, t, 1.0)
    sb = s * np.asarray(b, dtype=float) / np.asarray(cp, dtype=float)
    post = 2 * h if m.get("post_norms") else 0  # Gemma 2's norms of the branch outputs: their inputs
    gemm = np.where(fp8, 1.0, elem)  # bytes of a stored linear-layer input
    whole = sb * (elem * (2 * h + post) + gemm * (h + k * h) + 2 * drop * h)
    qk = (a + kv) * hd if m.get("qk_norm") else 0  # the per-head norms keep their inputs
    mla = m.get("mla") or {}
    vd = mla.get("v_head_dim", hd)
    # MLA's query and key/value latents, kept for their norms and up-projections; the down
    # projections are not split by tensor parallelism (Megatron-Core duplicates them)
    latents = 2 * ((mla.get("q_lora_rank") or 0) + mla.get("kv_lora_rank", 0))
    if latents:  # MLA only: no column passes for the other attentions
        whole = whole + sb * elem * latents
    split = sb * (elem * ((a + kv) * hd + kv * vd + a * vd + qk + k * up) + gemm * k * ff)
    split = split + sb * np.where(fp8, a * vd, 0.0)  # the output projection's FP8 input
    if m.get("attention") == "flash":
        scores = 4.0 * a * sb
    else:
        scores = a * s * sb * (elem + drop * (1 + elem))
    kept = np.where(recompute >= SELECTIVE, 0.0, scores)
    base = whole / whole_div + split / t
    inputs = elem * sb * h / whole_div
    return np.where(recompute == FULL, inputs, base + kept / t), base + scores / t


def layer_activations(m: dict, b, elem, tp, sp, recompute, cp=1, fp8=False) -> np.ndarray:
    """Bytes of one transformer layer's stored activations per microbatch on one GPU (see the
    module docstring); ``m`` is the model description with ``dims`` filled in. Context
    parallelism keeps ``s / cp`` tokens per GPU, whose scores span all ``s`` keys."""
    return activations(m, b, elem, tp, sp, recompute, cp, fp8)[0]


def logits_bytes(m: dict, b, tp, cp=1) -> np.ndarray:
    """fp32 logits the loss keeps on the last stage (vocabulary-parallel: vocab / t each; the
    ``s / cp`` tokens of a context-parallel GPU)."""
    tokens = m["seq_len"] * np.asarray(b, dtype=float) / np.asarray(cp, dtype=float)
    return 4.0 * tokens * np.ceil(m["vocab"] / np.asarray(tp, dtype=float))
