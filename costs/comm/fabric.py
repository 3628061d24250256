"""Multi-tier network fabrics: how much of its NIC a GPU keeps when its group spans switch domains.

A fabric is a stack of switch *domains*, smallest first. A domain of a tier holds ``gpus`` GPUs
(NIC ports) and the links leaving it carry ``1 / oversubscription`` of what those GPUs' NICs bring
into it: Meta's Llama 3 RoCE cluster has racks of 16 GPUs inside pods of 3,072 at full bisection,
the pods joined at 1:7 (Dubey et al. 2024, arXiv:2407.21783, §3.3.1). The empty stack is one
non-blocking network, every GPU reaching every other at its NIC's rate: planner's default, and
what every function here returns unchanged.

Placement. A communication group's ``n`` members are spread evenly over a block of ``span``
consecutive GPUs, which the plan's rank order sets (:mod:`costs.comm.ranks`). In Megatron-Core's
default, ``initialize_model_parallel(order="tp-cp-ep-dp-pp")`` in megatron/core/parallel_state.py,
a data-parallel group spans ``t c d`` GPUs, an expert group ``t ep``, a pipeline all ``t c d p``;
in Llama 3's [TP, CP, PP, DP] (arXiv:2407.21783 §3.3.2; Megatron-Core's ``"tp-cp-ep-pp-dp"``) a
pipeline spans ``t c p`` and a data-parallel group all ``t c p d``. The job fills whole domains
from the first, and every group of the same kind communicates at once (all data-parallel rings of
a step; all pipeline sends of a 1F1B slot). A domain of ``D`` GPUs then holds ``m = n D / span``
members of each group crossing it, and a GPU's NIC share is ``b`` (the link's bandwidth times the
node's NICs over its GPUs). In Llama 3's order a data-parallel group with context parallelism is
``c`` ranks together, then one block every ``t c p`` GPUs: ``m`` is exact for domains holding
whole pipelines (``D >= t c p``) and undercounts it below; no catalog fabric oversubscribes a
domain that small (their racks and scalable units are at full bisection). A group whose span fits
in a domain but straddles two (a span that does not divide ``D``) is taken as inside it.

  ring (and a pipeline's chain of sends): a ring enters and leaves each domain it crosses once,
      so each of the ``D / max(m, 1)`` rings with members in a domain sends one NIC stream over
      its uplinks: demand ``b D / max(m, 1)`` against capacity ``b D / o``. The ring's pipelined
      steps run at its slowest edge, so its bandwidth is ``b`` times

          share = min over crossed tiers of min(1, max(m, 1) / o)

      A ring with at least ``o`` members in each domain is not slowed at all: dividing by the
      oversubscription would be wrong for it.
  all-to-all: a GPU spreads its inter-node bytes evenly over the other nodes of its group
      (``g`` GPUs a node), so a share ``f = (span - D) / (span - g)`` of them leaves its domain
      (``1 - 1/P`` across ``P`` domains when nodes are many). All ``D`` GPUs send at once: demand
      ``f b D``, capacity ``b D / o``,  share = min over crossed tiers of min(1, 1 / (o f)).
  butterfly and tree (recursive doubling; a binomial reduce then broadcast): their ``log2 n``
      steps run one after the other, step ``j`` between members ``2^j`` apart, which leave the
      domain once ``2^j >= m``. In a butterfly step every member sends: share ``min(1, 1/o)``; in a
      tree step ``2^-(j+1)`` of them: ``min(1, 2^(j+1) / o)``. The bandwidth term is the sum of the
      steps', so its slowdown is the mean over steps of ``1 / share``.
  parameter server (onetoall): the server's own NIC serialises its ``k - 1`` messages, so the
      uplinks never carry more than one stream of it: not slowed.

Latency: a message that leaves a domain climbs to the tier above and comes down again, two more
switches than one inside it. Each tier a group crosses adds ``2 x hop_latency`` to the link's
latency, which covers the path through one leaf switch (configs/networks.toml).

In-network reduction (NVIDIA SHARP on Quantum InfiniBand switches, used by NCCL's CollNet): the
switches reduce the data as it climbs the fabric and send the result down, so each GPU sends its
``S`` bytes once and receives the ``S`` reduced bytes once, instead of the ring's ``2(k-1)/k S``
each way ("eliminating the need to send data multiple times between endpoints", NVIDIA Quantum
firmware release notes, rev 27.2000.2046). Across nodes an AllReduce of ``S`` per GPU then takes
``S / b`` plus one climb and return: the link's latency and ``2 x hop_latency`` per tier crossed.
Each switch forwards one reduced stream upward, so oversubscription does not slow it. Only an
AllReduce gains: ZeRO's reduce-scatter sends ``(n-1)/n`` of the shard on a ring too, and an
all-gather has nothing to reduce, so they stay rings (:func:`costs.comm.collectives.affine`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costs.comm.schemes import SCHEME_NAMES
from costs.errors import SpecError


@dataclass(frozen=True)
class Tier:
    """One tier of switch domains: GPUs under one domain, and the downlink:uplink ratio of the
    links leaving it (1: full bisection)."""

    gpus: int
    oversubscription: float = 1.0


@dataclass(frozen=True)
class Fabric:
    """A network between nodes: its tiers (smallest domain first; empty: one non-blocking
    network), the latency each switch hop above a leaf adds (s), whether the switches reduce
    (SHARP), and the most GPUs it connects (None: no stated size)."""

    name: str = "nonblocking"
    tiers: tuple[Tier, ...] = ()
    hop_latency: float = 0.0
    in_network_reduction: bool = False
    max_gpus: int | None = None

    def __post_init__(self) -> None:
        sizes = [t.gpus for t in self.tiers]
        if any(s < 1 for s in sizes) or sizes != sorted(set(sizes)):
            raise SpecError(f"fabric {self.name}: tier sizes must be positive and increasing, got {sizes}")
        if any(t.oversubscription < 1.0 for t in self.tiers) or self.hop_latency < 0:
            raise SpecError(f"fabric {self.name}: oversubscription must be >= 1 and hop latency >= 0")

    @property
    def flat(self) -> bool:
        """True when every group sees the NIC's full rate and the link's latency (the default)."""
        blocking = any(t.oversubscription > 1.0 for t in self.tiers)
        return not (blocking or self.hop_latency > 0 or self.in_network_reduction)


NONBLOCKING = Fabric()
_RING, _TREE, _FLY = (SCHEME_NAMES.index(s) for s in ("ring", "tree", "butterfly"))


def _tiers(fab: Fabric):
    return ((float(t.gpus), float(t.oversubscription)) for t in fab.tiers)


def ring_share(fab: Fabric, members, span) -> np.ndarray:
    """Share of the NIC rate a ring (or chain) of ``members`` spread over ``span`` GPUs keeps:
    min over the tiers it crosses of min(1, max(m, 1) / o), ``m = members D / span``."""
    members, span = np.asarray(members, dtype=float), np.asarray(span, dtype=float)
    share = np.ones(np.broadcast(members, span).shape)
    for d, o in _tiers(fab):
        m = np.maximum(members * d / np.maximum(span, 1.0), 1.0)
        share = np.where(span > d, np.minimum(share, np.minimum(1.0, m / o)), share)
    return share


def spread_share(fab: Fabric, span, per_node) -> np.ndarray:
    """Share of the NIC rate an all-to-all over ``span`` GPUs (``per_node`` a node) keeps:
    min over crossed tiers of min(1, 1 / (o f)), ``f = (span - D) / (span - per_node)``."""
    span, g = np.asarray(span, dtype=float), np.asarray(per_node, dtype=float)
    share = np.ones(np.broadcast(span, g).shape)
    for d, o in _tiers(fab):
        f = (span - d) / np.maximum(span - g, 1.0)
        share = np.where(
            span > d, np.minimum(share, np.minimum(1.0, 1.0 / (o * np.maximum(f, 1e-12)))), share
        )
    return share


def _step_slowdown(fab: Fabric, tree, members, span) -> np.ndarray:
    """Mean over the ceil(log2 n) steps of a butterfly (or binomial tree) of 1 / the step's share."""
    n = np.maximum(members, 1.0)
    steps = np.ceil(np.log2(n))
    total = np.zeros(np.broadcast(n, span, tree).shape)
    for j in range(int(steps.max(initial=0.0))):
        share = np.ones_like(total)
        for d, o in _tiers(fab):
            m = n * d / np.maximum(span, 1.0)
            senders = np.where(tree, 2.0 ** -(j + 1), 1.0)  # share of members sending at step j
            cross = (span > d) & (2.0**j >= m)
            share = np.where(cross, np.minimum(share, np.minimum(1.0, 1.0 / (o * senders))), share)
        total = total + np.where(j < steps, 1.0 / share, 0.0)
    return np.where(steps > 0, total / np.maximum(steps, 1.0), 1.0)


