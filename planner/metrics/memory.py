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
USABLE_FRACTION = 0.9  # of device memory: the CUDA context and allocator slack take the rest
_PARAM_BYTES = {"fp32": 8.0, "tf32": 8.0, "fp16": 8.0, "bf16": 8.0, "fp8": 8.0}  # weights+grads(+master)


def bytes_per_param(precision: str, optimizer: str) -> float:
    """Bytes one parameter occupies during training (see the module docstring)."""
    return _PARAM_BYTES[precision] + OPTIMIZERS[optimizer]


def per_gpu(local_params: np.ndarray, activation_bytes: np.ndarray, param_bytes: np.ndarray) -> np.ndarray:
    """Bytes needed on one GPU."""
    return local_params * param_bytes + activation_bytes
