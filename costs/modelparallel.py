"""Explicit model parallelism: score a spec whose ``ModelParallel`` blocks place layers on GPUs.

A PALEO spec may split part of a net with a ``ModelParallel`` block (``splits: S``):
:mod:`costs.specs.graph` copies its sublayers as ``block/sub@i`` with ``Layer.device = i``; every other
layer has ``device`` None, which is GPU 0. The net then runs as one model replica on
``max(device) + 1`` GPUs of the plan's type (paleo-model.md §B.3, §E.1).

The model, per plan (batch ``n`` = the plan's batch; ``plans.workers`` is ignored):

* Layer times are PALEO's, from :func:`costs.model.layer_times` at batch ``n``: forward is
  phase ``fwd``, backward is ``bwd_data + bwd_filter``.
* Fetch (§A.7): a layer whose parent lives on another GPU first receives the parent's output,
  ``n * prod(parent.out_shape) * element bytes`` (element bytes by precision), in
  ``bytes / (bandwidth * PPP_comm) + latency`` seconds. The link is the plan's intra-node link
  when both GPUs are in the same node (``device // gpus_per_node`` equal), else
  ``plans.network``. Backward sends the gradient of the same activation the other way, over
  the same link, at the same size.
* Forward: the critical (longest) path through the DAG, a layer starting once all its parents
  are done and fetched. Backward: the same on the reversed graph with backward times. This is
  PALEO's lower bound ("perfect parallelism" of the branches, §A.8), generalised from one
  nesting level of a nested list to any DAG. ``serialize_devices=True`` adds that a GPU runs its
  own layers one at a time, in topological order (a list schedule; it matters only where one
  GPU holds parallel branches, e.g. Inception modules outside the split).
* ``forward`` / ``backward`` are the critical paths without fetch times; ``act_comm`` is what
  the fetches add to them: (paths with fetches) - (paths without), forward plus backward.
* Update: the GPUs update their own parameters concurrently, so the time is the largest of
  PALEO's update (§A.5) over the GPUs; ``local_params`` is the most any GPU holds.
* One replica: no gradient AllReduce (``sync = 0``, ``sync_params = 0``) and ``samples = n``.
* ``activation_bytes`` is the largest, over the GPUs, of ``n * element bytes *`` the output
  elements of the layers it holds.

PALEO defects fixed here (paleo-model.md "Known defects", §F):

* F.12 device ids: one integer id type. An unsplit layer feeding split copy 0 is on the same
  GPU and pays no fetch (PALEO compares ``'0'`` with ``0`` and charges one).
* F.13 compounding halving: each transfer uses its link's bandwidth once; nothing is halved per
  cross-host parent.
* F.14 / F.15 bandwidth: transfers use the interconnect (intra-node link or network), never the
  GPU memory bandwidth, so more than 4 splits no longer crash, and hosts come from the plan's
  ``gpus_per_node`` rather than a fixed 4.
* F.8 nesting: the critical path handles any DAG, including nested branches.
* F.10 / units: fetches count bytes at the plan's precision, in decimal units, with PPP_comm and
  a latency term (PALEO: elements or GiB, no latency).
* §B.3 "no update": the update is costed (per GPU, concurrently).

The update follows the rule set like :func:`costs.model.evaluate` (PPP_comp is ignored when
``rules.update_ignores_ppp``). Vectorised like :func:`costs.model.evaluate`: compute is costed
once per unique (device, precision, PPP_comp, pipeline, batch); the only Python loops are over
layers (and GPUs), never over plans.
"""

from __future__ import annotations

import numpy as np

from costs.hardware import ELEMENT_SIZE, DeviceTable, LinkTable
from costs.model import Breakdown, Plans, layer_times, update_time
from costs.specs.coefficients import NetCosts


def layer_devices(costs: NetCosts) -> np.ndarray:
    """(L,) the GPU of every layer: its ``Layer.device``, or 0 for unsplit layers."""
    return np.array(
        [0 if s.layer.device is None else int(s.layer.device) for s in costs.net.layers], dtype=np.int64
    )


def n_devices(costs: NetCosts) -> int:
    """How many GPUs the spec places layers on: ``max(device) + 1``."""
    return int(layer_devices(costs).max()) + 1 if costs.n_layers else 1


def _phase_times(costs: NetCosts, plans: Plans, devices: DeviceTable) -> tuple[np.ndarray, np.ndarray]:
    """(L, P) forward and backward seconds per layer, costed once per unique compute combo."""
    ppp_values, ppp_index = np.unique(plans.ppp_comp, return_inverse=True)
    key = np.stack(
        [plans.device, plans.precision, ppp_index.ravel(), plans.pipeline.astype(np.int64), plans.batch],
        axis=1,
    )
    combos, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    t = layer_times(
        costs,
        devices,
        combos[:, 0],
        combos[:, 1],
        ppp_values[combos[:, 2]],
        combos[:, 3].astype(bool),
        combos[:, 4],
    )
    fwd = t[:, 0, :][:, inverse]
    bwd = (t[:, 1, :] + t[:, 2, :])[:, inverse]
    return fwd, bwd


