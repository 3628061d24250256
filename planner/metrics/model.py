"""The cost model a request asked for: rule set, calibration profile and optimizer, turned
into the evaluator's keyword arguments for given device and link tables.

PALEO's rule sets take no extra arguments (their knobs, PPP and pipelining, are plan
columns). The ``modern`` rule set takes its efficiencies (the cited defaults of
configs/efficiencies.toml scaled by a calibration profile) and its options (optimizer, DDP
bucket size).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from costs.hardware import DeviceTable, LinkTable
from costs.modern.evaluator import Options
from costs.rules import get_rules
from planner import catalog
from planner.calibrate import profile as profiles

LOADERS = ("auto", "cpu", "dali", "none")
# catalog loader entries (configs/efficiencies.toml [loader.*]) behind each --data-loader choice
_LOADER_ENTRY = {"cpu": "cpu_jpeg", "dali": "gpu_dali"}


@dataclass(frozen=True)
class CostModel:
    """Rule set + profile + optimizer + data loader. ``calibration`` None: the shipped default
    profile. ``loader``: cpu (JPEG decoding on the host's cores), dali (GPU decoding) or none."""

    rules: str
    calibration: str | None = None
    optimizer: str = "momentum"
    loader: str = "none"
    family: str = "all"  # cnn | transformer: which held-out error the interval is (all: every run)
    profile: profiles.Profile = field(default=profiles.EMPTY, compare=False)

    @classmethod
    def of(
        cls, rules: str, calibration: str | None = None, optimizer: str = "momentum", loader: str = "none"
    ) -> CostModel:
        """Validate the names and load the profile once (one-line errors for bad ones)."""
        from planner.errors import BadInput

        modern = get_rules(rules).modern
        if calibration and not modern:
            raise BadInput(f"--calibration applies to the modern rule set, not {rules}")
        if loader not in LOADERS:
            raise BadInput(f"--data-loader '{loader}' (valid: {', '.join(LOADERS)})")
        prof = profiles.EMPTY
        if modern:
            prof = profiles.load(calibration) if calibration else default_profile()
        return cls(rules, calibration, optimizer, loader if modern else "none", profile=prof)

    @property
    def loader_per_gpu(self) -> float:
        """Samples/s one GPU's share of its node's data loader sustains (inf: no bound).

        cpu: samples/s per host core x host cores per GPU; dali: GPU decoding per GPU
        (configs/efficiencies.toml [loader.*] and [host.default], with their sources)."""
        if self.loader not in _LOADER_ENTRY:
            return float("inf")
        rate = catalog.loader_rates()[_LOADER_ENTRY[self.loader]]
        if "samples_per_s_per_core" in rate:
            return rate["samples_per_s_per_core"] * catalog.host_cores_per_gpu()
        return rate["samples_per_s_per_gpu"]

    @property
    def modern(self) -> bool:
        return get_rules(self.rules).modern

    def kwargs(self, devices: DeviceTable, links: LinkTable) -> dict:
        """Keyword arguments of :func:`costs.model.evaluate` for these tables."""
        if not self.modern:
            return {}
        eff = self.profile.apply(catalog.efficiency(devices.names, links.names))
        return {"efficiency": eff, "options": Options(optimizer=self.optimizer)}

    def for_net(self, meta: dict) -> CostModel:
        """This model, with the interval of the net's family (a transformer spec has a ``model``
        description)."""
        return replace(self, family="transformer" if "model" in meta else "cnn")

    @property
    def interval(self) -> tuple[float, float] | None:
        """(lo, hi) multipliers of predicted throughput that held 80% of held-out runs: those of
        the model's net family where the profile states it, else of every run."""
        meta = self.profile.meta
        lohi = meta.get(f"interval_{self.family}") or meta.get("interval")
        return (float(lohi[0]), float(lohi[1])) if lohi else None

    def plan_kwargs(self, plans) -> dict:
        """The evaluator arguments that depend on the plans: a node's data loader feeds the GPUs
        it holds (samples/s per node, per plan); none when the loader is not a bound."""
        rate = self.loader_per_gpu
        if not np.isfinite(rate):
            return {}
        return {"loader_rate": rate * np.minimum(plans.gpus_per_node, plans.workers)}


def loader_for(net_meta: dict, choice: str) -> str:
    """``auto``: a CPU JPEG loader for nets trained on JPEG image sets read from storage
    (ImageNet), none for others (synthetic or in-memory data); else the choice as given."""
    if choice != "auto":
        return choice
    dataset = str(net_meta.get("training", {}).get("dataset", ""))
    return "cpu" if "imagenet" in dataset.lower() else "none"


def default_profile() -> profiles.Profile:
    """The shipped profile (configs/profiles/default.toml), fitted on the shipped measurements."""
    return profiles.from_dict(catalog.profile_data("default"), "configs/profiles/default.toml")
