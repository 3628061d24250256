"""Sweeps: spec validation, local runs, resumability, shared studies, and (marked `service`)
the real Slurm and PostgreSQL integration that .ci/run starts."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from planner.cli import main
from planner.sweep.run import _storage, load_with, status
from planner.sweep.spec import SweepSpecError, load

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "configs" / "sweeps" / "example.yaml"
SERVICES = "run `bash .ci/services.sh start` and export the variables it prints"


def _spec(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


SMALL = """name: {name}
trials: {trials}
seed: 3
grid:
  net: [alexnet, nin]
options:
  budget: 8gpus
  gpu: A100,T4
"""


def _planner(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "planner", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _trials(spec_path, results, storage=None):
    spec = load_with(spec_path, str(results), storage)
    st = _storage(spec.storage)
    out = {}
    for cell in spec.cells():
        study = optuna.load_study(study_name=cell.study, storage=st)
        out[cell.study] = study.get_trials(deepcopy=False)
    return out


# ---- spec validation ------------------------------------------------------------------------


def test_example_spec_is_valid_and_names_are_stable():
    a, b = load(EXAMPLE), load(EXAMPLE)
    cells = a.cells()
    assert len(cells) == 3 * 2 * 3
    assert [c.study for c in cells] == [c.study for c in b.cells()]
    assert len({c.study for c in cells}) == len(cells)
    assert all(c.study.startswith("example.") for c in cells)


@pytest.mark.parametrize(
    "text,expect",
    [
        ("name: x\ngrid: {net: [alexnet]}\nbogus: 1\n", "unknown key 'bogus' (accepted: name,"),
        (
            "name: x\ngrid: {net: [alexnet], colour: [red]}\n",
            "unknown option 'colour' in grid (accepted: net,",
        ),
        ("name: x\ngrid: {net: alexnet}\n", "grid.net must be a non-empty list"),
        ("name: x\ngrid: {net: []}\n", "grid.net must be a non-empty list"),
        ("name: x\ngrid: {budget: [8gpus]}\n", "no 'net'"),
        ("name: 'a b'\ngrid: {net: [alexnet]}\n", "'name' must be a word"),
        ("name: x\ntrials: 0\ngrid: {net: [alexnet]}\n", "'trials' must be an integer >= 1"),
        (
            "name: x\ngrid: {net: [alexnet]}\noptions: {pipeline: maybe}\n",
            "options.pipeline value 'maybe' is not bool",
        ),
        ("name: x\ngrid: {net: [alexnet]}\noptions: {gpu: Z100}\n", "--gpu 'Z100' matches no device"),
        ("name: x\ngrid: {net: [alexnet, nonet]}\n", "unknown net 'nonet'"),
        ("name: x\ngrid: {net: [alexnet], budget: [sixteen]}\n", "--budget 'sixteen' is not"),
        ("name: x\ngrid: {net: [alexnet]}\noptions: {net: vgg16}\n", "in both grid and options"),
        ("name: x\ngrid: {net: [alexnet]}\nstorage: mysql://x\n", "'storage' must be"),
        ("name: x\ngrid: [net]\n", "'grid' must map option names"),
        ("name: x\n  grid: {\n", "malformed YAML"),
    ],
)
def test_invalid_specs_are_rejected_up_front(tmp_path, text, expect, capsys):
    path = _spec(tmp_path, text)
    with pytest.raises(SweepSpecError, match=None) as err:
        load(path)
    assert expect in str(err.value) and str(path) in str(err.value)
    assert main(["sweep", "run", str(path), "--results", str(tmp_path / "out")]) == 2
    msg = capsys.readouterr().err
    assert msg.startswith("error: sweep spec") and msg.count("\n") == 1
    assert not (tmp_path / "out").exists()


# ---- local runs ------------------------------------------------------------------------------


def test_local_sweep_runs_resumes_and_collects(tmp_path, capsys):
    spec = _spec(tmp_path, SMALL.format(name="loc", trials=30))
    results = tmp_path / "results"
    assert main(["sweep", "run", str(spec), "--results", str(results)]) == 0
    trials = _trials(spec, results)
    assert len(trials) == 2
    for ts in trials.values():
        assert sum(t.state == TrialState.COMPLETE for t in ts) == 30
    before = {k: len(v) for k, v in trials.items()}
    assert main(["sweep", "run", str(spec), "--results", str(results)]) == 0  # idempotent
    assert {k: len(v) for k, v in _trials(spec, results).items()} == before
    capsys.readouterr()
    assert main(["sweep", "status", str(spec), "--results", str(results), "--format", "json"]) == 0
    import json

    recs = json.loads(capsys.readouterr().out)
    assert [r["state"] for r in recs] == ["done", "done"] and all(r["trials"] == "30/30" for r in recs)
    assert main(["sweep", "collect", str(spec), "--results", str(results)]) == 0
    folder = results / "loc"
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert [r["net"] for r in rows] == ["alexnet", "nin"]
    assert all(r["state"] == "done" and r["gpu"] and float(r["time_to_train_s"]) > 0 for r in rows)
    assert "Fastest plan per net and budget" in (folder / "summary.md").read_text()
    assert (folder / "summary.html").read_text().startswith("<!DOCTYPE html>")
    # nothing outside the sweep folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "s.yaml"]
    assert sorted(p.name for p in results.iterdir()) == ["loc"]


def test_killed_worker_loses_only_trials_in_flight(tmp_path):
    n = 1500
    spec = _spec(tmp_path, SMALL.format(name="kill", trials=n).replace("[alexnet, nin]", "[alexnet]"))
    results = tmp_path / "results"
    from planner.sweep.run import prepare

    prepare(load_with(spec, str(results)))
    proc = _planner("sweep", "worker", str(spec), "--task", "0", "--results", str(results))
    deadline = time.time() + 120
    while time.time() < deadline:
        done = sum(t.state == TrialState.COMPLETE for t in next(iter(_trials(spec, results).values())))
        if done >= 100:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    trials = next(iter(_trials(spec, results).values()))
    killed_complete = sum(t.state == TrialState.COMPLETE for t in trials)
    assert 100 <= killed_complete < n, "the worker must be killed mid-study"
    assert main(["sweep", "run", str(spec), "--results", str(results)]) == 0
    trials = next(iter(_trials(spec, results).values()))
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == n  # exact: nothing lost, nothing counted twice
    assert not any(t.state == TrialState.RUNNING for t in trials)
    assert len({t.number for t in trials}) == len(trials)
    in_flight = [t for t in trials if t.state == TrialState.FAIL and not t.user_attrs.get("surplus")]
    assert len(in_flight) <= 32  # at most the one batch the worker was scoring


def _two_workers(spec, results, storage=None) -> list:
    from planner.sweep.run import prepare

    prepare(load_with(spec, str(results), storage))
    extra = ["--storage", storage] if storage else []
    procs = [
        _planner(
            "sweep",
            "worker",
            str(spec),
            "--task",
            str(k),
            "--workers-per-study",
            "2",
            "--results",
            str(results),
            *extra,
        )
        for k in (0, 1)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    return next(iter(_trials(spec, results, storage).values()))


def _check_shared(trials, n):
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == n
    owners = {t.user_attrs["owner"] for t in complete}
    assert len(owners) == 2, "both tasks must have contributed trials"
    assert not any(t.state == TrialState.RUNNING for t in trials)


def test_two_tasks_share_a_study_through_the_journal_file(tmp_path):
    n = 600
    spec = _spec(tmp_path, SMALL.format(name="pair", trials=n).replace("[alexnet, nin]", "[vgg16]"))
    _check_shared(_two_workers(spec, tmp_path / "results"), n)


@pytest.mark.service
def test_two_tasks_share_a_study_through_postgresql(tmp_path):
    url = os.environ.get("PLANNER_TEST_POSTGRES")
    if not url:
        pytest.skip(f"needs a PostgreSQL server: {SERVICES}")
    n = 120
    name = f"pg{uuid.uuid4().hex[:8]}"
    spec = _spec(tmp_path, SMALL.format(name=name, trials=n).replace("[alexnet, nin]", "[vgg16]"))
    try:
        _check_shared(_two_workers(spec, tmp_path / "results", url), n)
    finally:
        for cell in load_with(spec, str(tmp_path / "results"), url).cells():
            optuna.delete_study(study_name=cell.study, storage=url)


def _wait_done(spec, seconds: float) -> None:
    """Poll the sweep's status until every study is done or ``seconds`` pass."""
    deadline = time.time() + seconds
    while time.time() < deadline and not all(x.state == "done" for x in status(spec)):
        time.sleep(2)


