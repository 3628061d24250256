"""The cost model a request asked for: rule set, calibration profile and optimizer, turned
into the evaluator's keyword arguments for given device and link tables.

PALEO's rule sets take no extra arguments (their knobs, PPP and pipelining, are plan
columns). The ``modern`` rule set takes its efficiencies (the cited defaults of
configs/efficiencies.toml scaled by a calibration profile) and its options (optimizer, DDP
bucket size).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from costs.hardware import DeviceTable, LinkTable
from costs.modern import Options
from costs.rules import get_rules
from planner import catalog
from planner.calibrate import profile as profiles


@dataclass(frozen=True)
class CostModel:
    """Rule set + profile + optimizer. ``calibration`` None: the shipped default profile."""

    rules: str
    calibration: str | None = None
    optimizer: str = "momentum"
    profile: profiles.Profile = field(default=profiles.EMPTY, compare=False)

    @classmethod
    def of(cls, rules: str, calibration: str | None = None, optimizer: str = "momentum") -> CostModel:
        """Validate the names and load the profile once (one-line errors for bad ones)."""
        modern = get_rules(rules).modern
        if calibration and not modern:
            from planner.errors import BadInput

            raise BadInput(f"--calibration applies to the modern rule set, not {rules}")
        prof = (
            (profiles.load(calibration) if calibration else default_profile()) if modern else profiles.EMPTY
        )
        return cls(rules, calibration, optimizer, prof)

    @property
    def modern(self) -> bool:
        return get_rules(self.rules).modern

    def kwargs(self, devices: DeviceTable, links: LinkTable) -> dict:
        """Keyword arguments of :func:`costs.model.evaluate` for these tables."""
        if not self.modern:
            return {}
        eff = self.profile.apply(catalog.efficiency(devices.names, links.names))
        return {"efficiency": eff, "options": Options(optimizer=self.optimizer)}

    @property
    def interval(self) -> tuple[float, float] | None:
        """(lo, hi) multipliers of predicted throughput that held 80% of held-out runs."""
        lohi = self.profile.meta.get("interval")
        return (float(lohi[0]), float(lohi[1])) if lohi else None

    def describe(self) -> str:
        if not self.modern:
            return f"rules {self.rules}"
        return f"rules {self.rules}, calibration {self.calibration or 'default'}"


def default_profile() -> profiles.Profile:
    """The shipped profile (configs/profiles/default.toml), fitted on the shipped measurements."""
    return profiles.from_dict(catalog.profile_data("default"), "configs/profiles/default.toml")
