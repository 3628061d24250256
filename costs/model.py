"""The vectorised evaluator: score arrays of training plans with PALEO.

A plan is one row of :class:`Plans` (device, batch per worker, workers, scheme, links,
precision, hybrid split point, PPP, pipelining). :func:`evaluate` returns a
:class:`Breakdown` of arrays, one entry per plan, in seconds and bytes.

How the work is shared: the compute part of a plan depends only on (device, precision,
PPP_comp, pipelining, batch), so those combinations are made unique first and each is costed
once over all of the net's terms as a (terms x combinations) array; plans then gather their
row. Communication is closed-form per plan. There is no Python loop over plans.

Times follow PALEO (Qi et al. 2017; paleo-model.md §A.2-§A.9, §B.1-§B.4):
  compute term  C = FLOPs / (peak * PPP_comp), floored at one clock cycle, 0 when FLOPs = 0
  memory term   M = bytes / (bandwidth * PPP_comp), floored at one clock cycle
  layer phase   sum of its C and M terms, or max(sum C, sum M) with pipelining (PALEO's rules
                take both gradients of a layer as one phase: Rules.pipeline_whole_backward)
  iteration     forward + backward + update + communication (never overlapped, as in PALEO)
"""

from __future__ import annotations

import numpy as np

from costs.comm import schemes as comm
from costs.hardware import ELEMENT_SIZE, PRECISIONS, DeviceTable, LinkTable
from costs.plans import Breakdown, Plans, _unique, plans
from costs.specs.coefficients import NetCosts, Terms
from costs.specs.layers import PHASES

__all__ = ["Breakdown", "Plans", "evaluate", "layer_times", "plans", "update_time"]

_UPDATE_BYTES = 4.0  # the update reads and writes fp32 master weights (Micikevicius et al. 2018)


def _term_times(terms: Terms, n, rate, floor, scale, g0: int, n_groups: int, is_flops: bool):
    """(groups x combos) seconds of groups g0.. : each term converted and floored on its own."""
    lo = int(np.searchsorted(terms.group, g0)) if g0 else 0
    if lo:
        a, b, group = terms.a[lo:], terms.b[lo:], terms.group[lo:] - g0
        uniq, start = np.unique(group, return_index=True)
    else:
        a, b = terms.a, terms.b
        uniq, start = terms.starts
    amount = (a[:, None] + b[:, None] * n[None, :]) * scale[None, :]
    t = np.maximum(amount / rate[None, :], floor[None, :])
    if is_flops:
        t = np.where(amount > 0, t, 0.0)  # no work, no clock-cycle floor (§A.2)
    out = np.zeros((n_groups, n.shape[0]))
    if uniq.size:
        out[uniq] = np.add.reduceat(t, start, axis=0)
    return out


def layer_times(costs: NetCosts, devices: DeviceTable, device, precision, ppp, pipeline, n, first: int = 0):
    """(L - first, 3, combos) seconds per layer (from layer ``first``) and phase, for each
    combination of (device, precision, PPP_comp, pipelining, batch) given as equal arrays."""
    peak = devices.peak[device, precision]
    bw = devices.mem_bandwidth[device] * (costs.rules.mem_bytes_per_gb / 1e9)
    floor = 1.0 / devices.clock_hz[device]
    per_layer = len(PHASES) * len(costs.variants)
    g0, g = first * per_layer, (costs.n_layers - first) * per_layer
    n = n.astype(float)
    comp = _term_times(costs.flops, n, peak * ppp, floor, np.ones_like(peak), g0, g, True)
    mem = _term_times(costs.bytes, n, bw * ppp, floor, ELEMENT_SIZE[precision] / 4.0, g0, g, False)
    t = np.where(pipeline[None, :], np.maximum(comp, mem), comp + mem)
    shape = (costs.n_layers - first, len(PHASES), len(costs.variants), -1)
    t = t.reshape(shape).min(axis=2)  # "best": the cheaper algorithm per layer and phase
    if costs.rules.pipeline_whole_backward and pipeline.any():
        # PALEO pipelines a layer's backward as one: max(C_data + C_filter, M_data + M_filter)
        # (Rules.pipeline_whole_backward). It goes in the bwd_data slot, bwd_filter gets 0;
        # "best" takes the cheapest (data, filter) algorithm pair.
        c, m = comp.reshape(shape), mem.reshape(shape)
        whole = np.maximum(c[:, 1, :, None] + c[:, 2, None], m[:, 1, :, None] + m[:, 2, None])
        whole = whole.reshape(shape[0], -1, whole.shape[-1]).min(axis=1)
        t[:, 1] = np.where(pipeline, whole, t[:, 1])
        t[:, 2] = np.where(pipeline, 0.0, t[:, 2])
    return t


def _combo_times(costs, devices, plans: Plans, select, batch, first: int = 0):
    """Per-layer times of the unique (device, precision, PPP, pipelining, batch) combinations
    of the selected plans; returns (times (L-first, 3, U), index of each selected plan's combo)."""
    ppp_values, ppp_index = np.unique(plans.ppp_comp[select], return_inverse=True)
    base = (plans.device[select] * len(PRECISIONS) + plans.precision[select]) * len(ppp_values)
    base = (base + ppp_index) * 2 + plans.pipeline[select]
    ub, ib = _unique(batch)
    keys, inverse = _unique(base * len(ub) + ib)
    kb, ki = np.divmod(keys, len(ub))
    kb, upipe = np.divmod(kb, 2)
    kb, uppp = np.divmod(kb, len(ppp_values))
    udev, uprec = np.divmod(kb, len(PRECISIONS))
    t = layer_times(costs, devices, udev, uprec, ppp_values[uppp], upipe.astype(bool), ub[ki], first)
    return t, inverse