def _slurm_ready() -> bool:
    return bool(os.environ.get("PLANNER_TEST_SLURM")) and shutil.which("sbatch") is not None


SIX = """name: {name}
trials: 40
seed: 1
grid:
  net: [alexnet, nin, vgg16]
  objective: [time, cost]
options:
  gpu: A100,H100,T4
  budget: 16gpus
"""


def test_dry_run_prints_the_script_and_writes_nothing(tmp_path, capsys):
    spec = _spec(tmp_path, SIX.format(name="dry"))
    results = tmp_path / "results"
    assert (
        main(
            [
                "sweep",
                "run",
                str(spec),
                "--backend",
                "slurm",
                "--dry-run",
                "--results",
                str(results),
                "--partition",
                "gpu",
                "--time",
                "2:00:00",
                "--array-parallel",
                "3",
                "--workers-per-study",
                "2",
            ]
        )
        == 0
    )
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/bash\n")
    assert "#SBATCH --array=0-11%3" in script and "#SBATCH --partition=gpu" in script
    assert "#SBATCH --time=2:00:00" in script
    assert "sweep worker" in script and '--task "$SLURM_ARRAY_TASK_ID"' in script
    assert "--workers-per-study 2" in script
    assert not results.exists()


@pytest.mark.service
def test_slurm_sweep_matches_local_backend(tmp_path, capsys):
    if not _slurm_ready():
        pytest.skip(f"needs a running Slurm cluster: {SERVICES}")
    spec = _spec(tmp_path, SIX.format(name="six"))
    slurm_results, local_results = tmp_path / "slurm", tmp_path / "local"
    assert main(["sweep", "run", str(spec), "--backend", "slurm", "--results", str(slurm_results)]) == 0
    assert "Submitted job array" in capsys.readouterr().out
    s = load_with(spec, str(slurm_results))
    _wait_done(s, 600)
    assert all(x.state == "done" for x in status(s)), [(x.cell.study, x.state, x.message) for x in status(s)]
    assert main(["sweep", "run", str(spec), "--results", str(local_results)]) == 0
    for r in (slurm_results, local_results):
        assert main(["sweep", "collect", str(spec), "--results", str(r)]) == 0
    keys = [
        "study",
        "gpu",
        "gpus",
        "gpus_per_node",
        "batch_per_worker",
        "scheme",
        "time_to_train_s",
        "cost_usd",
    ]
    slurm_rows = [
        {k: r[k] for k in keys} for r in csv.DictReader((slurm_results / "six" / "summary.csv").open())
    ]
    local_rows = [
        {k: r[k] for k in keys} for r in csv.DictReader((local_results / "six" / "summary.csv").open())
    ]
    assert len(slurm_rows) == 6 and slurm_rows == local_rows
    logs = list((slurm_results / "six" / "logs").glob("*.out"))
    assert len(logs) == 6
    for cell_trials in _trials(spec, slurm_results).values():
        assert sum(t.state == TrialState.COMPLETE for t in cell_trials) == 40


