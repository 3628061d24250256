"""Optimizer-step traffic and the overlap of gradient AllReduce with the backward pass.

Optimizer step (a memory-bound elementwise pass over the fp32 parameters; PyTorch AMP keeps
parameters, gradients and optimizer states in fp32, Micikevicius et al. 2018), bytes per
parameter:

  sgd       read w, g; write w                                  3 x 4 = 12
  momentum  + read and write the momentum buffer                5 x 4 = 20
  adam      + read and write the first and second moments       7 x 4 = 28

fp16 adds GradScaler's unscale (read and write g: 8 B) before the step; bf16 needs no loss
scaling. The 16-bit weight copy is written in the forward pass by autocast (see
:mod:`costs.modern.roofline`, ``mixed``).

Gradient buckets (PyTorch DDP, Li et al., "PyTorch Distributed", VLDB 2020 §3.2.3; default
25 MB): with ``B = ceil(grad_bytes / bucket)`` buckets, bucket ``i`` is ready after ``i b``
of the backward (``b = T_bwd / B``) and takes ``c = C / B`` to reduce; reductions run one
after another, so the last one ends at ``max(b + C, T_bwd + c)`` and the exposed
communication (what the backward cannot hide) is ``max(b + C - T_bwd, c)``, within ``[c, C]``.

For data-parallel plans the evaluator uses per-layer times instead (:func:`buckets`,
:func:`exposed_layerwise`): DDP fills buckets with gradients in reverse layer order, a bucket
is ready when the backward of its lowest layer is done, and the reductions run in order, so
the last ends at ``max_j(ready_j + C x share_j)`` (``share_j``: bytes in bucket j and later
over all bytes) -- a max-plus closed form that vectorises over plans.

Two costs of data parallelism that the alpha-beta AllReduce does not see:

- Stragglers (:func:`straggler_wait`): every GPU of a synchronous step waits at the gradient
  AllReduce for the slowest one (Dean and Barroso, "The Tail at Scale", CACM 56(2) 2013: a
  fan-out waits for its slowest part; Chen et al., "Revisiting Distributed Synchronous SGD",
  arXiv:1604.00981, 2016: synchronous SGD pays for its stragglers; Mohan et al., "Analyzing and
  Mitigating Data Stalls in DNN Training", PVLDB 14(5) 2021: one GPU's input stall delays every
  GPU at the synchronisation). With each GPU's step time ``T (1 + cv Z)``, ``Z`` standard normal
  and independent, the step lasts ``T (1 + cv e_n)`` on ``n`` GPUs, ``e_n`` the expected maximum
  of ``n`` standard normals (:func:`expected_max_normal`: 0, 0.564, 1.029, 1.424, 1.766 for n = 1,
  2, 4, 8, 16): the wait grows with the GPU count, slowly (about sqrt(2 ln n)).
- Interference (:func:`overlap_slowdown`): NCCL runs the hidden AllReduce as kernels beside the
  backward's, on the same SMs and memory; the backward slows by a fraction of the time they run.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

OPTIMIZERS = ("sgd", "momentum", "adam")
# fp32 bytes moved per parameter by one optimizer step (see the module docstring)
_STEP_BYTES = {"sgd": 12.0, "momentum": 20.0, "adam": 28.0}
# elementwise kernels per parameter tensor (PyTorch's per-tensor implementation: sgd add_;
# momentum mul_+add_ on the buffer, add_ on w; adam: 2 moment updates, sqrt, div, addcdiv)
_STEP_KERNELS = {"sgd": 1.0, "momentum": 3.0, "adam": 5.0}
_UNSCALE_BYTES = 8.0  # GradScaler.unscale_: read and write each fp32 gradient
FP16_INDEX = 2  # hardware.PRECISIONS.index("fp16")


def check_optimizer(name: str) -> None:
    from costs.errors import PlannerError

    if name not in OPTIMIZERS:
        raise PlannerError(f"unknown optimizer '{name}' (valid: {', '.join(OPTIMIZERS)})")


def step_bytes(params, optimizer: str, precision) -> np.ndarray:
    """Bytes the optimizer step reads and writes for ``params`` parameters."""
    check_optimizer(optimizer)
    per = _STEP_BYTES[optimizer] + np.where(np.asarray(precision) == FP16_INDEX, _UNSCALE_BYTES, 0.0)
    return np.asarray(params, dtype=float) * per


def step_kernels(tensors, optimizer: str, precision) -> np.ndarray:
    """Kernels of one optimizer step over ``tensors`` parameter tensors."""
    check_optimizer(optimizer)
    per = _STEP_KERNELS[optimizer] + np.where(np.asarray(precision) == FP16_INDEX, 1.0, 0.0)
    return np.asarray(tensors, dtype=float) * per


def exposed(comm, backward, grad_bytes, bucket_bytes):
    """Communication the backward pass cannot hide (seconds), arrays broadcast.

    ``bucket_bytes <= 0`` or ``inf`` means no bucketing: nothing overlaps.
    """
    comm = np.asarray(comm, dtype=float)
    if not np.isfinite(bucket_bytes) or bucket_bytes <= 0:
        return comm
    buckets = np.maximum(np.ceil(np.asarray(grad_bytes, dtype=float) / bucket_bytes), 1.0)
    b = backward / buckets
    c = comm / buckets
    return np.clip(b + comm - backward, c, comm)


def loader_floor(samples_per_node, rate):
    """Seconds a node's data loader needs for its samples (0 where the rate is inf)."""
    rate = np.asarray(rate, dtype=float)
    return np.where(np.isfinite(rate), samples_per_node / np.where(rate > 0, rate, np.inf), 0.0)


