"""An honest front (planner/result/front.py): plans within 1% of a listed plan on every objective
are merged into it, the smaller node layout stands for ties, and nothing is lost."""

from __future__ import annotations

import json

from planner.cli import main
from planner.result.front import FRONT_TOLERANCE, thin


def _rec(t, c, nodes=1, gpus=8):
    return {"objective": [t, c], "nodes": nodes, "gpus": gpus, "gpu": "X", "gpus_per_node": gpus // nodes,
            "cost_usd": c}  # fmt: skip


def test_a_slower_plan_that_saves_under_the_tolerance_is_merged():
    front = [_rec(100, 1000), _rec(200, 995), _rec(400, 993), _rec(800, 500)]  # fastest first
    listed, merged = thin(front)
    assert listed == [0, 3] and merged == 2
    assert len(front[0]["equivalents"]) == 2 and "equivalents" not in front[3]


def test_ties_keep_the_smaller_layout_and_exact_fronts_stay():
    front = [_rec(100, 1000, nodes=8, gpus=8), _rec(100.5, 1000.5, nodes=1, gpus=8)]
    listed, merged = thin(front)
    assert listed == [1] and merged == 1 and front[1]["equivalents"][0].startswith("8 x X (8 node(s)")
    spread = [_rec(100, 1000), _rec(150, 800), _rec(300, 600)]
    assert thin(spread) == ([0, 1, 2], 0)
    assert FRONT_TOLERANCE == 0.01


def test_pareto_states_what_it_merged(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["pareto", "llama3-8b", "--budget", "64gpus", "--gpu", "H100_SXM", "--out", "p"]) == 0
    out = capsys.readouterr().out
    run = json.loads((tmp_path / "p" / "run.json").read_text())
    merged = run["search"]["front_merged"]
    assert merged > 0 and f"Merged {merged} plan" in out and "within 1% of a listed plan" in out
    front = run["report"]["front"]
    assert sum(len(p.get("equivalents", [])) for p in front) == merged
    times = [p["time_to_train_s"] for p in front]
    costs = [p["cost_usd"] for p in front]
    for a in range(len(front)):  # no listed plan is within 1% of another on both objectives
        for b in range(len(front)):
            if a != b:
                assert not (times[a] <= times[b] * 1.01 and costs[a] <= costs[b] * 1.01)
    assert "merged" in (tmp_path / "p" / "report.md").read_text()
