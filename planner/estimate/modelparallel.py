"""`planner estimate NET --parallel model` for a spec with ``ModelParallel`` blocks.

The spec fixes the placement: its layers run on ``max(device) + 1`` GPUs as one model replica
(paleo-model.md §B.3), scored by :func:`costs.modelparallel.evaluate_explicit`. The result is
one record with the keys of :func:`planner.estimate.records.record`: ``workers`` is the
number of GPUs, ``scheme`` is "none" (one replica, no gradient AllReduce), the batch is the
whole batch of that replica, and ``speedup`` is the single-GPU time of the same net at the same
batch (:func:`costs.model.evaluate`, one worker) over the split time.
"""

from __future__ import annotations

import math

from costs.model import evaluate, plans
from costs.modelparallel import evaluate_explicit, n_devices
from planner.errors import BadInput, UnsupportedError
from planner.estimate.records import hardware, record
from planner.request.estimate import EstimateRequest


def estimate_model_parallel(req, costs, info, net_info) -> list[dict]:
    """One record for the spec's own model-parallel placement (times in ms)."""
    if req.accumulation != 1:  # costs.modelparallel scores one microbatch per step
        raise BadInput("--accumulation is not modelled for a spec's own ModelParallel placement")
    splits = n_devices(costs)
    default_workers = EstimateRequest.__dataclass_fields__["workers"].default
    if tuple(req.workers) != tuple(default_workers) and splits not in req.workers:
        raise BadInput(
            f"the spec's ModelParallel blocks fix the workers to {splits}; "
            f"--workers {','.join(map(str, req.workers))} does not include it"
        )
    batch = req.batch or costs.net.default_batch
    devices, links, common = hardware(req, info, net_info)
    common.update(batch=batch, scheme=0)
    r = evaluate_explicit(costs, plans(costs.n_layers, workers=splits, **common), devices, links)
    single = evaluate(costs, plans(costs.n_layers, workers=1, **common), devices, links)
    rec = record(
        req,
        info.key,
        net_info.key,
        r,
        0,
        workers=splits,
        batch_per_worker=int(batch),
        scheme="none",
        speedup=float(single.total[0] / r.total[0]),
    )
    if math.isnan(rec["total_ms"]) or math.isnan(rec["speedup"]):
        raise UnsupportedError("the estimate is undefined for this configuration")
    return [rec]
