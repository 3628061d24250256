"""Do the 80% intervals cover what they claim? README's coverage table, measured.

For every shipped stack, its own runs (the ones its profile was fitted on) are predicted as an
answer would predict them, and the share inside the printed 80% interval is counted:

- with ``--stack``, held out: each run is predicted by a refit without its source and graded
  against the interval a fit without that source would state (``planner validate --stack S
  --held-out``; planner/calibrate/coverage.py), per GPU generation; in brackets, the same
  held-out predictions graded against the shipped profile's own intervals;
- without ``--stack``: as an answer that names no stack (its family's default stack, the
  interval widened to the spread between stacks);
- the runs of pytorch.csv and new-gpus.csv, which no fit and no spread has seen, both ways.

Targets (issue "calibrated stacks"): 75% with ``--stack``, 70% without.

Run: python benchmarks/interval_coverage.py          (a few minutes on 2 cores: the refits)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.calibrate import coverage  # noqa: E402
from planner.calibrate.coverage import TARGET  # noqa: E402
from planner.calibrate.measurements import shipped  # noqa: E402
from planner.metrics.model import CostModel  # noqa: E402
from planner.stacks import registry  # noqa: E402
from planner.stacks import runs as stack_runs  # noqa: E402

UNSEEN = ("pytorch.csv", "new-gpus.csv")


def _share(mask: np.ndarray, covered: np.ndarray) -> str:
    return f"{covered[mask].mean():.0%}" if mask.any() else "-"


def _own_interval(name: str, s: coverage.Scored) -> np.ndarray:
    """Whether each held-out prediction of ``s`` lies in the shipped profile's own interval."""
    stack = CostModel.of("modern", stack=name)
    models = {f: stack.for_net({"model": {}} if f == "transformer" else {}) for f in set(s.family)}
    out = np.zeros(len(s.family), dtype=bool)
    for i, (fam, gen) in enumerate(zip(s.family, s.generation, strict=True)):
        lo, hi = models[fam].interval_for(gen) or (np.nan, np.nan)
        out[i] = lo <= np.exp(-s.log_residual[i]) <= hi
    return out


def with_stack(name: str) -> str:
    """One stack's held-out coverage, per generation, and [against the profile's intervals]."""
    runs = stack_runs.select(registry.get(name)).runs
    s = coverage.score(runs, [name] * len(runs), name, held_out=True)
    gen = np.array(s.generation, dtype=object)
    per_gen = ", ".join(f"{g} {_share(gen == g, s.covered)}" for g in dict.fromkeys(s.generation))
    every = np.ones(len(runs), dtype=bool)
    return f"{_share(every, s.covered)} ({per_gen}) [{_share(every, _own_interval(name, s))}]"


def main() -> None:
    t0 = time.perf_counter()
    runs, labels = coverage.shipped_runs()
    bare = coverage.score(runs, labels, None)
    stacks = np.array(labels, dtype=object)
    print(
        f"| runs of | with --stack, held out (target {TARGET[True]:.0%}) | without --stack (target {TARGET[False]:.0%}) |"
    )
    print("|---|---|---|")
    for name, s in registry.stacks().items():
        if s.user:
            continue
        mask = stacks == name
        print(
            f"| {name}, {int(mask.sum())} | {with_stack(name)} | {_share(mask, bare.covered)} |", flush=True
        )
    files = [str(p) for p in shipped(UNSEEN)]
    new, new_labels = coverage.attribute(files)
    none = coverage.score(new, new_labels, None)
    is_cnn = np.array([f == "cnn" for f in none.family])
    cnn_runs = [r for r, c in zip(new, is_cnn, strict=True) if c]
    cnn = coverage.score(cnn_runs, [""] * len(cnn_runs), "optimized-cnn")
    gens = ", ".join(
        f"{g}: {int(none.covered[np.array(none.generation) == g].sum())} of {int((np.array(none.generation) == g).sum())}"
        for g in dict.fromkeys(none.generation)
    )
    print(
        f"| runs no fit has seen ({', '.join(UNSEEN)}), {len(new)} | optimized-cnn on its "
        f"{len(cnn_runs)} CNN rows: {cnn.covered.mean():.0%} | "
        f"{_share(np.ones(len(new), dtype=bool), none.covered)} ({gens}) |"
    )
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
