"""Rank order: which GPUs each parallel group of a plan occupies.

A job numbers its GPUs node by node, and the launcher lays the parallel dimensions over those
numbers innermost first. Two orders are modelled, spelled as Megatron-Core spells its ``order``
argument (``initialize_model_parallel`` in megatron/core/parallel_state.py; Megatron-LM's
``--use-tp-pp-dp-mapping`` switches ``"tp-cp-ep-dp-pp"`` to ``"tp-cp-ep-pp-dp"``,
megatron/training/initialize.py, github.com/NVIDIA/Megatron-LM at d98e8a64, read 2026-11-25):

  ``tp-cp-ep-dp-pp`` (Megatron-Core's default): the pipeline is outermost. A data-parallel group
      (with context parallelism: the ``d c`` GPUs holding the same weights) fills ``t c d``
      consecutive GPUs; a pipeline's ``p`` stages are ``t c d`` apart, spanning the whole job.
  ``tp-cp-ep-pp-dp`` (Llama 3's [TP, CP, PP, DP], Dubey et al. 2024, arXiv:2407.21783, §3.3.2):
      the pipeline sits inside data parallelism. A pipeline's stages are ``t c`` apart, filling
      ``t c p`` consecutive GPUs; a data-parallel group is ``c`` consecutive context-parallel
      ranks (``t`` apart) repeated every ``t c p`` GPUs, spanning the whole job.

Tensor, context and expert groups come first in both (expert parallelism follows tensor
parallelism in Megatron-Core's expert ranks), so they occupy the same GPUs either way. The order
decides which GPUs a pipeline's sends and a gradient reduction cross: a node's worth of them when
tensor and context parallelism leave room in a node, and switch domains on a multi-tier fabric
(:mod:`costs.comm.fabric`).
"""

from __future__ import annotations

import numpy as np

ORDERS = ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")
MEGATRON, PP_INSIDE_DP = ORDERS  # the default; Llama 3's


def pipeline_span(order: str, t, c, p, workers) -> np.ndarray:
    """GPUs a pipeline's chain of ``p`` stages spans: the whole job (``workers``) with the
    pipeline outermost, ``t c p`` with it inside data parallelism."""
    whole = np.asarray(workers, dtype=float)
    return whole if order == MEGATRON else np.minimum(np.asarray(t * c * p, dtype=float), whole)


def data_span(order: str, t, c, p, dpc) -> np.ndarray:
    """GPUs a data-parallel group of ``dpc = d c`` ranks (those holding the same weights) spans:
    ``t d c`` with the pipeline outermost; with it inside, the whole job ``t c p d`` once ``d > 1``
    (``t c`` otherwise)."""
    t, c, p, dpc = (np.asarray(x, dtype=float) for x in (t, c, p, dpc))
    if order == MEGATRON:
        return t * dpc
    d = dpc / np.maximum(c, 1.0)
    return np.where(d > 1.0, t * p * dpc, t * c)


def data_per_node(order: str, t, c, p, dpc, per_node) -> np.ndarray:
    """Members of one data-parallel group of ``dpc = d c`` ranks in a node of ``per_node`` GPUs
    (at least 1): ``per_node / t`` of them with the pipeline outermost; with it inside, ``c``
    context-parallel ranks per block of ``t c`` GPUs and one block per ``t c p`` GPUs, so
    ``per_node / t`` while a node holds at most one block, else ``c`` times the pipelines a node
    holds."""
    t, c, p, dpc, g = (np.asarray(x, dtype=float) for x in (t, c, p, dpc, per_node))
    dense = np.floor(g / t)
    if order == MEGATRON:
        return np.clip(dense, 1.0, dpc)
    d = dpc / np.maximum(c, 1.0)
    spread = c * np.clip(np.floor(g / (t * c * p)), 1.0, d)
    return np.clip(np.where(g <= t * c, dense, spread), 1.0, dpc)