@pytest.mark.service
def test_two_slurm_array_tasks_share_a_study_through_postgresql(tmp_path, capsys):
    url = os.environ.get("PLANNER_TEST_POSTGRES")
    if not (_slurm_ready() and url):
        pytest.skip(f"needs a running Slurm cluster and PostgreSQL server: {SERVICES}")
    n = 150
    name = f"arr{uuid.uuid4().hex[:8]}"
    spec = _spec(tmp_path, SMALL.format(name=name, trials=n).replace("[alexnet, nin]", "[vgg16]"))
    results = tmp_path / "results"
    try:
        assert (
            main(
                [
                    "sweep",
                    "run",
                    str(spec),
                    "--backend",
                    "slurm",
                    "--workers-per-study",
                    "2",
                    "--storage",
                    url,
                    "--results",
                    str(results),
                ]
            )
            == 0
        )
        assert "2 tasks for 1 studies" in capsys.readouterr().out
        s = load_with(spec, str(results), url)
        _wait_done(s, 300)
        _check_shared(next(iter(_trials(spec, results, url).values())), n)
        assert len(list((results / name / "logs").glob("*.out"))) == 2
    finally:
        for cell in load_with(spec, str(results), url).cells():
            optuna.delete_study(study_name=cell.study, storage=url)


def _child_owner(q):
    from planner.search import shared

    q.put(shared.owner())


def test_owner_tag_is_per_process_and_reaping_rules():
    import multiprocessing as mp

    from planner.search import shared

    q = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=_child_owner, args=(q,))
    p.start()
    child = q.get(timeout=30)
    p.join()
    assert child != shared.owner() and child.split(":")[1] == str(p.pid)
    assert shared.owner_alive(shared.owner()) is True
    assert shared.owner_alive(child) is False  # the child has exited
    assert shared.owner_alive("another-host:1:1") is None

    study = optuna.create_study()
    mine, dead, remote = study.ask(), study.ask(), study.ask()
    mine.set_user_attr("owner", shared.owner())
    dead.set_user_attr("owner", child)
    remote.set_user_attr("owner", "another-host:1:1")
    assert shared.reap(study, stale_after=3600) == 1  # only the dead owner's trial
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {0: TrialState.RUNNING, 1: TrialState.FAIL, 2: TrialState.RUNNING}
    assert shared.reap(study, stale_after=0) == 1  # the remote one is stale by age; ours never
    assert study.get_trials(deepcopy=False)[0].state == TrialState.RUNNING


def test_claims_never_exceed_the_trial_count():
    from planner.search import shared

    study = optuna.create_study()
    first = shared.claim(study, 10, 8)
    assert len(first) == 8
    second = shared.claim(study, 10, 8)  # only 2 are left while the first 8 run
    assert len(second) == 2
    assert shared.claim(study, 10, 8) == []  # all claimed, none complete: wait
    for t in first + second:
        study.tell(t, 1.0)
    assert shared.claim(study, 10, 8) is None  # done
    assert shared.complete_count(study) == 10