def update_time(params, peak, bw, floor, ppp, pipeline=False):
    """w <- w - lr dw: 2 FLOPs per parameter; read w, read dw, write w (§A.5).

    With pipelining the update, like every layer, costs max(compute, memory) (§A.9).
    """
    flops = 2.0 * params
    c = np.where(flops > 0, np.maximum(flops / (peak * ppp), floor), 0.0)
    m = 3.0 * np.maximum(params * _UPDATE_BYTES / (bw * ppp), floor)
    return np.where(pipeline, np.maximum(c, m), c + m)


def evaluate(costs: NetCosts, plans: Plans, devices: DeviceTable, links: LinkTable, **modern) -> Breakdown:
    """Score every plan (arrays of one are fine); see the module docstring for the model.

    Under a rule set with ``modern`` set, :func:`costs.modern.evaluator.evaluate` scores instead and
    takes the keyword arguments (efficiency, options, loader_rate).
    """
    if costs.rules.modern:
        from costs.llm import evaluator as llm
        from costs.modern import evaluator as modern_model

        if llm.applies(costs):
            return llm.evaluate(costs, plans, devices, links, **modern)
        return modern_model.evaluate(costs, plans, devices, links, **modern)
    if modern:
        raise TypeError(f"rule set '{costs.rules.name}' takes no {', '.join(modern)}")
    L = costs.n_layers
    k = plans.workers.astype(float)
    split = np.clip(plans.split, 0, L)
    hybrid = split < L
    any_hybrid = bool(hybrid.any())

    # Compute depends only on (device, precision, PPP_comp, pipelining, batch): cost each
    # distinct combination once, then gather.
    t, u1 = _combo_times(costs, devices, plans, slice(None), plans.batch)
    zero = np.zeros((1, t.shape[-1]))
    fwd_cum = np.concatenate([zero, np.cumsum(t[:, 0, :], axis=0)])
    bwd_cum = np.concatenate([zero, np.cumsum(t[:, 1, :] + t[:, 2, :], axis=0)])
    P = len(plans)
    forward = fwd_cum[split, u1]
    backward = bwd_cum[split, u1]

    dev = plans.device
    peak = devices.peak[dev, plans.precision]
    membw = devices.mem_bandwidth[dev] * (costs.rules.mem_bytes_per_gb / 1e9)
    floor = 1.0 / devices.clock_hz[dev]
    upd_ppp = 1.0 if costs.rules.update_ignores_ppp else plans.ppp_comp
    data_params = costs.params_before[split].astype(float)
    update = update_time(data_params, peak, membw, floor, upd_ppp, plans.pipeline)
    local_params = data_params.copy()
    elem = ELEMENT_SIZE[plans.precision]
    act_comm = np.zeros(P)

    if any_hybrid:
        # Model-parallel part (Krizhevsky 2014): each of the K workers holds 1/K of every
        # layer from the split on and pushes all K * n samples through it.
        h = np.flatnonzero(hybrid)
        kh = k[h]
        s = split[h]
        first = int(s.min())
        th, uk = _combo_times(costs, devices, plans, h, plans.batch[h] * plans.workers[h], first)
        # suffix sums: time of the layers from each split point to the end
        suf_f = np.cumsum(th[::-1, 0, :], axis=0)[::-1]
        suf_b = np.cumsum((th[:, 1, :] + th[:, 2, :])[::-1], axis=0)[::-1]
        forward[h] += suf_f[s - first, uk] / kh
        backward[h] += suf_b[s - first, uk] / kh
        model_params = (costs.total_params - costs.params_before[s]) / kh
        update[h] += update_time(
            model_params,
            peak[h],
            membw[h],
            floor[h],
            upd_ppp if np.isscalar(upd_ppp) else upd_ppp[h],
            plans.pipeline[h],
        )
        local_params[h] += model_params
        # Each channel-mixing layer needs the whole input: an all-gather of (K-1)/K of the
        # K*n-sample input forward, and a reduce-scatter of its gradient backward.
        nodes = np.ceil(kh / np.minimum(plans.gpus_per_node[h], kh))
        link = np.where(nodes > 1, plans.network[h], plans.intra_link[h])
        nbytes = 2.0 * (kh - 1) * plans.batch[h] * elem[h] * costs.gather_from[s]
        steps = 2.0 * (kh - 1) * costs.weighted_from[s]
        act_comm[h] = nbytes / (links.bandwidth[link] * plans.ppp_comm[h]) + steps * links.latency[link]
        act_comm[h] = np.where(kh > 1, act_comm[h], 0.0)

    sync = comm.allreduce(
        plans.scheme,
        data_params * elem,
        plans.workers,
        plans.gpus_per_node,
        links.bandwidth[plans.intra_link],
        links.latency[plans.intra_link],
        links.bandwidth[plans.network],
        links.latency[plans.network],
        plans.ppp_comm,
    )
    # Gradient accumulation (e.g. PyTorch DDP's no_sync): every microbatch runs forward and
    # backward (and, under a hybrid split, exchanges its activations); the gradients are
    # AllReduced and the weights updated once per optimizer step.
    acc = plans.accumulation.astype(float)
    forward = forward * acc
    backward = backward * acc
    act_comm = act_comm * acc
    samples = plans.batch * k * plans.accumulation
    activation_bytes = elem * plans.batch * float(costs.act_before[L])
    return Breakdown(
        forward,
        backward,
        update,
        sync,
        act_comm,
        local_params,
        data_params,
        activation_bytes,
        samples,
    )