def slowdown(fab: Fabric, scheme, members, span) -> np.ndarray:
    """Multiplier (>= 1) of the bandwidth term of ``scheme`` across ``members`` nodes spread over
    ``span`` GPUs (see the module docstring; 1 everywhere on a non-blocking fabric)."""
    members, span = np.asarray(members, dtype=float), np.asarray(span, dtype=float)
    scheme = np.asarray(scheme)
    ring = 1.0 / ring_share(fab, members, span)
    steps = _step_slowdown(fab, scheme == _TREE, members, span)
    return np.select([scheme == _RING, (scheme == _TREE) | (scheme == _FLY)], [ring, steps], 1.0)


def hops(fab: Fabric, span) -> np.ndarray:
    """Seconds a message across ``span`` GPUs adds to the link's latency: 2 switch hops per tier
    whose domain the span exceeds."""
    span = np.asarray(span, dtype=float)
    crossed = sum((span > d).astype(float) for d, _ in _tiers(fab)) if fab.tiers else np.zeros(span.shape)
    return 2.0 * fab.hop_latency * crossed


def path(fab: Fabric | None, bw, lat, members, span, spread=False, per_node=1.0):
    """(bandwidth, latency) of a ring or chain (``spread`` False) or an all-to-all (``spread``
    True, per plan) of ``members`` over ``span`` GPUs on a link of ``bw`` bytes/s and ``lat`` s.
    Call it on network paths only; None or a flat fabric returns them unchanged."""
    if fab is None or fab.flat:
        return bw, lat
    share = np.where(spread, spread_share(fab, span, per_node), ring_share(fab, members, span))
    return bw * share, lat + hops(fab, span)


def sharp_affine(fab: Fabric, nodes, span, share, net_lat):
    """(seconds, seconds per byte of one GPU's shard) of the in-network AllReduce across
    ``nodes`` nodes spanning ``span`` GPUs: one climb and return, the shard sent and received once
    at the NIC share ``share`` (bytes/s)."""
    on = np.asarray(nodes) > 1
    return np.where(on, net_lat + hops(fab, span), 0.0), np.where(on, 1.0 / share, 0.0)
