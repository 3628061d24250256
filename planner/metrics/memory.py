"""Memory per GPU: weights, gradients, optimizer state and activations.

bytes per parameter (Rajbhandari et al. 2020, "ZeRO", §3.1):
  fp32/tf32 training: weights 4 + gradients 4 + optimizer state
  fp16/bf16 mixed precision: weights 2 + gradients 2 + fp32 master weights 4 + optimizer state
  fp8 (Transformer Engine): as bf16; the FP8 copies of the weights live only while their GEMM runs
optimizer state: SGD 0, momentum 4 (one fp32 buffer), Adam 8 (two fp32 moments)
activations: every layer's output at the batch per worker in the training precision, all kept
  for the backward pass (PALEO's activation accounting, paleo-model.md §E.2).
"""

from __future__ import annotations

import numpy as np

OPTIMIZERS = {"sgd": 0.0, "momentum": 4.0, "adam": 8.0}
# Share of a GPU's memory a plan may fill: the CUDA context, NCCL's buffers and the caching
# allocator's fragmentation take the rest (--memory-headroom sets it). 0.9 of 80 GiB is 77.3e9
# bytes, which the published recipes below fit: NVIDIA's Llama 3 70B FP8 recipe on 64 H100
# (TP 4, PP 8, VP 5, 8k sequences, global batch 128; Megatron-Bridge performance summary, see
# configs/measurements/llm.csv) and Llama 3 405B's layout (TP 8, PP 16, 8k sequences, ZeRO-2:
# gradients and optimizer states sharded, Dubey et al. 2024, arXiv:2407.21783, §3.3) -- tests pin
# both (tests/test_memory_recipes.py).
USABLE_FRACTION = 0.9
_PARAM_BYTES = {"fp32": 8.0, "tf32": 8.0, "fp16": 8.0, "bf16": 8.0, "fp8": 8.0}  # weights+grads(+master)


def bytes_per_param(precision: str, optimizer: str) -> float:
    """Bytes one parameter occupies during training (see the module docstring)."""
    return _PARAM_BYTES[precision] + OPTIMIZERS[optimizer]


def per_gpu(local_params: np.ndarray, activation_bytes: np.ndarray, param_bytes: np.ndarray) -> np.ndarray:
    """Bytes needed on one GPU."""
    return local_params * param_bytes + activation_bytes
