"""The search: Optuna proposes plans, the vectorised evaluator scores them in batches.

* One objective: TPE (Bergstra et al. 2011); two or more: NSGA-II (Deb et al. 2002).
* Ask/tell in batches: a batch of trials is asked, scored in ONE evaluator call, and told.
  Repeated plans are answered from a cache. Each trial carries its worst relative constraint
  violation with ``Trial.set_constraint`` (feasible when the value is <= 0).
* A vectorised local refinement polishes the result, trying every plan that differs from
  the best one (one objective) or from each Pareto plan (several) in one or two axes, in one
  evaluator call per round, until nothing improves.
* :func:`exhaustive` scores the whole space at once and returns the exact optimum.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search import shared
from planner.search.shared import STALE_AFTER_S
from planner.space.space import AXES

_INVALID = 1e30  # objective value told for an invalid combination (also marked infeasible)


@dataclass
class Scored:
    """Index columns of some plans with their objective and constraint values."""

    cols: dict[str, np.ndarray]
    objectives: np.ndarray  # (n_obj, n)
    constraints: np.ndarray  # (n_con, n)

    @property
    def feasible(self) -> np.ndarray:
        return (self.constraints <= 0).all(axis=0)

    def __len__(self) -> int:
        return self.objectives.shape[1]


def score(scorer: Scorer, cols: dict[str, np.ndarray], objectives: tuple[str, ...]) -> Scored:
    """Objective and constraint values of index columns; invalid combinations are infeasible."""
    valid = scorer.space.valid(cols)
    n = len(valid)
    obj = np.full((len(objectives), n), _INVALID)
    con = np.ones((len(scorer.limits.names()), n))
    if valid.any():
        sub = {a: c[valid] for a, c in cols.items()}
        m = scorer.metrics(sub)
        obj[:, valid] = np.nan_to_num(scorer.objective_values(m, objectives), nan=_INVALID, posinf=_INVALID)
        con[:, valid] = scorer.limits.values(m)
    return Scored(cols, obj, con)


def exhaustive(scorer: Scorer, objectives: tuple[str, ...]) -> Scored:
    """Every valid plan of the space, scored in one call."""
    return score(scorer, scorer.space.grid(), objectives)


def best_index(s: Scored) -> int | None:
    """Index of the feasible plan with the lowest first objective (None if none is feasible)."""
    ok = np.flatnonzero(s.feasible)
    if ok.size == 0:
        return None
    return int(ok[np.argmin(s.objectives[0, ok])])


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Non-dominated columns of ``values`` (n_obj, n), minimising every row."""
    n = values.shape[1]
    order = np.lexsort(values[::-1])
    keep = np.zeros(n, dtype=bool)
    front: list[np.ndarray] = []
    for i in order:
        v = values[:, i]
        if any((f <= v).all() and (f < v).any() for f in front) or any((f == v).all() for f in front):
            continue
        front.append(v)
        keep[i] = True
    return keep


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

    from planner.errors import BadInput

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions = ["minimize"] * len(objectives)
    try:
        backend = storage
        if storage is not None and storage.startswith("journal:"):
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend

            path = storage[len("journal:") :]
            if not path:
                raise ValueError("journal: needs a file name, e.g. journal:studies.journal")
            backend = JournalStorage(JournalFileBackend(path))
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


