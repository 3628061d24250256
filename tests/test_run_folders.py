"""Nothing a user ran is lost: runs that land on the same folder name (same net, budget and
second) each keep their own folder (planner/report/files.py)."""

from __future__ import annotations

from planner.report.files import write_atomic


def test_runs_in_the_same_second_keep_their_own_folders(tmp_path):
    outs = [write_atomic(tmp_path / "20261124-120000_alexnet_16gpus", {"run.json": str(i)}) for i in range(4)]
    assert [o.name for o in outs] == [
        "20261124-120000_alexnet_16gpus",
        "20261124-120000_alexnet_16gpus-2",
        "20261124-120000_alexnet_16gpus-3",
        "20261124-120000_alexnet_16gpus-4",
    ]
    assert [(o / "run.json").read_text() for o in outs] == ["0", "1", "2", "3"]
    assert not list(tmp_path.glob(".partial-*"))  # no half-written folder is left behind
