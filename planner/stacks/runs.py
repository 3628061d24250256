"""The cited runs a stack is fitted on, and its calibration profile.

A stack's ``[runs]`` names measurement files (globs under configs/; ``pending.csv``, whose runs
cannot be predicted yet, is never among them) and keeps the rows whose ``framework`` column
matches its rule, whose ``source`` is among its keys, and whose net is of its ``family``. New
files of cited runs join a stack by matching its rule, without an edit to the stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from planner import catalog
from planner.calibrate import measurements
from planner.calibrate import profile as profiles
from planner.errors import CatalogError
from planner.stacks.registry import Stack, family_of

EXCLUDED = ("pending.csv",)


def files(stack: Stack) -> list[Path]:
    """The measurement files of a stack's globs, each once, in glob order."""
    root = catalog.configs_dir()
    out: dict[Path, None] = {}
    for pattern in stack.files:
        for p in sorted(root.glob(pattern)):
            if p.is_file() and p.name not in EXCLUDED:
                out[p] = None
    return list(out)


def _frameworks(path: Path) -> dict[int, str]:
    """The ``framework`` column by 1-based data row (the row numbers of measurements.load)."""
    from planner.request.files import read_csv

    return {
        i: (r.get("framework") or "").strip()
        for i, r in enumerate(read_csv(path, "measurements")[1], start=1)
    }


def _family(net: str) -> str:
    return family_of(catalog.net_spec(net)) if not net.endswith(".json") else "cnn"


def _keep(stack: Stack, run: measurements.Run, framework: str) -> bool:
    if stack.framework_rule is not None and not re.search(stack.framework_rule, framework):
        return False
    if stack.sources and run.source not in stack.sources:
        return False
    return stack.family is None or _family(run.net) == stack.family


@dataclass(frozen=True)
class StackRuns:
    """A stack's runs with the file each came from (file names, for the profile's record)."""

    runs: list[measurements.Run]
    files: list[str]


def select_file(stack: Stack, path: Path) -> list[measurements.Run]:
    """The runs of one measurement file that the stack's rules keep."""
    fw = _frameworks(path)
    return [r for r in measurements.load(path) if _keep(stack, r, fw.get(r.row, ""))]


def select(stack: Stack) -> StackRuns:
    """Every run of the stack's files that its rules keep."""
    runs: list[measurements.Run] = []
    used: list[str] = []
    for path in files(stack):
        kept = select_file(stack, path)
        if kept:
            runs += kept
            used.append(path.name)
    return StackRuns(runs, used)


def profile(stack: Stack) -> profiles.Profile:
    """The stack's calibration profile: configs/profiles/<profile>.toml, or a file a user stack names."""
    if stack.user or stack.profile.endswith(".toml"):
        p = Path(stack.profile)
        return profiles.load(p if p.is_absolute() else Path(stack.path).parent / p)
    try:
        data = catalog.profile_data(stack.profile)
    except CatalogError:
        raise CatalogError(
            f"{stack.path}: profile '{stack.profile}' is not in configs/profiles/ "
            f"(fit it: planner calibrate --stack {stack.name} -o configs/profiles/{stack.profile}.toml)"
        ) from None
    return profiles.from_dict(data, f"configs/profiles/{stack.profile}.toml")
