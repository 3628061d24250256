"""The objectives a search can minimise: their names, the metric each reads and its sense.

Kept apart from the scorer so that the Request stage can validate an ``--objective`` without
importing the Metrics stage's machinery (no import loop, typing-only imports included).
"""

from __future__ import annotations

OBJECTIVES = ("time", "cost", "throughput", "memory", "energy")
METRIC = {
    "time": "time_to_train_s",
    "cost": "cost_usd",
    "throughput": "throughput_samples_s",
    "memory": "memory_bytes",
    "energy": "energy_kwh",
}
SENSE = {
    "time": 1.0,
    "cost": 1.0,
    "throughput": -1.0,
    "memory": 1.0,
    "energy": 1.0,
}  # minimise SENSE x metric