def evaluate_explicit(
    costs: NetCosts,
    plans: Plans,
    devices: DeviceTable,
    links: LinkTable,
    *,
    serialize_devices: bool = False,
) -> Breakdown:
    """Score every plan on the spec's own layer placement; see the module docstring."""
    L = costs.n_layers
    P = len(plans)
    layers = costs.net.layers
    dev = layer_devices(costs)
    D = int(dev.max()) + 1 if L else 1
    fwd, bwd = _phase_times(costs, plans, devices)

    # Per-plan transfer terms.
    n = plans.batch.astype(float)
    elem = ELEMENT_SIZE[plans.precision]
    gpn = np.maximum(plans.gpus_per_node, 1)
    ppp_comm = plans.ppp_comm
    bw_in, lat_in = links.bandwidth[plans.intra_link], links.latency[plans.intra_link]
    bw_out, lat_out = links.bandwidth[plans.network], links.latency[plans.network]
    act = costs.act_elems.astype(float)

    def fetch(src: int, dst: int) -> np.ndarray | float:
        """Seconds to move layer ``src``'s output (or its gradient) between the two GPUs."""
        a, b = int(dev[src]), int(dev[dst])
        if a == b:
            return 0.0
        same_node = (a // gpn) == (b // gpn)
        bw = np.where(same_node, bw_in, bw_out)
        lat = np.where(same_node, lat_in, lat_out)
        return n * act[src] * elem / (bw * ppp_comm) + lat

    index = {s.name: i for i, s in enumerate(layers)}
    parents = [[index[p] for p in s.layer.parents] for s in layers]
    children: list[list[int]] = [[] for _ in range(L)]
    for i, ps in enumerate(parents):
        for p in ps:
            children[p].append(i)
    edge = {(p, i): fetch(p, i) for i, ps in enumerate(parents) for p in ps}

    def critical_path(times: np.ndarray, order, preds, cost) -> tuple[np.ndarray, np.ndarray]:
        """Longest path without and with fetches, ending anywhere: ((P,), (P,))."""
        done0 = np.zeros((L, P))
        done1 = np.zeros((L, P))
        free0 = np.zeros((D, P))  # when each GPU is next free (serialize_devices only)
        free1 = np.zeros((D, P))
        for i in order:
            start0 = np.zeros(P)
            start1 = np.zeros(P)
            for j in preds[i]:
                start0 = np.maximum(start0, done0[j])
                start1 = np.maximum(start1, done1[j] + cost(j, i))
            if serialize_devices:
                start0 = np.maximum(start0, free0[dev[i]])
                start1 = np.maximum(start1, free1[dev[i]])
            done0[i] = start0 + times[i]
            done1[i] = start1 + times[i]
            free0[dev[i]] = done0[i]
            free1[dev[i]] = done1[i]
        if L == 0:
            return np.zeros(P), np.zeros(P)
        return done0.max(axis=0), done1.max(axis=0)

    forward, forward_c = critical_path(fwd, range(L), parents, lambda j, i: edge[(j, i)])
    # Backward on the reversed graph: a layer waits for its children's gradients.
    backward, backward_c = critical_path(bwd, range(L - 1, -1, -1), children, lambda j, i: edge[(i, j)])
    act_comm = (forward_c - forward) + (backward_c - backward)

    # Update: each GPU updates its own parameters; they run concurrently.
    params_dev = np.bincount(dev, weights=costs.params.astype(float), minlength=D)
    act_dev = np.bincount(dev, weights=act, minlength=D)
    d = plans.device
    peak = devices.peak[d, plans.precision]
    membw = devices.mem_bandwidth[d] * (costs.rules.mem_bytes_per_gb / 1e9)
    floor = 1.0 / devices.clock_hz[d]
    upd_ppp = 1.0 if costs.rules.update_ignores_ppp else plans.ppp_comp[None, :]
    update = update_time(
        params_dev[:, None], peak[None, :], membw[None, :], floor[None, :], upd_ppp, plans.pipeline[None, :]
    )
    update = np.broadcast_to(update, (D, P)).max(axis=0)

    zeros = np.zeros(P)
    return Breakdown(
        forward=forward,
        backward=backward,
        update=update,
        sync=zeros.copy(),
        act_comm=act_comm,
        local_params=np.full(P, params_dev.max()),
        sync_params=zeros.copy(),
        activation_bytes=n * elem * act_dev.max(),
        samples=n.copy(),
    )
