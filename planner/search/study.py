"""The search: Optuna proposes plans, the vectorised evaluator scores them in batches.

* One objective: TPE (Bergstra et al. 2011); two or more: NSGA-II (Deb et al. 2002).
* Ask/tell in batches: a batch of trials is asked, scored in ONE evaluator call, and told.
  Repeated plans are answered from a cache. Each trial carries its worst relative constraint
  violation with ``Trial.set_constraint`` (feasible when the value is <= 0).
* Every trial suggests one categorical parameter per declared axis of the space (its name and
  choice list come from :mod:`planner.space.axes`).
* :mod:`planner.search.refine` polishes the result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from planner.errors import BadInput, PlannerError
from planner.metrics.scorer import Scorer
from planner.search import groups, shared, valid
from planner.search.refine import refine, refine_front
from planner.search.sample import sample
from planner.search.scored import Scored, best_index, front_indices, merge, score
from planner.search.shared import STALE_AFTER_S


@dataclass
class SearchStats:
    sampler: str
    seed: int
    trials: int = 0
    evaluated_plans: int = 0
    cache_hits: int = 0
    refinement_rounds: int = 0
    seconds: float = 0.0
    history: list = field(default_factory=list)


def _sampler(objectives, seed):
    import optuna

    if len(objectives) == 1:
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=20)
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=40)


def open_study(objectives, seed, storage=None, study_name=None):
    """A new in-memory study, or a persisted one created or resumed by name.

    ``storage`` is an Optuna RDB URL (sqlite:///file.db, postgresql://user:pw@host/db) or
    ``journal:FILE`` for Optuna's journal file. A storage that cannot be opened is a one-line
    :class:`~planner.errors.BadInput`.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions = ["minimize"] * len(objectives)
    try:
        backend = storage
        if storage is not None and storage.startswith("journal:"):
            from planner.search import journal

            path = storage[len("journal:") :]
            if not path:
                raise ValueError("journal: needs a file name, e.g. journal:studies.journal")
            backend = journal.storage(path)  # a killed owner's lock is taken over, a wait said
        return optuna.create_study(
            storage=backend,
            study_name=study_name,
            directions=directions,
            sampler=_sampler(objectives, seed),
            load_if_exists=study_name is not None,
        )
    except ValueError as exc:
        if "directions" in str(exc) or "direction" in str(exc):
            raise BadInput(
                f"study '{study_name}' in {storage} was made for other objectives: {exc}"
            ) from None
        raise BadInput(f"cannot open --storage {storage}: {exc}") from None
    except Exception as exc:  # driver missing, server down, bad URL: one line, no traceback
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = " (pip install 'planner[postgres]' for PostgreSQL)" if isinstance(exc, ImportError) else ""
        raise BadInput(f"cannot open --storage {storage}: {msg}{hint}") from None


def _keys(space, trials) -> list[tuple[int, ...]]:
    """Each asked trial's plan as choice indices: one categorical suggestion per axis that has a
    choice to make (an axis of one choice is not a parameter of the study)."""
    choices = {a: list(space.choices(a)) for a in space.names}
    return [
        tuple(
            choices[a].index(t.suggest_categorical(a, choices[a])) if len(choices[a]) > 1 else 0
            for a in space.names
        )
        for t in trials
    ]


def _param(space, params: dict, axis: str):
    """A trial's value of ``axis`` (the only choice when the axis has one)."""
    choices = space.choices(axis)
    return choices[0] if len(choices) == 1 and axis not in params else params[axis]


def _tell(scorer: Scorer, objectives, study, asked, cache: dict, stats: SearchStats) -> None:
    """Score the asked trials' new plans in one call, then tell every trial its values."""
    names = scorer.space.names
    keys = _keys(scorer.space, asked)
    fresh = sorted({k for k in keys if k not in cache})
    stats.cache_hits += len(keys) - len(fresh)
    if fresh:
        arr = np.array(fresh, dtype=np.int64).T
        s = score(scorer, dict(zip(names, arr, strict=True)), objectives)
        for j, k in enumerate(fresh):
            cache[k] = (s.objectives[:, j], s.constraints[:, j])
    for t, k in zip(asked, keys, strict=True):
        obj, con = cache[k]
        # One constraint, the worst relative violation: the sampler needs only that, and each
        # constraint is a storage write (the per-constraint values are re-scored when needed).
        worst = float(np.max(con))
        t.set_constraint("violation", worst if np.isfinite(worst) else 1e30)
        study.tell(t, [float(v) for v in obj] if len(obj) > 1 else float(obj[0]))
    stats.trials += len(asked)


REFINED = "planner_refined"  # study user attribute: plans refinement found (index keys by axis name)


def _remember_refined(space, study, found: Scored, objectives) -> None:
    """Keep the refined best (or front) in the study, so a resumed run starts from it: Optuna
    stores only asked trials, and refinement's plans are not trials (trial counts stay exact)."""
    idx = [best_index(found)] if len(objectives) == 1 else list(front_indices(found))
    idx = [i for i in idx if i is not None]
    if not idx:
        return
    old = study.user_attrs.get(REFINED, [])
    plain = lambda v: v.item() if hasattr(v, "item") else v  # noqa: E731  (JSON-safe)
    new = [{a: plain(space.choices(a)[int(k)]) for a, k in zip(space.names, found.key(i))} for i in idx]
    merged = old + [p for p in new if p not in old]
    study.set_user_attr(REFINED, merged[-64:])


def _study_keys(space, study) -> set[tuple[int, ...]]:
    """Every completed trial of the study (also those of earlier runs or other workers), and
    the plans earlier runs' refinement found."""
    keys = set()
    for params in study.user_attrs.get(REFINED, []):
        try:
            keys.add(tuple(space.choices(a).index(_param(space, params, a)) for a in space.names))
        except (KeyError, ValueError):
            continue  # a plan of a different space
    for t in study.get_trials(deepcopy=False, states=shared.COMPLETE):
        if all(a in t.params or len(space.choices(a)) == 1 for a in space.names):
            try:
                keys.add(tuple(space.choices(a).index(_param(space, t.params, a)) for a in space.names))
            except ValueError:
                continue  # a trial from a different space
    return keys


def run(
    scorer: Scorer,
    objectives: tuple[str, ...],
    study,
    trials: int,
    batch: int = 32,
    timeout: float | None = None,
    refine_result: bool = True,
    stale_after: float = STALE_AFTER_S,
    core: valid.Core | None = None,
) -> tuple[Scored, SearchStats]:
    """Bring ``study`` to ``trials`` COMPLETE trials; return every distinct plan it scored,
    with a uniform sample of the valid plans (``core``: the space's, built when not given) and
    what refinement found from the best of them.

    Safe with several workers (processes, Slurm tasks) on one study: see :mod:`planner.search.shared`.
    """
    stats = SearchStats(type(study.sampler).__name__, getattr(study.sampler, "_seed", None) or 0)
    start = time.perf_counter()
    cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    while timeout is None or not stats.trials or time.perf_counter() - start <= timeout:
        # (the first batch always runs, so there is an answer to give)
        asked = shared.claim(study, trials, batch, stale_after)
        if asked is None:
            break  # the study has its trials
        if not asked:
            time.sleep(0.2)  # other workers hold the remaining trials; wait for them
            continue
        _tell(scorer, objectives, study, asked, cache, stats)
    keys = set(cache) | _study_keys(scorer.space, study)
    if not keys:
        raise PlannerError(f"study '{study.study_name}' has no completed trial to answer from")
    arr = np.array(sorted(keys), dtype=np.int64).T
    found = score(scorer, dict(zip(scorer.space.names, arr, strict=True)), objectives)
    core = core or valid.core(scorer.space)
    drawn = sample(scorer, objectives, stats.seed, core)
    if drawn is not None:
        found = merge([found, drawn])
    if len(objectives) == 1:
        found = groups.search(scorer, objectives, found, core)
    if refine_result:
        found = (refine if len(objectives) == 1 else refine_front)(scorer, objectives, found, stats)
        _remember_refined(scorer.space, study, found, objectives)
    stats.evaluated_plans = scorer.evaluated
    stats.seconds = time.perf_counter() - start
    return found, stats
