"""`planner sweep`: run a grid of studies locally or as a Slurm job array; status; collect.

Every cell of a spec is one Optuna study with a stable name in one storage (by default a
journal file in the sweep folder). A study is done when it has its full count of COMPLETE
trials and its result (the optimizer's answer, certified by enumeration where the space is
small) is stored on it as the user attribute ``result``. So a sweep is resumable: running it
again skips done studies and finishes the others, and several workers may share one study
(:mod:`planner.search.shared` keeps the trial count exact and recovers trials of killed workers).
Nothing is written outside the sweep folder and the storage.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from planner.errors import BadInput, InfeasibleError, PlannerError
from planner.sweep.spec import Cell, SweepSpec, load

STATES = ("queued", "running", "done", "failed")


_STORAGES: dict[str, object] = {}


def _storage(url: str):
    """The Optuna storage of a URL (journal:FILE, sqlite:///, postgresql://), one per process:
    a journal storage replays its file once and then reads only what was appended."""
    if url not in _STORAGES:
        try:
            if url.startswith("journal:"):
                from planner.search import journal

                Path(url[len("journal:") :]).parent.mkdir(parents=True, exist_ok=True)
                _STORAGES[url] = journal.storage(url[len("journal:") :])
            else:
                import optuna

                _STORAGES[url] = optuna.storages.get_storage(url)
        except Exception as exc:  # driver missing, server down, bad URL: one line, no traceback
            msg = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise BadInput(f"sweep storage {url} cannot be opened: {msg}") from None
    return _STORAGES[url]


def prepare(spec: SweepSpec) -> None:
    """Create the sweep folder, keep a copy of the spec there, and create every study."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    created = next((p for p in reversed((spec.folder, *spec.folder.parents)) if not p.exists()), None)
    spec.folder.mkdir(parents=True, exist_ok=True)
    try:  # a storage that cannot be opened leaves no folder behind
        storage = _storage(spec.storage)
    except BadInput:
        if created is not None:  # the first folder this call made, and what it holds
            shutil.rmtree(created, ignore_errors=True)
        raise
    copy = spec.folder / "spec.yaml"
    if not copy.exists() or copy.read_text() != spec.path.read_text():
        tmp = copy.with_name("spec.yaml.tmp")
        shutil.copyfile(spec.path, tmp)
        tmp.replace(copy)
    existing = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    for cell in spec.cells():
        if cell.study not in existing:
            n = len(cell.request.objective.split(","))
            optuna.create_study(
                storage=storage, study_name=cell.study, directions=["minimize"] * n, load_if_exists=True
            )


def load_with(path, results: str | None = None, storage: str | None = None) -> SweepSpec:
    """A spec with the command line's --results and --storage applied."""
    from dataclasses import replace

    spec = load(path, results)
    return replace(spec, storage_url=storage) if storage else spec


def run_cell(
    spec_path: str, index: int, results: str | None = None, storage: str | None = None
) -> tuple[str, str]:
    """Optimise one study to completion and store its result; returns (study, state).

    The worker of both backends. Safe to run several times at once on the same study.
    """
    import optuna

    from planner.pipeline import optimize

    spec = load_with(spec_path, results, storage)
    cell = spec.cells()[index]
    req = _cell_request(spec, cell)
    storage = _storage(spec.storage)
    try:
        result = optimize(req).to_dict()
        outcome = {"result": result}
    except InfeasibleError as exc:
        outcome = {"result": {"infeasible": str(exc)}}
    except PlannerError as exc:
        outcome = {"error": str(exc)}
    except Exception as exc:  # a bug: keep it with the study, the rerun tries again
        outcome = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    study = optuna.load_study(study_name=cell.study, storage=storage)
    for key, value in outcome.items():
        study.set_user_attr(key, value)
    if "result" in outcome and "error" in study.user_attrs:
        study.set_user_attr("error", None)
    return cell.study, "done" if "result" in outcome else "failed"


def _cell_request(spec: SweepSpec, cell: Cell):
    from dataclasses import replace

    return replace(cell.request, study_name=cell.study, storage=spec.storage)


@dataclass
class StudyStatus:
    cell: Cell
    complete: int
    running: int
    state: str
    best: float | None
    message: str = ""
    result: dict | None = None


def _study_state(study, spec: SweepSpec, complete: list, running: int) -> tuple[str, str, float | None]:
    """(state, note, best value) of one stored study (see :data:`STATES`)."""
    best = None
    if complete and len(study.directions) == 1:
        best = min(t.value for t in complete if t.value is not None)
    attrs = study.user_attrs
    if attrs.get("result") is not None and len(complete) >= spec.trials:
        objective = (attrs["result"].get("best") or {}).get("objective")
        # the certified answer, not just the best trial
        return (
            "done",
            attrs["result"].get("infeasible", ""),
            objective if isinstance(objective, float) else best,
        )
    if attrs.get("error") and running == 0:
        return "failed", attrs["error"], best
    return ("running" if complete or running else "queued"), "", best


def status(spec: SweepSpec) -> list[StudyStatus]:
    """Per study: trials done, best value so far, state."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = _storage(spec.storage)
    known = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    out = []
    for cell in spec.cells():
        if cell.study not in known:
            out.append(StudyStatus(cell, 0, 0, "queued", None))
            continue
        study = optuna.load_study(study_name=cell.study, storage=storage)
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        running = len(trials) - len(complete)
        state, msg, best = _study_state(study, spec, complete, running)
        out.append(
            StudyStatus(cell, len(complete), running, state, best, msg, study.user_attrs.get("result"))
        )
    return out


def _pending(spec: SweepSpec) -> list[Cell]:
    return [s.cell for s in status(spec) if s.state != "done"]


def run_local(spec: SweepSpec, workers: int | None = None, progress: bool | None = None) -> list[StudyStatus]:
    """Run every unfinished study in a process pool (one process per core); show progress."""
    prepare(spec)
    todo = _pending(spec)
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    if todo:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(run_cell, str(spec.path), c.index, str(spec.results), spec.storage_url)
                for c in todo
            ]
            _watch(spec, todo, futures, progress)
            for f in futures:
                f.result()  # re-raise a crash of the pool itself
    return status(spec)


def _watch(spec: SweepSpec, todo: list[Cell], futures, progress: bool | None) -> None:
    """Progress: a bar per study and one overall (rich, on a terminal); lines otherwise."""
    interactive = sys.stdout.isatty() if progress is None else progress
    (_watch_bars if interactive else _watch_lines)(spec, todo, futures)


def _watch_bars(spec: SweepSpec, todo: list[Cell], futures) -> None:
    """A rich progress bar per study and one overall, until every future is done."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(todo) * spec.trials
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    ) as bar:
        overall = bar.add_task(f"[bold]{spec.name}: all studies", total=total)
        tasks = {c.study: bar.add_task(c.study.split(".")[1][:40], total=spec.trials) for c in todo}

        def update() -> None:
            counts = {s.cell.study: s.complete for s in status(spec) if s.cell.study in tasks}
            for name, n in counts.items():
                bar.update(tasks[name], completed=min(n, spec.trials))
            bar.update(overall, completed=min(sum(counts.values()), total))

        while not all(f.done() for f in futures):
            update()
            time.sleep(0.5)
        update()


