"""The Search stage as one call: run the study, then certify it by enumeration when the space
is small enough, and hand on an :class:`Outcome`. Enumeration streams the space in chunks and
keeps what the Result asks for (:mod:`planner.search.stream`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search import shared
from planner.search.scored import Scored, merge
from planner.search.stream import Enumerated, Keep, enumerate_space, scored_chunks, take
from planner.search.study import open_study, run

EXHAUSTIVE_LIMIT = 2_000_000  # raw combinations scored in about a second (bench_optimize.py)


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
        """When the space was enumerated: the exact front's size and how much of it the search
        found (a front plan counts as found when the search scored a plan with its objectives)."""
        if self.full is None:
            return {}
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
    """Run the search (``req``: seed, storage, trials, timeout, exhaustive), then enumerate the
    space when asked to or when it has at most :data:`EXHAUSTIVE_LIMIT` combinations, keeping
    the plans ``keep`` asks for (every valid plan without it)."""
    space = scorer.space
    study = open_study(objectives, req.seed, req.storage, req.study_name)
    found, stats = run(scorer, objectives, study, req.trials, timeout=req.timeout)
    certify = req.exhaustive == "always" or (req.exhaustive == "auto" and space.raw_size <= EXHAUSTIVE_LIMIT)
    full, counts = enumerate_space(scorer, objectives, keep) if certify else (None, None)
    search_info = {
        "sampler": stats.sampler,
        "seed": req.seed,
        "trials": shared.complete_count(study),
        "trials_this_run": stats.trials,
        "evaluated_plans": scorer.evaluated,
        "cache_hits": stats.cache_hits,
        "refinement_rounds": stats.refinement_rounds,
        "space_size": space.raw_size,
        "seconds": stats.seconds,
        "study_name": study.study_name if req.storage else None,
    }
    return Outcome(scorer, objectives, found, full, search_info, counts)
