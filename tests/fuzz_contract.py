"""The contract every input is held to, shared by the fuzz tests (tests/test_fuzz_*.py).

A command given any input exits 0 (answered), 1 (a valid request no plan satisfies, said in one
line) or 2 (refused in one line naming the field, the value and the bound); never a traceback;
within the time and memory the README states for one command; and a refused command writes
nothing.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

from hypothesis import HealthCheck, settings

from planner.cli import main

# README, "Bounds on every input": one command within 60 s and 2 GB (resident, on one core).
MAX_SECONDS = 60.0
MAX_RSS_BYTES = 2 * 2**30

# 40 examples (PLANNER_FUZZ_EXAMPLES=N for a longer, random hunt), no deadline per example (a command imports and builds; its time is checked
# against MAX_SECONDS instead), derandomised so CI runs the same examples every time.
FUZZ = settings(
    max_examples=int(os.environ.get("PLANNER_FUZZ_EXAMPLES", "40")),
    deadline=None,
    derandomize=os.environ.get("PLANNER_FUZZ_EXAMPLES") is None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def files_under(folder: Path) -> set[Path]:
    """Every file and folder below ``folder`` (nothing when it does not exist)."""
    return set(folder.rglob("*")) if folder.exists() else set()


def run_cli(capsys, argv: list[str], codes=(0, 1, 2)) -> tuple[int, str, str]:
    """Run ``planner ARGV`` in this process and check the contract; return (code, out, err)."""
    capsys.readouterr()
    start = time.perf_counter()
    code = main([str(a) for a in argv])
    took = time.perf_counter() - start
    out, err = capsys.readouterr()
    assert code in codes, f"exit {code} for {argv}: {err[-2000:]}"
    assert "Traceback" not in out + err, f"traceback for {argv}: {err[-2000:]}"
    if code in (1, 2):
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1, f"not one error line for {argv}: {err!r}"
        assert len(lines[0]) < 2000, f"error line of {len(lines[0])} characters for {argv}"
    assert took < MAX_SECONDS, f"{argv} took {took:.1f} s"
    assert peak_rss() < MAX_RSS_BYTES, f"peak memory {peak_rss() / 2**30:.2f} GB after {argv}"
    return code, out, err


def peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def fresh(tmp_path: Path) -> Path:
    """An empty folder for one example (a test's tmp_path is shared by all its examples)."""
    import tempfile

    return Path(tempfile.mkdtemp(dir=tmp_path))