def _watch_lines(spec: SweepSpec, todo: list[Cell], futures) -> None:
    """One line per finished study, in the order they finish."""
    reported: set[int] = set()
    while len(reported) < len(futures):
        for i, f in enumerate(futures):
            if i not in reported and f.done():
                reported.add(i)
                name, state = f.result()
                print(f"[{len(reported)}/{len(futures)}] {name}: {state}", flush=True)
        time.sleep(0.2)


# ---- Slurm ---------------------------------------------------------------------------------


def task_indices(spec: SweepSpec, cells: list[Cell], per_study: int) -> list[int]:
    """Array task ids of the given studies: study i has tasks i*K .. i*K+K-1."""
    return [c.index * per_study + k for c in cells for k in range(per_study)]


def slurm_script(
    spec: SweepSpec,
    tasks: list[int],
    per_study: int,
    partition: str | None,
    time_limit: str,
    array_parallel: int | None,
    python: str | None = None,
) -> str:
    """The sbatch script of the job array; every task runs `planner sweep worker`."""
    folder = spec.folder.resolve()
    array = _ranges(tasks) + (f"%{array_parallel}" if array_parallel else "")
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=planner-{spec.name}",
        f"#SBATCH --array={array}",
        f"#SBATCH --time={time_limit}",
        "#SBATCH --ntasks=1",
        "#SBATCH --cpus-per-task=1",
        f"#SBATCH --output={folder}/logs/%A_%a.out",
        f"#SBATCH --chdir={Path.cwd().resolve()}",
    ]
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    py = python or sys.executable
    lines += [
        "set -euo pipefail",
        f'exec {py} -m planner sweep worker {folder / "spec.yaml"} --task "$SLURM_ARRAY_TASK_ID" '
        f"--workers-per-study {per_study} --results {spec.results.resolve()}"
        + (f" --storage '{spec.storage_url}'" if spec.storage_url else ""),
        "",
    ]
    return "\n".join(lines)


def _ranges(ids: list[int]) -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8' (Slurm's --array syntax)."""
    out, ids = [], sorted(ids)
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def submit(spec: SweepSpec, script: str) -> str:
    """Write the script into the sweep folder, submit it with sbatch, return the job id."""
    import json
    import subprocess

    if not shutil.which("sbatch"):
        raise PlannerError("sbatch not found: --backend slurm needs a Slurm client on this machine")
    (spec.folder / "logs").mkdir(parents=True, exist_ok=True)
    path = spec.folder / "sweep.sbatch"
    path.write_text(script)
    proc = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise PlannerError(
            f"sbatch failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
        )
    job = proc.stdout.strip().split(";")[0]
    jobs_file = spec.folder / "slurm.json"
    jobs = json.loads(jobs_file.read_text()) if jobs_file.exists() else []
    jobs.append({"job_id": job, "submitted": time.strftime("%Y-%m-%dT%H:%M:%S"), "script": path.name})
    jobs_file.write_text(json.dumps(jobs, indent=2) + "\n")
    return job


def slurm_states(spec: SweepSpec, per_study: int | None = None) -> dict[int, str]:
    """Slurm state per study index of the latest submitted job ('' when not in the queue)."""
    import json
    import subprocess

    jobs_file = spec.folder / "slurm.json"
    if not jobs_file.exists() or not shutil.which("squeue"):
        return {}
    job = json.loads(jobs_file.read_text())[-1]["job_id"]
    proc = subprocess.run(
        ["squeue", "-h", "-r", "-j", job, "-o", "%K %T"], capture_output=True, text=True, check=False
    )
    per_study = per_study or int(_script_k(spec.folder / "sweep.sbatch"))
    states: dict[int, str] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            states.setdefault(int(parts[0]) // per_study, parts[1])
    return states


def _script_k(path: Path) -> str:
    text = path.read_text() if path.exists() else ""
    marker = "--workers-per-study "
    return text.split(marker, 1)[1].split()[0] if marker in text else "1"