def buckets(param_bytes: np.ndarray, bucket_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """DDP's buckets over layers in reverse order (gradients arrive last layer first).

    Returns (first layer of each bucket, the one whose gradient completes it; share of the
    gradient bytes in that bucket and every later one), buckets in the order they are reduced.
    """
    order = np.flatnonzero(param_bytes > 0)[::-1]  # reverse layer order, layers with gradients
    if order.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    size = param_bytes[order]
    before = np.concatenate([[0.0], np.cumsum(size)[:-1]])
    index = np.floor(before / bucket_bytes).astype(np.int64)  # a bucket closes once it is full
    last = np.flatnonzero(np.diff(np.append(index, index[-1] + 1)))  # last layer of each bucket
    total = size.sum()
    done = np.concatenate([[0.0], np.cumsum(size)[last][:-1]])
    return order[last], (total - done) / total


def exposed_layerwise(comm, ready, share):
    """Exposed AllReduce time with per-bucket ready times.

    ``ready`` (B, P): seconds into the backward at which each bucket's gradients are complete;
    ``share`` (B,): fraction of the gradient bytes in that bucket and all later ones. Buckets
    are reduced one after another, so the last ends at max_j(ready_j + share_j C); what the
    backward (which ends at ready of the last bucket or later) cannot hide is exposed.
    """
    end = np.max(ready + share[:, None] * comm[None, :], axis=0)
    return end


_GRID = np.linspace(-12.0, 12.0, 4801)  # N(0,1) mass outside +-12 is below 1e-32
# log of the standard normal CDF on the grid, log(erfc(-x / sqrt 2) / 2): exact to double
# precision down to -12 (erfc stays above 1e-33); computed once here rather than importing
# scipy.special, whose import alone costs a third of a second on every command
_LOG_CDF = np.log([0.5 * math.erfc(-x / math.sqrt(2.0)) for x in _GRID])


def expected_max_normal(n) -> np.ndarray:
    """E[max of ``n`` independent standard normals] (0 for n <= 1), arrays of any shape.

    Exact up to quadrature: the integral of x n phi(x) Phi(x)^(n-1) over x (the density of the
    largest order statistic), evaluated on a fine grid once per distinct ``n``.
    """
    n = np.asarray(n, dtype=float)
    un, inverse = np.unique(np.maximum(n, 1.0), return_inverse=True)
    # one 1-D integral per distinct n (cached): the value of an n never depends on which other
    # counts share the call, so a plan scores bit-for-bit the same alone or in any batch
    e = np.array([_expected_max(float(k)) for k in un])
    return e[inverse].reshape(n.shape)


@lru_cache(maxsize=4096)
def _expected_max(n: float) -> float:
    if n <= 1.0:
        return 0.0
    log_pdf = np.log(n) - 0.5 * _GRID**2 - 0.5 * np.log(2.0 * np.pi) + (n - 1.0) * _LOG_CDF
    return float(np.trapezoid(_GRID * np.exp(log_pdf), _GRID))


def straggler_wait(step, workers, cv) -> np.ndarray:
    """Seconds a synchronous step waits for its slowest GPU: ``step x cv x e_n`` for ``workers``
    GPUs of mean step time ``step`` (seconds) and coefficient of variation ``cv`` (see the module
    docstring); 0 on one GPU or with ``cv`` 0."""
    return np.asarray(step, dtype=float) * float(cv) * expected_max_normal(workers)


def overlap_slowdown(sync_total, exposed, fraction) -> np.ndarray:
    """Seconds the backward loses to the AllReduce kernels it overlaps: ``fraction`` of the
    hidden communication time (``sync_total - exposed``, seconds)."""
    hidden = np.maximum(np.asarray(sync_total, dtype=float) - exposed, 0.0)
    return float(fraction) * hidden