def run(
    scorer: Scorer,
    objectives: tuple[str, ...],
    study,
    trials: int,
    batch: int = 32,
    timeout: float | None = None,
    refine: bool = True,
    stale_after: float = STALE_AFTER_S,
) -> tuple[Scored, SearchStats]:
    """Bring ``study`` to ``trials`` COMPLETE trials; return every distinct plan it scored.

    Safe with several workers (processes, Slurm tasks) on one study: see :mod:`planner.search.shared`.
    """
    space = scorer.space
    stats = SearchStats(type(study.sampler).__name__, getattr(study.sampler, "_seed", None) or 0)
    start = time.perf_counter()
    cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    while True:
        if timeout is not None and stats.trials and time.perf_counter() - start > timeout:
            break  # (the first batch always runs, so there is an answer to give)
        asked = shared.claim(study, trials, batch, stale_after)
        if asked is None:
            break  # the study has its trials
        if not asked:
            time.sleep(0.2)  # other workers hold the remaining trials; wait for them
            continue
        keys = []
        for t in asked:
            keys.append(
                tuple(space.choices(a).index(t.suggest_categorical(a, list(space.choices(a)))) for a in AXES)
            )
        fresh = sorted({k for k in keys if k not in cache})
        stats.cache_hits += len(keys) - len(fresh)
        if fresh:
            arr = np.array(fresh, dtype=np.int64).T
            s = score(scorer, dict(zip(AXES, arr, strict=True)), objectives)
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
    # Every completed trial of the study (also those of earlier runs or other workers).
    keys = set(cache)
    for t in study.get_trials(deepcopy=False, states=shared.COMPLETE):
        if all(a in t.params for a in AXES):
            try:
                keys.add(tuple(space.choices(a).index(t.params[a]) for a in AXES))
            except ValueError:
                continue  # a trial from a different space
    if not keys:
        from planner.errors import PlannerError

        raise PlannerError(f"study '{study.study_name}' has no completed trial to answer from")
    arr = np.array(sorted(keys), dtype=np.int64).T
    found = score(scorer, dict(zip(AXES, arr, strict=True)), objectives)
    if refine:
        found = (_refine if len(objectives) == 1 else _refine_front)(scorer, objectives, found, stats)
    stats.evaluated_plans = scorer.evaluated
    stats.seconds = time.perf_counter() - start
    return found, stats


def _merge(pool: list[Scored]) -> Scored:
    return Scored(
        {a: np.concatenate([p.cols[a] for p in pool]) for a in AXES},
        np.concatenate([p.objectives for p in pool], axis=1),
        np.concatenate([p.constraints for p in pool], axis=1),
    )


def _front_keys(s: Scored) -> tuple[np.ndarray, set]:
    feas = np.flatnonzero(s.feasible)
    if feas.size == 0:
        return feas, set()
    keep = feas[pareto_mask(s.objectives[:, feas])]
    return keep, {tuple(int(s.cols[a][j]) for a in AXES) for j in keep}


def _refine_front(scorer, objectives, found: Scored, stats: SearchStats, max_rounds: int = 10) -> Scored:
    """Several objectives: try the one- and two-axis neighbours of every Pareto plan, keep the
    new non-dominated ones, and repeat until the front stops changing."""
    pool = [found]
    keep, front = _front_keys(found)
    tried: set = set()
    for _ in range(max_rounds):
        merged = _merge(pool)
        todo = [j for j in keep if tuple(int(merged.cols[a][j]) for a in AXES) not in tried]
        if not todo:
            break
        blocks = []
        for j in todo:
            centre = {a: int(merged.cols[a][j]) for a in AXES}
            tried.add(tuple(centre[a] for a in AXES))
            blocks.append(_neighbours(scorer.space, centre))
        cols = {a: np.concatenate([b[a] for b in blocks]) for a in AXES}
        pool.append(score(scorer, cols, objectives))
        stats.refinement_rounds += 1
        merged = _merge(pool)
        keep, new_front = _front_keys(merged)
        if new_front == front:
            break
        front = new_front
    return _merge(pool)


def _neighbours(space, centre: dict[str, int]) -> dict[str, np.ndarray]:
    """Every plan differing from ``centre`` in one or two axes, as index columns."""
    blocks = []
    for a, b in itertools.combinations(AXES, 2):
        na, nb = len(space.choices(a)), len(space.choices(b))
        ia, ib = np.meshgrid(np.arange(na), np.arange(nb), indexing="ij")
        cols = {x: np.full(na * nb, centre[x]) for x in AXES}
        cols[a], cols[b] = ia.ravel(), ib.ravel()
        blocks.append(cols)
    return {x: np.concatenate([blk[x] for blk in blocks]) for x in AXES}


def _refine(scorer, objectives, found: Scored, stats: SearchStats, max_rounds: int = 20) -> Scored:
    """Coordinate descent over pairs of axes from the best feasible plan (see module doc)."""
    i = best_index(found)
    if i is None:
        return found
    pool = [found]
    best_val = found.objectives[0, i]
    centre = {a: int(found.cols[a][i]) for a in AXES}
    for _ in range(max_rounds):
        nb = score(scorer, _neighbours(scorer.space, centre), objectives)
        pool.append(nb)
        stats.refinement_rounds += 1
        j = best_index(nb)
        if j is None or nb.objectives[0, j] >= best_val * (1 - 1e-12):
            break
        best_val = nb.objectives[0, j]
        centre = {a: int(nb.cols[a][j]) for a in AXES}
    return _merge(pool)
