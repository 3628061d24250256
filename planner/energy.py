"""Energy settings: the cited defaults of configs/energy.toml, the `--pue`, `--grid-intensity` and
`--electricity` options, and the per-plan energy and CO2 metrics (:mod:`costs.energy` does the
arithmetic).

:mod:`planner.catalog` reads the file and hands its parsed TOML to :func:`parse_defaults`, which
validates it (one-line :class:`CatalogError` naming the file, table and key).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from costs import energy
from planner.errors import BadInput, CatalogError

# table -> its value key; each table also has source and date
_TABLES = {
    "gpu": "waiting_fraction",
    "node": "overhead_w",
    "pue": "value",
    "grid": "g_co2_per_kwh",
    "electricity": "usd_per_kwh",
}
# GPUs of the server whose power besides its GPUs is [node] overhead_w (p4d.24xlarge: 8 A100)
SERVER_GPUS = 8
# --electricity bound, USD per kWh: retail tariffs are cents to tens of cents; 10 rejects typos
# such as a price in cents
ELECTRICITY_MAX = 10.0


@dataclass(frozen=True)
class Energy:
    """The energy parameters of a run (W, fractions, gCO2/kWh)."""

    waiting_fraction: float  # share of board power drawn while not computing
    node_w: float  # a node's power besides its GPUs
    pue: float  # facility energy / IT energy
    grid_g_per_kwh: float  # gCO2 per kWh
    usd_per_kwh: float = 0.0  # electricity price charged to owned GPUs' plans (rented prices include it)

    def metrics(self, board_w, gpus, nodes, step_s, busy_s, steps) -> dict[str, np.ndarray]:
        """energy_kwh and co2_kg of plans (arrays; NaN where the board power is unknown)."""
        joules = energy.step_joules(
            gpus, nodes, step_s, busy_s, board_w, self.waiting_fraction, self.node_w, self.pue
        )
        kwh = energy.training_kwh(joules, steps)
        return {"energy_kwh": kwh, "co2_kg": energy.co2_kg(kwh, self.grid_g_per_kwh)}

    def describe(self) -> str:
        """The parameters in one line, for reports."""
        return (
            f"PUE {self.pue:g}, grid {self.grid_g_per_kwh:g} gCO2/kWh, GPUs at board power while "
            f"computing and {self.waiting_fraction:.0%} of it otherwise, {self.node_w:g} W per node besides GPUs"
        )


def servers(workers, gpus_per_node) -> np.ndarray:
    """Servers whose power besides the GPUs a plan is charged: one per node, and an NVLink domain
    wider than a server (GB200 NVL72: 72 GPUs) as ``ceil(GPUs / SERVER_GPUS)`` of them, so that such
    a domain draws as much host power per GPU as the 8-GPU server ``overhead_w`` was measured on
    (an NVL72 rack's 36 Grace CPUs, devices.toml GB200's source, have no cited power here)."""
    workers = np.asarray(workers)
    per = np.minimum(np.asarray(gpus_per_node), workers)
    return np.where(per > SERVER_GPUS, -(-workers // SERVER_GPUS), -(-workers // per))


def parse_defaults(data: dict, file: str = "energy.toml") -> Energy:
    """The validated defaults of a parsed energy table."""
    extra = set(data) - set(_TABLES)
    if extra:
        raise CatalogError(
            f"{file}: unknown table(s) {', '.join(sorted(extra))} (valid: {', '.join(_TABLES)})"
        )
    values = {}
    for table, key in _TABLES.items():
        entry = data.get(table)
        if not isinstance(entry, dict):
            raise CatalogError(f"{file}: lacks the table [{table}]")
        if set(entry) != {key, "source", "date"}:
            raise CatalogError(f"{file}: [{table}] must have exactly {key}, source and date")
        v = entry[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise CatalogError(f"{file}: [{table}] {key} must be a number >= 0, got {v!r}")
        if not (isinstance(entry["source"], str) and entry["source"].strip()):
            raise CatalogError(f"{file}: [{table}] source is empty")
        values[table] = float(v)
    if values["gpu"] > 1 or values["pue"] < 1:
        raise CatalogError(f"{file}: [gpu] waiting_fraction must be in [0, 1] and [pue] value >= 1")
    return Energy(values["gpu"], values["node"], values["pue"], values["grid"], values["electricity"])


def parse_electricity(value) -> float | None:
    """``--electricity`` (USD per kWh: a number, or its text as typed) as a float; None keeps the
    default. Negative, NaN, infinite, at least :data:`ELECTRICITY_MAX` or not a number: BadInput."""
    if value is None:
        return None
    try:
        usd = math.nan if isinstance(value, bool) else float(str(value).strip().lstrip("$"))
    except ValueError:
        usd = math.nan
    if not 0.0 <= usd < ELECTRICITY_MAX:  # NaN fails every comparison
        raise BadInput(
            f"--electricity '{value}' must be a price in USD per kWh from 0 to below {ELECTRICITY_MAX:g}"
        )
    return usd


def with_options(
    defaults: Energy, pue: float | None, grid_intensity: float | None, electricity=None
) -> Energy:
    """The defaults with ``--pue``, ``--grid-intensity`` (g/kWh) and ``--electricity`` (USD per
    kWh) applied, each checked."""
    if pue is not None and not (1.0 <= pue < 10.0):
        raise BadInput(f"--pue must be a number from 1 (all power to IT) to below 10, got {pue}")
    if grid_intensity is not None and not (0.0 <= grid_intensity < 5000.0):
        raise BadInput(f"--grid-intensity must be gCO2 per kWh from 0 to below 5000, got {grid_intensity}")
    return Energy(
        defaults.waiting_fraction,
        defaults.node_w,
        defaults.pue if pue is None else float(pue),
        defaults.grid_g_per_kwh if grid_intensity is None else float(grid_intensity),
        defaults.usd_per_kwh if (usd := parse_electricity(electricity)) is None else usd,
    )
