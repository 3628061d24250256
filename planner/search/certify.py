"""The Search stage as one call, handing on an :class:`Outcome`.

* ``exhaustive="auto"`` (the default): a space of at most :data:`ENUMERATE_LIMIT` valid plans
  is enumerated outright; the answer is its optimum (or exact front) and no sampler runs: the
  evaluator scores every plan in less time than the sampler takes to propose 200. A larger
  space is searched (Optuna, a sample of valid plans, refinement).
* ``"always"``: search, then enumerate, and report the search's gap to the optimum.
* ``"never"``: search only.

A persisted study (``storage``) is always run, and certified as under ``"always"`` when the
space is small enough. Enumeration counts the valid plans without testing every combination
(:mod:`planner.search.valid`), streams them in chunks and keeps what the Result asks for
(:mod:`planner.search.stream`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search import shared, valid
from planner.search.scored import Scored, merge
from planner.search.stream import Enumerated, Keep, enumerate_space, scored_chunks, take
from planner.search.study import open_study, run

# Valid plans the default search scores outright: about a second for transformer plans, less
# for CNNs (benchmarks/bench_search.py prints the rate).
ENUMERATE_LIMIT = 1_000_000


@dataclass
class Outcome:
    """What a search produced: every plan it scored and, when the space was enumerated, the
    plans of it the Result needs (all of them without a :class:`Keep`) with its counts."""

    scorer: Scorer
    objectives: tuple[str, ...]
    found: Scored
    full: Scored | None
    search: dict
    enumerated: Enumerated | None = None

    def front_check(self, keep: np.ndarray) -> dict:
        """When the space was enumerated: the exact front's size and, when a search ran, how much
        of it the search found (a front plan counts as found when the search scored a plan with
        its objectives)."""
        if self.full is None:
            return {}
        if self.search.get("method") == "enumeration":  # no search ran: the front is exact
            return {"exhaustive_front_size": int(keep.size)}
        got = self.found.objectives[:, self.found.feasible]  # (n_obj, found)
        exact = self.evaluated.objectives[:, keep]  # (n_obj, front)
        hit = np.isclose(exact[:, :, None], got[:, None, :], rtol=1e-12, atol=0).all(axis=0).any(axis=1)
        return {"exhaustive_front_size": int(keep.size), "front_found_by_search": int(hit.sum())}

    @cached_property
    def evaluated(self) -> Scored:
        """The plans to answer from: the enumerated ones kept when the space was enumerated,
        else every distinct plan the search scored. A front enumerated without keeping every
        plan (a large space) adds the exact front to the search's plans."""
        if self.full is None:
            return self.found
        if self.enumerated is not None and not self.enumerated.kept_all and len(self.objectives) > 1:
            both = merge([self.full, self.found])  # the enumerated plan first among equals
            _, first = np.unique(np.vstack(list(both.cols.values())), axis=1, return_index=True)
            return take(both, np.sort(first))
        return self.full

    def parts(self) -> Iterator[Scored]:
        """Every distinct plan scored, in parts: the whole space chunk by chunk (scored again)
        when it was enumerated without keeping every plan."""
        if self.enumerated is None or self.enumerated.kept_all:
            yield self.evaluated
            return
        for _, s in scored_chunks(self.scorer, self.objectives):
            yield s


def search_and_certify(scorer: Scorer, objectives: tuple[str, ...], req, keep: Keep | None = None) -> Outcome:
    """Search the space as ``req`` asks (seed, storage, trials, timeout, exhaustive; see the
    module docstring), keeping of an enumerated space the plans ``keep`` asks for (every valid
    plan without it)."""
    space = scorer.space
    core = valid.core(space)
    small = core.count <= ENUMERATE_LIMIT
    if req.exhaustive == "auto" and small and req.storage is None:
        return _enumerated(scorer, objectives, req, keep, core)
    study = open_study(objectives, req.seed, req.storage, req.study_name)
    found, stats = run(scorer, objectives, study, req.trials, timeout=req.timeout, core=core)
    certify = req.exhaustive == "always" or (req.exhaustive == "auto" and small)
    full, counts = enumerate_space(scorer, objectives, keep) if certify else (None, None)
    search_info = {
        "method": "search",
        "sampler": stats.sampler,
        "seed": req.seed,
        "trials": shared.complete_count(study),
        "trials_this_run": stats.trials,
        "evaluated_plans": scorer.evaluated,
        "cache_hits": stats.cache_hits,
        "refinement_rounds": stats.refinement_rounds,
        "space_size": space.raw_size,
        "valid_plans": core.count,
        "seconds": stats.seconds,
        "study_name": study.study_name if req.storage else None,
    }
    return Outcome(scorer, objectives, found, full, search_info, counts)


def _enumerated(scorer: Scorer, objectives: tuple[str, ...], req, keep: Keep | None, core) -> Outcome:
    """The search as the enumeration: every valid plan scored, no sampler."""
    start = time.perf_counter()
    full, counts = enumerate_space(scorer, objectives, keep)
    search_info = {
        "method": "enumeration",
        "sampler": None,
        "seed": req.seed,
        "trials": 0,
        "trials_this_run": 0,
        "evaluated_plans": scorer.evaluated,
        "cache_hits": 0,
        "refinement_rounds": 0,
        "space_size": scorer.space.raw_size,
        "valid_plans": core.count,
        "seconds": time.perf_counter() - start,
        "study_name": None,
    }
    return Outcome(scorer, objectives, full, full, search_info, counts)
