"""Expert-parallel all-to-alls of a mixture-of-experts block: bytes, links, and overlap.

Each MoE layer moves every token's hidden state to the GPUs of its ``top_k`` routed experts
(dispatch) and back (combine), forward, and the gradients the same way backward: four
all-to-alls over the ``ep`` GPUs of the expert-parallel group per microbatch (Lepikhin et al.
2020, arXiv:2006.16668, §2.2); two more with full recomputation. Per GPU and all-to-all:

  inside a node   the copies bound for experts on other GPUs of the node go over NVLink
  between nodes   an EP group wider than a node (``t ep > per_node``) spans ``N = t ep / per_node``
                  nodes; the node's ``per_node`` GPUs share its ``nics`` network ports. The two
                  links run at once (NCCL's all-to-all posts every peer together; DeepEP forwards
                  IB traffic into NVLink as it arrives, DeepSeek-V3 report §3.2.2), so the slower
                  one binds; on a multi-tier fabric the network's rate is the share an all-to-all
                  of ``t ep`` GPUs keeps (:func:`costs.comm.fabric.spread_share`)

Two ways a stack runs them (the plan's ``ep_overlap``):

  exposed      a plain all-to-all (Megatron's alltoall dispatcher): one copy of a token per
               routed expert, ``k (N - 1) / N`` of them to other nodes; the pass waits for it
  overlapped   DeepEP's normal kernels under DualPipe or Megatron-Core's
               --overlap-moe-expert-parallel-comm: a token crosses the network once per target
               node and is forwarded over NVLink to its experts there (DeepEP README: "forwarding
               data from NVLink domain to RDMA domain"); routing limited to ``group_top_k`` of
               ``groups`` expert groups caps the nodes a token reaches (DeepSeek-V3 report §2.1.2,
               §4.2: at most 4 nodes); under fp8 the dispatch directions (forward dispatch, the
               backward's gradient dispatch) send FP8 with one fp32 scale per 128 values, the
               combines BF16 (report §3.3.3; DeepEP: "FP8 dispatching and BF16 combining"). The
               all-to-alls of one microbatch run beside the compute of another (report §3.2.1:
               DualPipe pairs a forward and a backward chunk so that "both all-to-all and PP
               communication can be fully hidden"); only what that compute cannot cover is
               exposed, and the communication kernels hold ``COMM_SM_SHARE`` of the SMs meanwhile,
               which slows the compute they hide behind

Achieved bandwidths on H800 (DeepEP normal kernels, EP 8 to 64: 153-158 GB/s NVLink, 43-58 GB/s
RDMA of a 400 Gb/s CX7 port; https://github.com/deepseek-ai/DeepEP/blob/dd758caf451848bd150e1046af3d0a73e5fff38d/docs/legacy.md)
are what the link tables' peaks times their efficiencies give; no separate kernel constant.
"""

from __future__ import annotations

import numpy as np

from costs.comm import fabric

# DeepSeek-V3 report (arXiv:2412.19437 v2) §3.5.1: "we allocate 20 out of the 132 SMs available in
# the H800 GPU" to the overlapped all-to-all.
COMM_SM_SHARE = 20.0 / 132.0
# DeepSeek-V3 report §3.3.2: activations are quantized in 1 x 128 tiles, one fp32 scale each.
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128.0
_BF16_BYTES = 2.0


def remote_nodes(k: float, nodes, cap=None):
    """Expected number of other nodes a token's ``k`` routed experts sit on, experts spread
    evenly over ``nodes`` nodes (draws with replacement); at most ``cap`` nodes in all."""
    nodes = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    reached = nodes * (1.0 - (1.0 - 1.0 / nodes) ** k)  # distinct nodes, own included
    if cap is not None:
        reached = np.minimum(reached, cap)
    return reached * (nodes - 1.0) / nodes


def node_cap(moe: dict, nodes):
    """Nodes a token may reach under group-limited routing (None: unlimited): ``group_top_k`` of
    ``groups`` expert groups, each group on ``nodes / groups`` nodes (at least one)."""
    groups, top = moe.get("groups"), moe.get("group_top_k")
    if not groups or not top:
        return None
    return np.minimum(nodes, top * np.maximum(np.asarray(nodes, dtype=float) / groups, 1.0))


def all_to_all_s(c, moe: dict, recompute_full, compute, nics) -> np.ndarray:
    """Exposed seconds of one MoE layer's all-to-alls per microbatch (forward, backward, and
    the recomputed forward), per plan. ``c`` carries the plan columns (tokens' ``hidden`` bytes
    at the activation precision ``elem``, ``e``, ``t``, ``per_node``, links, ``fp8``,
    ``ep_overlap``); ``compute`` is the layer's compute the overlap may hide behind (s);
    ``nics`` the network ports per node (None: one per GPU)."""
    k, e = float(moe["top_k"]), c.e
    tokens = c.hidden / c.elem  # elements of the microbatch's hidden states on one GPU
    group = c.t * e
    nodes = np.maximum(group / c.per_node, 1.0)
    local = np.minimum(group, c.per_node) / c.t  # EP ranks of the group in one node
    ports = c.per_node if nics is None else np.asarray(nics, dtype=float)
    net_share = c.per_node / np.maximum(ports, 1e-9)  # GPUs sharing one port's bandwidth
    over = c.ep_overlap
    some = bool(over.any())  # most batches have no overlapped plan: DeepEP's columns not built
    # copies leaving the node, per token: one per expert (plain), one per node (DeepEP)
    remote = k * (nodes - 1.0) / nodes
    nvlink = k * (local - 1.0) / np.maximum(e, 1.0)  # copies to the node's other EP ranks
    peers = e - local  # network messages: per rank (plain), per node (DeepEP)
    if some:
        remote = np.where(over, remote_nodes(k, nodes, node_cap(moe, nodes)), remote)
        nvlink = np.where(over & (nodes > 1), nvlink + remote, nvlink)  # forwarded IB arrivals
        peers = np.where(over, nodes - 1.0, peers)
    # a group of t ep GPUs on a multi-tier fabric: the share of its spread leaving a domain
    bw, lat = fabric.path(getattr(c, "fabric", None), c.net_bw, c.net_lat, e, group, True, c.per_node)

    def one(elem):
        net = tokens * elem * remote * net_share / bw + peers * lat
        intra = tokens * elem * nvlink / c.intra_bw + (local - 1.0) * c.intra_lat
        return np.maximum(np.where(nodes > 1, net, 0.0), intra)

    combine = one(c.elem)
    fp8 = over & c.fp8
    dispatch = np.where(fp8, one(np.minimum(FP8_DISPATCH_BYTES, c.elem)), combine) if fp8.any() else combine
    passes = 2.0 + recompute_full  # forward, backward, and the recomputed forward
    total = np.where(e > 1, passes * (dispatch + combine), 0.0)
    if not some:
        return total
    # Overlapped: the all-to-alls run beside the other microbatch's compute, which loses the
    # SMs the communication kernels hold; exposed is what the slowed compute cannot cover.
    slowed = compute / (1.0 - COMM_SM_SHARE)
    hidden = np.maximum(slowed, total) - compute
    return np.where(over & (e > 1), hidden, total)
