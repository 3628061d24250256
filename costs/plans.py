"""Training plans as columns, and the per-plan results every rule set returns.

A plan is one row of :class:`Plans`; :func:`plans` broadcasts scalars and arrays into one flat
set. :class:`Breakdown` holds the evaluator's per-plan results (seconds, bytes, parameters).
Kept apart from :mod:`costs.model` so every evaluator (PALEO's, the modern one) can import them
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class Plans:
    """Training plans as equal-length columns. Build with :func:`plans`."""

    device: np.ndarray  # index into the DeviceTable
    batch: np.ndarray  # samples per worker per microbatch (per iteration without accumulation)
    workers: np.ndarray  # GPUs (data-parallel replicas, or the model-parallel group)
    scheme: np.ndarray  # index into comm.SCHEME_NAMES
    network: np.ndarray  # index into the LinkTable: the link between nodes
    intra_link: np.ndarray  # index into the LinkTable: the link inside a node
    gpus_per_node: np.ndarray
    precision: np.ndarray  # index into hardware.PRECISIONS
    split: np.ndarray  # first model-parallel layer; n_layers means pure data parallelism
    ppp_comp: np.ndarray
    ppp_comm: np.ndarray
    pipeline: np.ndarray  # bool: per-layer max(compute, memory) instead of the sum
    accumulation: np.ndarray  # microbatches per optimizer step (gradient accumulation), >= 1
    # LLM parallelism (transformer nets under the modern rules; costs.llm.evaluator): workers = tp x cp x pp x dp
    tp: np.ndarray  # tensor-parallel degree (Megatron column/row split), inside a node
    pp: np.ndarray  # pipeline-parallel stages
    zero: np.ndarray  # ZeRO stage 0-3 over the data-parallel group (3 = FSDP's full sharding)
    recompute: np.ndarray  # activation recomputation: 0 none, 1 selective, 2 full
    sp: np.ndarray  # bool: sequence parallelism with tensor parallelism
    ep: np.ndarray  # expert-parallel degree (mixture of experts), within the data-parallel group
    interleave: np.ndarray  # virtual pipeline stages per GPU (1: plain 1F1B)
    tp_overlap: np.ndarray  # bool: tensor-parallel collectives overlapped with the GEMMs
    cp: np.ndarray  # context-parallel degree: the sequence split over cp GPUs (workers = tp cp pp dp)
    cp_comm: np.ndarray  # how context parallelism moves keys and values (costs.llm.context.CP_COMM)
    ep_overlap: np.ndarray  # bool: expert all-to-alls overlapped with another microbatch's compute
    schedule: np.ndarray  # pipeline schedule (costs.llm.pipeline.SCHEDULES): 0 1F1B

    def __len__(self) -> int:
        return int(self.device.shape[0])

    def take(self, index) -> Plans:
        """The plans selected by an index or mask."""
        return Plans(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


_DEFAULTS = dict(
    scheme=1,
    intra_link=0,
    gpus_per_node=1,
    precision=0,
    ppp_comp=1.0,
    ppp_comm=1.0,
    pipeline=False,
    accumulation=1,
    tp=1,
    pp=1,
    zero=0,
    recompute=0,
    sp=False,
    ep=1,
    interleave=1,
    tp_overlap=False,
    cp=1,
    cp_comm=0,
    ep_overlap=False,
    schedule=0,
)
_DTYPES = dict(ppp_comp=float, ppp_comm=float, pipeline=bool, sp=bool, tp_overlap=bool, ep_overlap=bool)


def plans(n_layers: int, **columns) -> Plans:
    """Broadcast scalars and arrays to one flat set of plans; ``split`` defaults to data parallel."""
    values = {**_DEFAULTS, "split": n_layers, **columns}
    missing = {f.name for f in fields(Plans)} - set(values)
    if missing:
        raise TypeError(f"plans() needs {', '.join(sorted(missing))}")
    arrays = np.broadcast_arrays(*(np.atleast_1d(np.asarray(values[f.name])) for f in fields(Plans)))
    return Plans(
        **{
            f.name: np.ascontiguousarray(a.ravel(), dtype=_DTYPES.get(f.name, np.int64))
            for f, a in zip(fields(Plans), arrays)
        }
    )


@dataclass(frozen=True)
class Breakdown:
    """Per-plan results. Times in seconds, memory in bytes, ``*_params`` in parameters."""

    forward: np.ndarray
    backward: np.ndarray
    update: np.ndarray
    sync: np.ndarray  # gradient AllReduce
    act_comm: np.ndarray  # activations exchanged by model-parallel layers
    local_params: np.ndarray  # parameters held (and updated) by one GPU
    sync_params: np.ndarray  # parameters whose gradients are AllReduced
    activation_bytes: np.ndarray  # activations kept for the backward pass, one GPU
    samples: np.ndarray  # samples per optimizer step, all workers and microbatches together

    @property
    def memory(self) -> np.ndarray | None:
        """Bytes one GPU needs, where the evaluator models it in full (None: planner's
        per-parameter accounting applies, planner.metrics.memory)."""
        return None

    @property
    def compute(self) -> np.ndarray:
        return self.forward + self.backward + self.update

    @property
    def comm(self) -> np.ndarray:
        return self.sync + self.act_comm

    @property
    def total(self) -> np.ndarray:
        return self.compute + self.comm

    @property
    def throughput(self) -> np.ndarray:
        """Samples per second."""
        return self.samples / self.total


def _unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True) for non-negative integers, in O(n) when the
    range is small enough for a lookup table (the common case: a few hundred distinct keys)."""
    hi = int(values.max()) + 1 if values.size else 1
    if hi > 1 << 24:
        return np.unique(values, return_inverse=True)
    lut = np.zeros(hi, dtype=np.int64)
    lut[values] = 1
    uniq = np.flatnonzero(lut)
    lut[uniq] = np.arange(uniq.size)
    return uniq, lut[values]
