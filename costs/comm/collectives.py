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

from costs.comm import fabric as fabrics
from costs.comm.schemes import SCHEME_NAMES


def _log2(k):
    return np.ceil(np.log2(np.maximum(k, 1)))


def _steps(scheme, k):
    """(latency steps, bandwidth factor) of each scheme over ``k`` peers: a flat AllReduce of S
    bytes takes ``steps x a + factor x S / B`` (see the module docstring)."""
    k = np.maximum(np.asarray(k, dtype=float), 1.0)
    log = _log2(k)
    index = {name: i for i, name in enumerate(SCHEME_NAMES)}
    ring, tree, fly = (scheme == index[x] for x in ("ring", "tree", "butterfly"))
    # ring and the parameter server take 2 (k - 1) steps; only the ring's bandwidth factor
    # differs from its steps (two selections, not two np.select over every scheme)
    pairs = 2.0 * (k - 1)
    steps = np.where(tree, 2.0 * log, np.where(fly, log, pairs))
    factor = np.where(ring, pairs / k, steps)
    return np.where(k > 1, steps, 0.0), np.where(k > 1, factor, 0.0)


def flat(scheme, nbytes, k, bw, lat):
    """Seconds of one AllReduce of ``nbytes`` over ``k`` peers (arrays broadcast)."""
    steps, factor = _steps(scheme, k)
    return steps * lat + factor * (nbytes / bw)


def ring(nbytes, k, bw, lat):
    """A ring all-reduce of ``nbytes`` over ``k`` GPUs on one link (:func:`flat`'s ring)."""
    return np.where(k > 1, 2.0 * (k - 1) * lat + 2.0 * (k - 1) / k * nbytes / bw, 0.0)


def affine(
    scheme,
    workers,
    per_node,
    intra_bw,
    intra_lat,
    net_bw,
    net_lat,
    nics_per_node=None,
    fabric=None,
    span=None,
    reduce=True,
):
    """(seconds, seconds per byte): an AllReduce of S bytes over ``workers`` GPUs, ``per_node``
    to a node, takes ``a + b S`` (flat inside one node; hierarchical across nodes, see
    :func:`allreduce`), so several message sizes cost one evaluation. On a ``fabric`` that is not
    flat (:mod:`costs.comm.fabric`) the group's members spread over ``span`` GPUs (default
    ``workers``): its tiers slow the scheme across nodes and add switch hops, and in-network
    reduction replaces it where ``reduce`` (per plan) says the result is an AllReduce: ZeRO's
    reduce-scatters and all-gathers, costed as halves of it, run as rings (a reduce-scatter sends
    ``(n-1)/n`` of the shard either way; an all-gather has nothing to reduce)."""
    workers = np.asarray(workers, dtype=float)
    g = np.maximum(np.minimum(np.asarray(per_node, dtype=float), workers), 1.0)
    nodes = np.ceil(workers / g)
    nics = g if nics_per_node is None else np.asarray(nics_per_node, dtype=float)
    share = net_bw * nics / g  # a node may have more NICs than GPUs (AWS p5: 32 for 8)
    multi = nodes > 1
    # one node: the scheme over all workers; several: ring reduce-scatter and all-gather inside
    # the node, the scheme across nodes on S / g per GPU
    steps, factor = _steps(scheme, np.where(multi, nodes, workers))
    inner = np.where(multi & (g > 1), 2.0 * (g - 1), 0.0)
    across_a, across_b = steps * net_lat, factor / g / share
    if fabric is not None and not fabric.flat:
        span = workers if span is None else np.asarray(span, dtype=float)
        across_a, across_b = _across(fabric, scheme, nodes, span, g, share, net_lat, steps, factor, reduce)
    a = np.where(multi, inner * intra_lat + across_a, steps * intra_lat)
    b = np.where(multi, inner / g / intra_bw + across_b, factor / intra_bw)
    on = workers > 1
    return np.where(on, a, 0.0), np.where(on, b, 0.0)


def _across(fab, scheme, nodes, span, g, share, net_lat, steps, factor, reduce=True):
    """(seconds, seconds per byte of S) of the part across nodes on a fabric that is not flat
    (:mod:`costs.comm.fabric`): the scheme with its tiers' slowdown and switch hops on every step,
    or, with in-network reduction where ``reduce``, one climb and return with the shard S / g sent
    once."""
    lat = net_lat + fabrics.hops(fab, span)
    a, b = steps * lat, factor / g / share * fabrics.slowdown(fab, scheme, nodes, span)
    if fab.in_network_reduction:
        sharp_a, sharp_b = fabrics.sharp_affine(fab, nodes, span, share, net_lat)
        a, b = np.where(reduce, sharp_a, a), np.where(reduce, sharp_b / g, b)
    return a, b


def allreduce(
    scheme, nbytes, workers, per_node, intra_bw, intra_lat, net_bw, net_lat, nics_per_node=None, fabric=None
):
    """Seconds to AllReduce ``nbytes`` over ``workers`` GPUs, ``per_node`` to a node.

    Bandwidths are achievable (peak x efficiency), per direction. ``nics_per_node`` (default:
    one per GPU, the catalog's convention for inter-node links) sets each GPU's share of the
    node's network bandwidth: net_bw x nics / g. ``fabric`` (default: one non-blocking network)
    is the network's tiers, :mod:`costs.comm.fabric`.
    """
    a, b = affine(scheme, workers, per_node, intra_bw, intra_lat, net_bw, net_lat, nics_per_node, fabric)
    return a + b * nbytes
