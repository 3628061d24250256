"""AllReduce schemes as pure, vectorised functions, in a registry.

Every scheme has the signature ``f(nbytes, workers, bandwidth, latency, ppp) -> seconds``
with numpy arrays that broadcast: ``nbytes`` is the message (the gradients, bytes),
``bandwidth`` the per-direction link bandwidth (bytes/s), ``latency`` the one-way latency (s),
``ppp`` PALEO's PPP_comm, which divides the bandwidth term.

PALEO's three schemes (Qi et al. 2017 §3; paleo-model.md §B.2) are copied exactly, including
the code's choices the paper words differently: OneToAll uses K-1 rather than K, the tree height
is ceil(log2 K), and none has a latency term. Ring AllReduce is planner's addition: a
reduce-scatter and an all-gather of K-1 steps each, moving 2(K-1)/K of the message per worker
(Patarasuk and Yuan 2009), with one link latency per step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Scheme = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _link_time(nbytes, bandwidth, ppp):
    """PALEO's T_link: bytes over the link bandwidth, divided by PPP_comm (decimal units)."""
    return nbytes / (bandwidth * ppp)


def _height(workers):
    """ceil(log2 K), with h(1) = 0."""
    return np.ceil(np.log2(np.maximum(workers, 1)))


def one_to_all(nbytes, workers, bandwidth, latency, ppp):
    """A parameter server sends to and receives from K-1 workers: 2 (K-1) T_link(S)."""
    return 2.0 * (workers - 1) * _link_time(nbytes, bandwidth, ppp)


def tree(nbytes, workers, bandwidth, latency, ppp):
    """Reduce up a binary tree, broadcast down: 2 ceil(log2 K) T_link(S)."""
    return 2.0 * _height(workers) * _link_time(nbytes, bandwidth, ppp)


def butterfly(nbytes, workers, bandwidth, latency, ppp):
    """Butterfly AllReduce: ceil(log2 K) exchange rounds of the full message."""
    return _height(workers) * _link_time(nbytes, bandwidth, ppp)


def ring(nbytes, workers, bandwidth, latency, ppp):
    """Ring AllReduce: 2(K-1)/K of the message per worker plus 2(K-1) link latencies."""
    k = np.maximum(workers, 1)
    steps = 2.0 * (k - 1)
    return steps / k * _link_time(nbytes, bandwidth, ppp) + steps * latency


SCHEMES: dict[str, Scheme] = {
    "onetoall": one_to_all,
    "tree": tree,
    "butterfly": butterfly,
    "ring": ring,
}
SCHEME_NAMES = tuple(SCHEMES)
PALEO_SCHEMES = ("onetoall", "tree", "butterfly")


def allreduce(scheme_index, nbytes, workers, per_node, intra_bw, intra_lat, net_bw, net_lat, ppp):
    """Seconds to AllReduce ``nbytes`` over ``workers`` GPUs, ``per_node`` to a node.

    One node: the scheme runs over the intra-node link. Several nodes: a hierarchical
    AllReduce (as NCCL and Horovod do): a ring reduce-scatter inside each node, the scheme
    across nodes on 1/per_node of the message (each GPU drives its own share), and a ring
    all-gather inside the node. With one GPU per node this is exactly the flat scheme over
    the network, i.e. PALEO's model. ``scheme_index`` indexes :data:`SCHEME_NAMES`.
    """
    scheme_index, nbytes, workers, per_node = np.broadcast_arrays(scheme_index, nbytes, workers, per_node)
    out = np.zeros(scheme_index.shape, dtype=float)
    g = np.minimum(per_node, workers).astype(float)
    nodes = np.ceil(workers / g)
    single = nodes <= 1
    intra_bw, intra_lat, net_bw, net_lat, ppp = (
        np.broadcast_to(x, out.shape) for x in (intra_bw, intra_lat, net_bw, net_lat, ppp)
    )
    inner = np.where(g > 1, ring(nbytes, g, intra_bw, intra_lat, ppp), 0.0)
    for i, name in enumerate(SCHEME_NAMES):
        mask = scheme_index == i
        if not mask.any():
            continue
        f = SCHEMES[name]
        m1 = mask & single
        if m1.any():
            out[m1] = f(nbytes[m1], workers[m1], intra_bw[m1], intra_lat[m1], ppp[m1])
        m2 = mask & ~single
        if m2.any():
            out[m2] = inner[m2] + f(nbytes[m2] / g[m2], nodes[m2], net_bw[m2], net_lat[m2], ppp[m2])
    out[workers <= 1] = 0.0  # one worker never communicates, whatever its links
    return out
