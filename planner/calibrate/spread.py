"""The spread between software stacks: how far an answer that does not know its stack may be
from a run of any shipped stack.

An answer without ``--stack`` predicts with its net family's default stack
(:data:`planner.stacks.registry.DEFAULT`). Its interval must hold the runs of every shipped stack
of that family, so for each family this measures, on the shipped runs, the 80% interval of
measured / predicted under the default stack's profile for each other stack's runs, and takes the
envelope of those and of the default stack's own held-out interval. The result is
:data:`planner.metrics.model.BETWEEN_STACKS`; ``python -m planner.calibrate.spread`` prints it
again (a test checks that the two agree).
"""

from __future__ import annotations

import numpy as np

from costs.fit import calibration as cal
from planner.calibrate.fitting import COVERAGE, predict
from planner.calibrate.predict import RunTable, predictable
from planner.stacks import registry
from planner.stacks import runs as stack_runs


def net_family(net: str) -> str:
    """The family (cnn or transformer) of a measured run's net: a zoo name or a spec file."""
    from planner import catalog

    return "cnn" if net.endswith(".json") else registry.family_of(catalog.net_spec(net))


def stack_runs_of(name: str, family: str) -> list:
    """The shipped runs of stack ``name`` whose net is of ``family``."""
    runs, _ = predictable(stack_runs.select(registry.get(name)).runs)
    return [r for r in runs if net_family(r.net) == family]


def ratios(family: str) -> dict[str, np.ndarray]:
    """log(measured / predicted) of each shipped stack's runs of ``family`` under the profile of
    the family's default stack (stacks without runs of the family are left out)."""
    default = stack_runs.profile(registry.get(registry.DEFAULT[family]))
    out = {}
    for name, s in registry.stacks().items():
        if s.user or family not in s.families:
            continue
        runs = stack_runs_of(name, family)
        if runs:
            table = RunTable(runs, "modern")
            out[name] = np.log(table.measured / predict(table, default))
    return out


def between_stacks(family: str) -> tuple[float, float]:
    """Multipliers (lo, hi) of a default-stack prediction that hold ``COVERAGE`` of the runs of
    every shipped stack of ``family``: the envelope of each other stack's 80% interval of
    measured / predicted and of the default stack's own held-out interval (its runs are the
    ones its profile was fitted on, so their own ratios would be in-sample)."""
    name = registry.DEFAULT[family]
    meta = stack_runs.profile(registry.get(name)).meta
    lo, hi = meta.get(f"interval_{family}") or meta["interval"]
    for other, r in ratios(family).items():
        if other == name:
            continue
        q_lo, q_hi = cal.tail_quantiles(r, COVERAGE)
        lo, hi = min(lo, float(np.exp(q_lo))), max(hi, float(np.exp(q_hi)))
    return round(lo, 4), round(hi, 4)


def main() -> None:
    """Print the between-stack interval of each family (planner.metrics.model.BETWEEN_STACKS)."""
    for family in registry.FAMILIES:
        spread = {k: cal.summary(-v) for k, v in ratios(family).items()}
        print(family, between_stacks(family), {k: round(v["bias"], 1) for k, v in spread.items()})


if __name__ == "__main__":
    main()
