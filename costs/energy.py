"""Energy and CO2 of training plans, vectorised (SI units: W, s, J; kWh and kg at the end).

One optimizer step of a plan draws

    GPUs x (board power x busy seconds + waiting fraction x board power x (step - busy) seconds)
    + nodes x node overhead power x step seconds

at the servers, times the data centre's PUE at the meter. ``busy`` is the GPU's compute time
(forward, backward, update: the kernels that keep it loaded); the rest of the step (exposed
communication, host overhead, data-loader stalls) it waits at a lower draw. The node overhead is
what a server draws besides its GPUs (CPUs, memory, NICs, fans).

    energy to train (kWh) = step energy (J) x optimizer steps / 3.6e6
    CO2 (kg)              = energy to train (kWh) x grid intensity (g/kWh) / 1000

The defaults of every parameter are cited in configs/energy.toml.
"""

from __future__ import annotations

import numpy as np

J_PER_KWH = 3.6e6


def step_joules(
    gpus: np.ndarray,
    nodes: np.ndarray,
    step_s: np.ndarray,
    busy_s: np.ndarray,
    board_w: np.ndarray,
    waiting_fraction: float,
    node_w: float,
    pue: float,
) -> np.ndarray:
    """Energy at the meter of one optimizer step of each plan (J).

    ``gpus``, ``nodes``: counts per plan; ``step_s``: the step's seconds; ``busy_s``: its compute
    seconds (clipped to [0, step]); ``board_w``: each plan's GPU board power (W, NaN when
    unknown, which makes the result NaN); ``waiting_fraction``: the share of board power a GPU
    draws while not computing; ``node_w``: a node's power besides its GPUs (W); ``pue``: facility
    energy over IT energy (>= 1)."""
    step = np.asarray(step_s, dtype=float)
    busy = np.clip(np.asarray(busy_s, dtype=float), 0.0, step)
    board = np.asarray(board_w, dtype=float)
    per_gpu = board * busy + waiting_fraction * board * (step - busy)
    it = np.asarray(gpus, dtype=float) * per_gpu + np.asarray(nodes, dtype=float) * node_w * step
    return pue * it


def training_kwh(step_j: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Energy to train (kWh): step energy (J) times optimizer steps."""
    return np.asarray(step_j, dtype=float) * np.asarray(steps, dtype=float) / J_PER_KWH


def co2_kg(kwh: np.ndarray, grid_g_per_kwh: float) -> np.ndarray:
    """CO2 emitted generating ``kwh`` on a grid of ``grid_g_per_kwh`` gCO2 per kWh (kg)."""
    return np.asarray(kwh, dtype=float) * grid_g_per_kwh / 1000.0
