"""AllReduce with latency and bandwidth terms (alpha-beta), flat and hierarchical.

Costs follow Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
Operations in MPICH" (IJHPCA 2005): with ``k`` participants, a message of ``S`` bytes, a
per-step latency ``a`` and a per-direction bandwidth ``B``:

  ring       2(k-1) a + 2(k-1)/k S/B   (reduce-scatter then all-gather; Patarasuk and Yuan 2009)
  tree       2 ceil(log2 k) (a + S/B)  (binomial reduce then broadcast)
  butterfly  ceil(log2 k) (a + S/B)    (recursive doubling)
  onetoall   2(k-1) (a + S/B)          (a parameter server receives and sends k-1 messages)

``B`` is the achievable bandwidth: the link's peak times its efficiency, which is NCCL's *bus
bandwidth* over the peak (nccl-tests reports busbw = algbw x 2(k-1)/k for AllReduce, the
ring's per-link rate, so a measured busbw is directly the ring's B).

Hierarchical (several nodes, ``g`` GPUs per node; as NCCL and Horovod do): a ring
reduce-scatter inside the node over its own link, the scheme across nodes on S/g per GPU (the
g GPUs of a node run their inter-node AllReduces at once, so each gets its share of the node's
network bandwidth), and a ring all-gather inside the node.
"""

from __future__ import annotations

import numpy as np

from costs.comm import SCHEME_NAMES


def _log2(k):
    return np.ceil(np.log2(np.maximum(k, 1)))


def flat(scheme, nbytes, k, bw, lat):
    """Seconds of one AllReduce of ``nbytes`` over ``k`` peers (arrays broadcast)."""
    k = np.maximum(np.asarray(k, dtype=float), 1.0)
    t = nbytes / bw
    ring = 2.0 * (k - 1) * lat + 2.0 * (k - 1) / k * t
    tree = 2.0 * _log2(k) * (lat + t)
    butterfly = _log2(k) * (lat + t)
    onetoall = 2.0 * (k - 1) * (lat + t)
    index = {name: i for i, name in enumerate(SCHEME_NAMES)}
    out = np.select(
        [scheme == index["ring"], scheme == index["tree"], scheme == index["butterfly"]],
        [ring, tree, butterfly],
        onetoall,
    )
    return np.where(k > 1, out, 0.0)


def _ring_half(nbytes, g, bw, lat):
    """A ring reduce-scatter (or all-gather): (g-1) a + (g-1)/g S/B."""
    return np.where(g > 1, (g - 1) * lat + (g - 1) / np.maximum(g, 1) * nbytes / bw, 0.0)


def allreduce(scheme, nbytes, workers, per_node, intra_bw, intra_lat, net_bw, net_lat, nics_per_node=None):
    """Seconds to AllReduce ``nbytes`` over ``workers`` GPUs, ``per_node`` to a node.

    Bandwidths are achievable (peak x efficiency), per direction. ``nics_per_node`` (default:
    one per GPU, the catalog's convention for inter-node links) sets each GPU's share of the
    node's network bandwidth: net_bw x min(nics, g) / g.
    """
    workers = np.asarray(workers, dtype=float)
    g = np.minimum(np.asarray(per_node, dtype=float), workers)
    g = np.maximum(g, 1.0)
    nodes = np.ceil(workers / g)
    nics = g if nics_per_node is None else np.asarray(nics_per_node, dtype=float)
    share = net_bw * np.minimum(nics, g) / g
    single = flat(scheme, nbytes, workers, intra_bw, intra_lat)
    inner = 2.0 * _ring_half(nbytes, g, intra_bw, intra_lat)
    multi = inner + flat(scheme, nbytes / g, nodes, share, net_lat)
    out = np.where(nodes > 1, multi, single)
    return np.where(workers > 1, out, 0.0)
