"""How sure is the answer? How often the recommended hardware (GPU type and count) stays the
best under the model's error.

The calibration's held-out residuals give the spread of a prediction (the profile's 80%
interval, as a log-normal standard deviation). Each Monte Carlo draw scales every GPU type and
precision's compute time by its own factor and all communication by one factor, then re-ranks
every feasible plan of the space (:func:`costs.fit.uncertainty.win_probability`, vectorised). A
data-loader bound is held fixed: the efficiencies do not move it.

The draws use the stack's own interval, also for an answer that names no stack (whose printed
interval is widened to the spread between stacks, planner.metrics.model.BETWEEN_STACKS): another
stack shifts every GPU of the answer the same way (its kernels and overheads), which moves the
times but not, to first order, which hardware wins; drawing it per GPU would call rankings
unsure that no choice of stack overturns.
"""

from __future__ import annotations

import numpy as np

from costs.fit.uncertainty import sd_from_interval, win_probability
from costs.hardware import PRECISIONS
from planner import catalog
from planner.loaders import RATE_SD_LOG
from planner.metrics.scorer import Scorer
from planner.search.scored import TIE, Scored, ranked

DRAWS = 200
CLEAR = 0.5  # below this win share, the top plans cannot be told apart
LINEAR = ("time", "cost")  # objectives proportional to the iteration time


def reach(scorer: Scorer, objectives: tuple[str, ...]) -> float:
    """How far behind the first-ranked plan (a factor on its objective) a plan may be and still
    take part in the Monte Carlo; 1.0 when there is none. Plans more than 5 standard deviations
    of a ratio of two draws behind the best never win in 200 draws (chance < 1e-6 each)."""
    model = scorer.model
    interval = model.stack_interval if model is not None else None
    if interval is None or len(objectives) != 1 or objectives[0] not in LINEAR:
        return 1.0
    return float(np.exp(5.0 * sd_from_interval(*interval) * np.sqrt(2.0)))


def confidence(scorer: Scorer, pool: Scored, objectives: tuple[str, ...], seed: int = 0) -> dict | None:
    """Win share of the first-ranked plan and of its strongest rival, or None when the model has
    no calibrated interval or the objective is not proportional to the iteration time."""
    model = scorer.model
    interval = model.stack_interval if model is not None else None
    if interval is None or len(objectives) != 1 or objectives[0] not in LINEAR:
        return None
    order = ranked(pool)
    if order.size == 0:
        return None
    sd = sd_from_interval(*interval)
    wide = max(sd, model.unseen_sd)
    gpu = scorer.space.choices("gpu")
    generations = [str(catalog.device(k).raw.get("generation", "")) for k in gpu]
    seen = np.array([model.fitted(g) for g in generations])
    calibrated = _best_seen(pool, order, seen, gpu, scorer)
    obj = pool.objectives[0, order]
    order = order[obj <= obj[0] * reach(scorer, objectives) + 1e-12]
    m = scorer.metrics({a: c[order] for a, c in pool.cols.items()})
    it, comm, stall = m["iteration_s"], m["comm_s"], m["input_s"]
    compute = it - comm - stall
    # the data loader's bound holds for every plan, binding or not: samples per GPU / its rate
    floor, sd_loader = _loader_floor(model, pool.cols["gpu"][order], m)
    prec = np.array([PRECISIONS.index(p) for p in m["precision_name"]])
    group = pool.cols["gpu"][order] * len(PRECISIONS) + prec
    per_second = pool.objectives[0, order] / it
    sd_plan = np.where(seen[pool.cols["gpu"][order]], sd, wide)  # an unseen generation: the wider spread
    r = win_probability(
        compute,
        comm,
        per_second,
        group,
        sd_plan,
        sd,
        draws=DRAWS,
        seed=seed,
        floor_s=floor,
        sd_floor=sd_loader,
        tiebreak=pool.tiebreak[0, order] if pool.tiebreak is not None else None,
        tie=TIE,
    )
    mine, share, rival = _shares(pool.cols["gpu"][order], m["gpus"], r.win, gpu)
    fitted = bool(seen[mine[0]])
    return {
        "uncalibrated": None if fitted else generations[mine[0]],
        "draws": DRAWS,
        "sd_log": sd,
        "sd_log_unseen": None if seen.all() else wide,
        "sd_log_loader": sd_loader or None,
        "calibrated_alternative": None if fitted else calibrated,
        "objective": objectives[0],
        "interval": list(interval),
        "best_win": share[mine],
        "rival": rival,
        "clear": bool(share[mine] >= CLEAR),
    }


def _loader_floor(model, gpu: np.ndarray, m: dict) -> tuple[np.ndarray, float]:
    """Each plan's loader bound (s per iteration) and the log spread of the loader's rate: one
    cited figure of known spread (planner.loaders.RATE_SD_LOG); 0 when no loader binds."""
    rate, _ = model.loader_rates(gpu, m["per_node"])
    floor = m["global_batch"] / m["gpus"] / rate
    return floor, (RATE_SD_LOG if np.isfinite(rate).any() else 0.0)


def _shares(gpu_idx: np.ndarray, gpus: np.ndarray, win: np.ndarray, names) -> tuple[tuple, dict, dict | None]:
    """The first plan's (GPU type, count), the win share of every (type, count), and the
    strongest rival: the hardware choice is the question, so wins on one type and count add up."""
    keys = list(zip(gpu_idx.tolist(), gpus.tolist()))
    share: dict[tuple, float] = {}
    for k, w in zip(keys, win):
        share[k] = share.get(k, 0.0) + float(w)
    mine = keys[0]
    rivals = sorted(((w, k) for k, w in share.items() if k != mine), reverse=True)
    rival = (
        {"gpu": names[rivals[0][1][0]], "gpus": int(rivals[0][1][1]), "win": rivals[0][0]} if rivals else None
    )
    return mine, share, rival


def _best_seen(pool: Scored, order: np.ndarray, seen: np.ndarray, gpu, scorer: Scorer) -> dict | None:
    """The first-ranked plan on a GPU generation the fit has runs of, and its objective against
    the first-ranked plan's (a factor): what the answer is when only evidence counts."""
    on_seen = order[seen[pool.cols["gpu"][order]]]
    if on_seen.size == 0 or order.size == 0:
        return None
    j = int(on_seen[0])
    best = float(pool.objectives[0, order[0]])
    gpus = int(scorer.metrics({a: c[j : j + 1] for a, c in pool.cols.items()})["gpus"][0])
    ratio = float(pool.objectives[0, j]) / best if best > 0 else float("nan")
    return {"gpu": gpu[int(pool.cols["gpu"][j])], "gpus": gpus, "ratio": ratio}
