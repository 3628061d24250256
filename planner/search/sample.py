"""A vectorised random sample of a large space: thousands of plans scored in one evaluator
call, merged with the sampler's trials before refinement.

Model-parallel spaces (tensor and pipeline degrees, ZeRO, recomputation, ...) hold hundreds of
millions of combinations, of which a few per cent are valid and fewer fit in memory; a few
hundred TPE trials can miss every plan that fits. Scoring a uniform sample costs milliseconds
(the evaluator scores millions of plans per second) and gives refinement feasible starts.
"""

from __future__ import annotations

import numpy as np

from planner.metrics.scorer import Scorer
from planner.search.scored import Scored, front_indices, ranked, score
from planner.search.stream import take

SAMPLE_SIZE = 1 << 17  # combinations drawn (about 0.1 s to score)
SAMPLE_ABOVE = 2_000_000  # only spaces too large to enumerate by default (certify.EXHAUSTIVE_LIMIT)


KEEP = 64  # the sample's best plans kept as starts (one objective); its front (several)


def sample(scorer: Scorer, objectives: tuple[str, ...], seed: int, n: int = SAMPLE_SIZE) -> Scored | None:
    """``n`` uniform draws of the space's index combinations, scored; only their best
    :data:`KEEP` feasible plans (one objective) or their front (several) are returned, as
    starts for refinement (None for small spaces)."""
    space = scorer.space
    if space.raw_size <= SAMPLE_ABOVE:
        return None
    rng = np.random.default_rng(seed)
    cols = {a: rng.integers(0, len(space.choices(a)), n) for a in space.names}
    keys = np.unique(np.vstack(list(cols.values())), axis=1)
    cols = dict(zip(space.names, keys, strict=True))
    valid = space.valid(cols)
    s = score(scorer, {a: c[valid] for a, c in cols.items()}, objectives)
    best = ranked(s)[:KEEP] if len(objectives) == 1 else front_indices(s)
    return take(s, best)
