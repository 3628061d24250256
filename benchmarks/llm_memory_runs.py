"""Do the published transformer runs fit in planner's memory model?

Every run of configs/measurements/llm.csv and scale.csv ran on its GPUs, so its layout fit in
their memory. planner's memory model (costs/llm/memory.py: model states under ZeRO, activations
per Korthikanti et al. 2022 times the microbatches each pipeline rank keeps in flight) is
applied to each run's own layout and attention kernel (its ``attention`` column, else its net
spec's), with Adam and each shipped stack's gradient buffers (all of
them at the parameters' precision), and compared with the GPU's memory. A run predicted above
it is an error of the model (or of what the row records), not of the run; the script lists
every run above ``SHOWN`` of its GPU's memory and counts those above 90% (planner's default
usable share) and above 100%.

Run: python benchmarks/llm_memory_runs.py      (a few seconds)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costs.model import evaluate  # noqa: E402
from costs.modern.evaluator import Options  # noqa: E402
from planner.calibrate import measurements  # noqa: E402
from planner.calibrate.predict import RunTable  # noqa: E402

FILES = ("configs/measurements/llm.csv", "configs/measurements/scale.csv")
SHOWN = 0.85  # list runs predicted above this share of their GPU's memory


def predicted(path: str) -> list[tuple[object, float, float]]:
    """(run, predicted bytes per GPU, the GPU's memory in bytes) of every transformer run."""
    return predicted_runs(measurements.load(str(ROOT / path)))


def predicted_runs(runs: list) -> list[tuple[object, float, float]]:
    """:func:`predicted` of measured runs already read (each at its own attention kernel)."""
    table = RunTable(runs, "modern")
    out = []
    for g in table.groups:
        if not g.transformer:
            continue
        b = evaluate(g.costs, g.plans, table.devices, table.links, options=Options("adam"))
        for i, row in enumerate(g.rows):
            out.append((runs[row], float(b.memory[i]), float(table.devices.memory_bytes[g.plans.device[i]])))
    return out


def main() -> None:
    for path in FILES:
        rows = predicted(path)
        over90 = sum(m > 0.9 * cap for _, m, cap in rows)
        over = sum(m > cap for _, m, cap in rows)
        print(f"{path}: {len(rows)} transformer runs, {over90} above 90% of their GPU, {over} above 100%")
        for r, m, cap in sorted(rows, key=lambda x: -x[1] / x[2]):
            if m <= SHOWN * cap:
                break
            print(
                f"  {r.source:36s} {r.net:16s} {r.device:9s} {r.precision:4s} TP {r.tp} PP {r.pp} v {r.interleave}"
                f" CP {r.cp} EP {r.ep} ZeRO {r.zero} micro {r.batch_per_gpu} seq {r.seq_len} recompute"
                f" {r.recompute or 'none'}: {m / 1e9:6.1f} GB of {cap / 1e9:.1f} ({m / cap:.0%})"
            )


if __name__ == "__main__":
    main()
