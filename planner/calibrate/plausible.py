"""Measured throughputs no GPU can reach are refused before a fit sees them.

A run's value, read as samples per second over all its GPUs, times the FLOPs of one sample's
forward and backward passes as the evaluator counts them (``costs.specs.coefficients``: the
per-sample slope b of every layer's terms, direct convolutions), over its GPUs, is the FLOP rate
each GPU would have sustained. Above :data:`MARGIN` times the device's dense peak at the run's
precision (``configs/devices.toml``, from the vendors' datasheets) no kernel can reach it: the
value is a typo, a unit mix-up or a corrupt cell, and one such row spoils a least-squares fit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner import catalog
from planner.errors import BadInput, PlannerError

# Winograd's F(2x2, 3x3) does 2.25x fewer multiplications than a direct 3x3 convolution (Lavin
# and Gray, Fast Algorithms for Convolutional Neural Networks, CVPR 2016, section 4), so a CNN's
# rate counted in direct FLOPs may exceed the peak by that much; nothing real does more.
MARGIN = 2.25


def flops_per_sample(net: str, seq_len: int | None, attention: str | None = None) -> float:
    """Forward and backward FLOPs of one sample (one sequence) of ``net`` at ``seq_len`` with
    the ``attention`` kernel (None: the spec's; a flash kernel skips a causal mask's tiles)."""
    costs = catalog.net_costs(net, "modern", "gemm", seq_len or None, None, attention)
    return float(np.sum(costs.flops.b))  # each term is a + b x batch: b is per sample


def check(runs: Sequence, name: str) -> None:
    """Refuse the first run whose per-GPU FLOP rate exceeds MARGIN x its device's peak, naming
    the file, the row and the column."""
    per_sample: dict[tuple, float] = {}
    for r in runs:
        key = (r.net, r.seq_len, r.attention)
        if key not in per_sample:
            try:
                per_sample[key] = flops_per_sample(*key)
            except PlannerError:  # a spec path read from elsewhere: the prediction will say so
                per_sample[key] = 0.0
        peaks = catalog.device(r.device).device.peak_flops
        peak = peaks.get(r.precision) or max(peaks.values(), default=0.0)
        rate = r.samples_per_s * per_sample[key] / r.gpus
        if peak > 0 and not rate <= MARGIN * peak:
            raise BadInput(
                f"{name} row {r.row}, column 'value': {r.value:g} {r.metric} is {rate / 1e12:,.4g} "
                f"TFLOP/s per GPU, over {MARGIN}x the {r.device} {r.precision} peak of "
                f"{peak / 1e12:,.4g} TFLOP/s (no GPU reaches that)"
            )


def worst(runs: Sequence) -> float:
    """The largest ratio of a run's per-GPU FLOP rate to its device's peak (for tests)."""
    out = 0.0
    for r in runs:
        peaks = catalog.device(r.device).device.peak_flops
        peak = peaks.get(r.precision) or max(peaks.values(), default=0.0)
        out = max(out, r.samples_per_s * flops_per_sample(r.net, r.seq_len, r.attention) / r.gpus / peak)
    return out
