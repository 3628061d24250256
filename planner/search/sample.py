"""A vectorised random sample of a large space: thousands of valid plans scored in one
evaluator call, merged with the sampler's trials before refinement.

Model-parallel spaces (tensor and pipeline degrees, ZeRO, recomputation, ...) hold hundreds of
millions of combinations, of which a few per cent are valid and fewer fit in memory or meet a
deadline; a few hundred TPE trials can miss every plan that does. The sample is drawn
uniformly among the valid plans (:func:`planner.search.valid.core`), not among combinations,
so each draw is a plan; scoring it costs a fraction of a second (the evaluator scores about a
million plans per second) and gives refinement feasible starts.
"""

from __future__ import annotations

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search import groups, valid
from planner.search.scored import Scored, front_indices, ranked, score
from planner.search.stream import take

SAMPLE_SIZE = 1 << 16  # valid plans drawn (about 0.1 s to score)
KEEP = 64  # the sample's best plans kept (one objective) besides each group's leader; its front (several)


def sample(
    scorer: Scorer, objectives: tuple[str, ...], seed: int, core: valid.Core, n: int = SAMPLE_SIZE
) -> Scored | None:
    """``n`` uniform draws among the valid plans (``core``: the space's), scored; only their
    best :data:`KEEP` feasible plans and each (GPU type, count) group's leading plan
    (:func:`planner.search.groups.leaders`) are returned with one objective, their front with
    several, as starts for the group search and refinement. A space of at most ``n`` valid plans
    (enumerated by default; searched when a study is shared or ``--exhaustive never``) is drawn
    too: its valid plans are few among its combinations, and a sampler's trials can miss them
    all. None for a space without a valid plan."""
    space = scorer.space
    if core.count == 0:
        return None
    cols = core.draw(space, n, np.random.default_rng(seed))
    _, first = np.unique(valid.numbers(space, cols), return_index=True)
    s = score(scorer, {a: c[first] for a, c in cols.items()}, objectives)
    if len(objectives) > 1:
        return take(s, front_indices(s))
    # the best plans, and each hardware group's leading plan: feasible or, under a deadline or
    # memory limit no drawn plan meets, the one that misses it least (a seed for the group search)
    return take(s, np.union1d(ranked(s)[:KEEP], groups.leaders(scorer.space, s)))
