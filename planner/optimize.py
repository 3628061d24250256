"""`planner optimize`: the best training plan under constraints, and why it wins.

The flow: validate the request, build the :class:`~planner.space.Space` from the catalogs and
the budget, run the Optuna search (:mod:`planner.search`), certify it by exhaustive enumeration
when the space is small enough, and build a pure-data :class:`Result` that the renderers print.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from costs import comm
from costs.hardware import PRECISIONS
from planner import catalog, shared
from planner.constraints import Limits, parse_budgets, parse_duration
from planner.errors import BadInput, InfeasibleError, UnsupportedError
from planner.memory import OPTIMIZERS
from planner.objectives import OBJECTIVES, Scorer
from planner.render import duration
from planner.search import Scored, best_index, exhaustive, open_study, pareto_mask, run
from planner.space import AXES, Space, gpu_counts

EXHAUSTIVE_LIMIT = 2_000_000  # raw combinations scored in about a second (bench_optimize.py)
DEFAULT_GPU_BUDGET = 64  # GPU axis cap when only money or a deadline bounds the search
BATCHES = tuple(2**i for i in range(12))  # 1 .. 2048 samples per GPU
PER_NODE = (1, 2, 4, 8)
# A spec without a "training" section trains like the ImageNet nets of the zoo: 90 epochs
# (Goyal et al. 2017) of the 1,281,167 ILSVRC-2012 training images (Russakovsky et al. 2015).
DEFAULT_EPOCHS = 90
IMAGENET_TRAIN = 1_281_167
# Columns of a plan record, for every table and CSV that lists plans.
PLAN_AXES = [
    "gpu",
    "gpus",
    "gpus_per_node",
    "nodes",
    "batch_per_worker",
    "global_batch",
    "parallel",
    "split",
    "scheme",
    "precision",
]
PLAN_BREAKDOWN = [
    "forward_ms",
    "backward_ms",
    "update_ms",
    "comm_ms",
    "iteration_ms",
    "throughput_samples_s",
    "memory_gb",
]
PLAN_COLUMNS = [*PLAN_AXES, "network", "time_to_train_s", "cost_usd", *PLAN_BREAKDOWN]


@dataclass(frozen=True)
class OptimizeRequest:
    """Everything `planner optimize` was asked (strings as the user typed them)."""

    net: str
    budget: tuple[str, ...] = ()
    deadline: str | None = None
    objective: str = "time"
    gpu: str | None = None
    prices: tuple[str, ...] = ()  # DEVICE=USD per GPU-hour overrides of prices.toml
    network: str = "eth100"
    epochs: float | None = None
    dataset_size: int | None = None
    global_batch: int | None = None
    max_global_batch: int = 8192
    min_global_batch: int = 1
    optimizer: str = "momentum"
    precision: str = "fp32"
    pipeline: bool = False
    hybrid: bool = True
    ppp_comp: float = 0.62
    ppp_comm: float = 0.72
    rules: str = "paleo-2018"
    conv_algorithm: str = "gemm"
    trials: int = 200
    timeout: float | None = None
    seed: int = 0
    storage: str | None = None
    study_name: str | None = None
    exhaustive: str = "auto"  # auto | always | never
    alternatives: int = 5


@dataclass
class Result:
    """The outcome, as plain data (dicts and lists) for every renderer."""

    net: str
    objectives: tuple[str, ...]
    best: dict
    alternatives: list[dict]
    pareto: list[dict]
    constraints: dict
    search: dict
    baseline: dict
    request: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _objectives(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in parts if p not in OBJECTIVES]
    if not parts or bad or len(set(parts)) != len(parts):
        raise BadInput(f"--objective '{text}' is not a comma-separated list of {', '.join(OBJECTIVES)}")
    return parts


def parse_prices(values: tuple[str, ...] | list[str]) -> dict[str, float]:
    """``--price H100_SXM=2.49`` (USD per GPU-hour) -> {device key: price}, overriding prices.toml."""
    out: dict[str, float] = {}
    for raw in values:
        key, sep, value = raw.partition("=")
        try:
            price = float(value.strip().lstrip("$"))
        except ValueError:
            price = -1.0
        if not sep or price <= 0:
            raise BadInput(f"--price '{raw}' is not DEVICE=USD_PER_GPU_HOUR, e.g. H100_SXM=2.49")
        out[catalog.device(key.strip()).key] = price
    return out


def select_gpus(
    pattern: str | None, prices: dict[str, float] | None = None, priced_only: bool = False
) -> list[str]:
    """Device keys for ``--gpu A100,H100`` (case-insensitive keys or key prefixes); default: current
    GPUs with a price (the catalog's or one given with --price).

    With ``priced_only`` (a search that needs a cost), a prefix keeps only the devices it matches
    that have a price: an unpriced device has no cost, so every plan on it would be invalid. A full
    key still selects its device."""
    devices = catalog.devices()
    priced = {k for k, d in devices.items() if d.price_usd_per_hour is not None} | set(prices or {})
    if not pattern:
        return [k for k, d in devices.items() if not d.paleo and k in priced]
    keys: list[str] = []
    for part in (p.strip() for p in pattern.split(",")):
        if not part:
            continue
        hits = [k for k in devices if k.lower() == part.lower()]
        if not hits:
            hits = [k for k in devices if k.lower().startswith(part.lower().replace("-", "_"))]
            if hits and priced_only:
                unpriced = [h for h in hits if h not in priced]
                hits = [h for h in hits if h in priced]
                if not hits:
                    raise BadInput(
                        f"--gpu '{part}' matches only devices without a price ({', '.join(unpriced)}); "
                        "give --price DEVICE=USD or name the device by its key"
                    )
        if not hits:
            raise BadInput(f"--gpu '{part}' matches no device (valid: {', '.join(devices)})")
        keys += [h for h in hits if h not in keys]
    return keys


def build(req: OptimizeRequest):
    """Validate ``req`` and build the scorer; every bad option raises :class:`BadInput`."""
    objectives = _objectives(req.objective)
    max_gpus, max_usd = parse_budgets(list(req.budget))
    deadline = parse_duration(req.deadline)
    if req.optimizer not in OPTIMIZERS:
        raise BadInput(f"--optimizer '{req.optimizer}' (valid: {', '.join(OPTIMIZERS)})")
    if req.precision != "any" and req.precision not in PRECISIONS:
        raise BadInput(f"--precision '{req.precision}' (valid: {', '.join(PRECISIONS)}, any)")
    for name, v in (
        ("--trials", req.trials),
        ("--max-global-batch", req.max_global_batch),
        ("--min-global-batch", req.min_global_batch),
    ):
        if v < 1:
            raise BadInput(f"{name} must be a positive integer, got {v}")
    if req.global_batch is not None and req.global_batch < 1:
        raise BadInput(f"--global-batch must be a positive integer, got {req.global_batch}")
    if req.min_global_batch > req.max_global_batch:
        raise BadInput("--min-global-batch is larger than --max-global-batch")
    for name, v in (("--ppp-comp", req.ppp_comp), ("--ppp-comm", req.ppp_comm)):
        if not 0 < v <= 1:
            raise BadInput(f"{name} must be in (0, 1], got {v}")
    if req.exhaustive not in ("auto", "always", "never"):
        raise BadInput(f"--exhaustive '{req.exhaustive}' (valid: auto, always, never)")
    prices = parse_prices(req.prices)
    gpus = select_gpus(req.gpu, prices, priced_only="cost" in objectives or max_usd is not None)
    net_info = catalog.network(req.network)
    costs = catalog.net_costs(req.net, req.rules, req.conv_algorithm)
    training = costs.net.meta.get("training", {})
    epochs = req.epochs if req.epochs is not None else training.get("epochs", DEFAULT_EPOCHS)
    dataset = (
        req.dataset_size if req.dataset_size is not None else training.get("dataset_size", IMAGENET_TRAIN)
    )
    if epochs <= 0 or dataset < 1:
        raise BadInput("--epochs and --dataset-size must be positive")
    L = costs.n_layers
    splits = [L]
    if req.hybrid:
        try:  # the "one weird trick" boundary and the next two weighted layers
            first = costs.default_split()
            splits += [i for i in range(first, L) if costs.is_weighted[i]][:3]
        except UnsupportedError:  # no fully connected layer: pure data parallelism only
            pass
    infos = [catalog.device(k) for k in gpus]
    space = Space(
        gpu=tuple(gpus),
        gpus=gpu_counts(max_gpus or DEFAULT_GPU_BUDGET),
        per_node=PER_NODE,
        batch=BATCHES if req.global_batch is None else (0,),
        split=tuple(splits),
        scheme=comm.SCHEME_NAMES,
        precision=PRECISIONS if req.precision == "any" else (req.precision,),
        max_per_node=tuple(i.device.max_per_node for i in infos),
        n_layers=L,
        global_batch=req.global_batch,
    )
    limits = Limits(max_gpus, max_usd, deadline, req.max_global_batch, req.min_global_batch)
    scorer = Scorer(
        space,
        costs,
        catalog.device_table(gpus),
        catalog.link_table([net_info.key] + [i.device.intra_link for i in infos]),
        np.array(
            [
                prices.get(i.key, i.price_usd_per_hour if i.price_usd_per_hour is not None else np.nan)
                for i in infos
            ]
        ),
        limits,
        float(epochs),
        int(dataset),
        req.optimizer,
        req.ppp_comp,
        req.ppp_comm,
        req.pipeline,
    )
    return scorer, objectives


def _plan_record(scorer: Scorer, cols: dict[str, np.ndarray], i: int, objectives) -> dict:
    """One plan and its breakdown as a flat record (times in ms and s, memory in GB)."""
    one = {a: cols[a][i : i + 1] for a in AXES}
    m = scorer.metrics(one)
    sp = scorer.space
    split = int(m["split"][0])
    L = sp.n_layers
    rec = {
        "gpu": sp.gpu[int(one["gpu"][0])],
        "gpus": int(m["gpus"][0]),
        "workers": int(m["gpus"][0]),
        "gpus_per_node": int(m["per_node"][0]),
        "nodes": int(m["nodes"][0]),
        "batch_per_worker": int(m["batch_per_worker"][0]),
        "global_batch": int(m["global_batch"][0]),
        "parallel": "data" if split >= L else "hybrid",
        "split": None if split >= L else scorer.costs.net.layers[split].name,
        "scheme": sp.scheme[int(one["scheme"][0])],
        "precision": str(m["precision_name"][0]),
        "pipeline": scorer.pipeline,
        "network": scorer.links.names[0],
        "intra_node_link": scorer.links.names[1 + int(one["gpu"][0])],
    }
    ms = lambda k: float(m[k][0] * 1e3)
    rec.update(
        forward_ms=ms("forward_s"),
        backward_ms=ms("backward_s"),
        update_ms=ms("update_s"),
        compute_ms=ms("compute_s"),
        sync_ms=ms("sync_s"),
        act_comm_ms=ms("act_comm_s"),
        comm_ms=ms("comm_s"),
        iteration_ms=ms("iteration_s"),
        throughput_samples_s=float(m["throughput_samples_s"][0]),
        time_to_train_s=float(m["time_to_train_s"][0]),
        cost_usd=None if math.isnan(m["cost_usd"][0]) else float(m["cost_usd"][0]),
        memory_gb=float(m["memory_bytes"][0] / 1e9),
        device_memory_gb=float(m["device_memory_bytes"][0] / 1e9),
    )
    vals = scorer.objective_values(m, objectives)[:, 0]
    rec["objective"] = float(vals[0]) if len(vals) == 1 else [float(v) for v in vals]
    cons = scorer.limits.values(m)[:, 0]
    rec["constraints"] = {n: float(v) for n, v in zip(scorer.limits.names(), cons, strict=True)}
    rec["binding"] = [n for n, v in rec["constraints"].items() if -0.05 < v <= 0 and n != "supported"]
    rec["estimate_command"] = _estimate_command(scorer, rec)
    return rec


def _estimate_command(scorer: Scorer, rec: dict) -> str:
    """The `planner estimate` call that reproduces this plan's iteration time."""
    parts = [
        "planner estimate",
        scorer.costs.net.source.removesuffix(".json"),
        f"--device {rec['gpu']}",
        f"--network {rec['network']}",
        f"--workers {rec['gpus']}",
        f"--gpus-per-node {rec['gpus_per_node']}",
        f"--batch {rec['batch_per_worker']}",
        "--scaling weak",
        f"--scheme {rec['scheme']}",
        f"--precision {rec['precision']}",
        f"--ppp-comp {scorer.ppp_comp}",
        f"--ppp-comm {scorer.ppp_comm}",
        f"--rules {scorer.costs.rules.name}",
        f"--conv-algorithm {scorer.costs.algorithm}",
    ]
    if rec["parallel"] == "hybrid":
        parts += ["--parallel hybrid", f"--split {rec['split']}"]
    if scorer.pipeline:
        parts.append("--pipeline")
    return " ".join(parts)


def explain(best: dict, baseline: dict) -> list[str]:
    """Sentences saying where the time goes, what binds, and how it scales."""
    it = best["iteration_ms"]
    comp, comm = best["compute_ms"] / it, best["comm_ms"] / it
    kind = "compute-bound" if comp >= 0.5 else "communication-bound"
    lines = [
        f"{kind}: {comp:.0%} of each {it:,.1f} ms iteration is compute "
        f"(forward {best['forward_ms'] / it:.0%}, backward {best['backward_ms'] / it:.0%}, "
        f"update {best['update_ms'] / it:.0%}), {comm:.0%} is communication "
        f"({best['scheme']} AllReduce over {best['network'] if best['nodes'] > 1 else best['intra_node_link']})."
    ]
    reasons = {
        "budget_gpus": f"the GPU budget binds: it uses {best['gpus']} GPUs",
        "budget_usd": "the money budget binds",
        "deadline": "the deadline binds",
        "memory": f"memory binds: {best['memory_gb']:.1f} of {best['device_memory_gb']:.0f} GB per GPU",
        "max_global_batch": f"the maximum global batch binds ({best['global_batch']:,} samples)",
        "min_global_batch": f"the minimum global batch binds ({best['global_batch']:,} samples)",
    }
    binding = [reasons[b] for b in best["binding"] if b in reasons]
    lines.append(
        "; ".join(binding) + "."
        if binding
        else "no constraint binds: more GPUs or a larger batch would not make it better."
    )
    lines.append(
        f"{baseline['speedup']:.1f}x the throughput of one {best['gpu']} at the same batch per GPU "
        f"(scaling efficiency {baseline['efficiency']:.0%})."
    )
    return lines


def _baseline(scorer: Scorer, cols, i) -> dict:
    """The same GPU alone, data parallel, same batch per GPU: speedup and efficiency."""
    one = {a: cols[a][i : i + 1].copy() for a in AXES}
    m_best = scorer.metrics(one)
    one["gpus"][:] = scorer.space.gpus.index(1)
    one["per_node"][:] = scorer.space.per_node.index(1)
    one["split"][:] = scorer.space.split.index(scorer.space.n_layers)
    m1 = scorer.metrics(one)
    speedup = float(m_best["throughput_samples_s"][0] / m1["throughput_samples_s"][0])
    return {
        "gpu": scorer.space.gpu[int(one["gpu"][0])],
        "iteration_ms": float(m1["iteration_s"][0] * 1e3),
        "throughput_samples_s": float(m1["throughput_samples_s"][0]),
        "speedup": speedup,
        "efficiency": speedup / float(m_best["gpus"][0]),
    }


def diagnose(scorer: Scorer, s: Scored) -> str:
    """Why nothing is feasible: the constraint that rules out every plan the others allow.

    For each constraint, the plans meeting all the *other* constraints are examined; if there
    are some and every one breaks this constraint, it is the one that rules everything out, and
    the message says by how much its best plan misses.
    """
    names = scorer.limits.names()
    valid = np.isfinite(s.constraints).all(axis=0) & (s.objectives[0] < 1e29)
    if not valid.any():
        return "no valid plan exists in the search space"
    cols = {a: c[valid] for a, c in s.cols.items()}
    m = scorer.metrics(cols)
    con = s.constraints[:, valid]
    ok = con <= 0
    lim = scorer.limits
    for r, name in enumerate(names):
        others = np.delete(ok, r, axis=0).all(axis=0)
        if not others.any():
            continue
        sel = {k: v[others] for k, v in m.items()}
        if name == "memory":
            need = sel["memory_bytes"].min() / 1e9
            have = scorer.devices.memory_bytes.max() / 1e9
            return (
                f"no plan fits: the smallest needs {need:.1f} GB per GPU, the largest GPU allowed "
                f"has {have:.0f} GB ({lim.memory_fraction:.0%} usable)"
            )
        if name == "budget_usd":
            return (
                f"no plan costs ${lim.max_usd:,.2f} or less: the cheapest costs "
                f"${np.nanmin(sel['cost_usd']):,.2f}"
            )
        if name == "deadline":
            return (
                f"no plan finishes within {duration(lim.deadline_s)}: the fastest takes "
                f"{duration(float(np.nanmin(sel['time_to_train_s'])))}"
            )
        if name == "max_global_batch":
            return (
                f"no plan keeps the global batch at or below {lim.max_global_batch:,}: "
                f"the smallest is {sel['global_batch'].min():,}"
            )
        if name == "min_global_batch":
            return (
                f"no plan reaches a global batch of {lim.min_global_batch:,}: "
                f"the largest is {sel['global_batch'].max():,}"
            )
        if name == "supported":
            return "no allowed GPU has a peak for the requested precision in the catalog"
        if name == "budget_gpus":
            return f"no plan uses {lim.max_gpus} GPUs or fewer"
    j = int(np.argmin(np.max(con, axis=0)))
    broken = [f"'{names[r]}' by {con[r, j]:.1%}" for r in range(len(names)) if con[r, j] > 0]
    return f"no plan meets every constraint at once: the closest misses {' and '.join(broken)}"


@dataclass
class Outcome:
    """What a search produced: every plan it scored, and the whole space when certified."""

    scorer: Scorer
    objectives: tuple[str, ...]
    found: Scored
    full: Scored | None
    search: dict

    def front_check(self, keep: np.ndarray) -> dict:
        """When the space was enumerated: the exact front's size and how much of it the search
        found (a front plan counts as found when the search scored a plan with its objectives)."""
        if self.full is None:
            return {}
        got = self.found.objectives[:, self.found.feasible]  # (n_obj, found)
        exact = self.full.objectives[:, keep]  # (n_obj, front)
        hit = np.isclose(exact[:, :, None], got[:, None, :], rtol=1e-12, atol=0).all(axis=0).any(axis=1)
        return {"exhaustive_front_size": int(keep.size), "front_found_by_search": int(hit.sum())}

    @property
    def evaluated(self) -> Scored:
        """Every distinct plan scored (the whole space when it was enumerated)."""
        return self.full if self.full is not None else self.found


def search_and_certify(req: OptimizeRequest) -> Outcome:
    """Run the search, then enumerate the space when it is small enough (see module doc)."""
    scorer, objectives = build(req)
    space = scorer.space
    study = open_study(objectives, req.seed, req.storage, req.study_name)
    found, stats = run(scorer, objectives, study, req.trials, timeout=req.timeout)
    certify = req.exhaustive == "always" or (req.exhaustive == "auto" and space.raw_size <= EXHAUSTIVE_LIMIT)
    full = exhaustive(scorer, objectives) if certify else None
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
    return Outcome(scorer, objectives, found, full, search_info)


def front_indices(s: Scored) -> np.ndarray:
    """Feasible non-dominated plans of ``s``, sorted by the first objective."""
    feas = np.flatnonzero(s.feasible)
    keep = feas[pareto_mask(s.objectives[:, feas])] if feas.size else feas
    return keep[np.argsort(s.objectives[0, keep], kind="stable")]


def optimize(req: OptimizeRequest) -> Result:
    """Search, certify and explain (see the module docstring)."""
    out = search_and_certify(req)
    scorer, objectives, found, full, search_info = (
        out.scorer,
        out.objectives,
        out.found,
        out.full,
        out.search,
    )
    space = scorer.space
    pool = found
    if len(objectives) == 1:
        i = best_index(found)
        if full is not None:
            j = best_index(full)
            if j is not None:
                opt = float(full.objectives[0, j])
                search_info["exhaustive_optimum"] = opt
                search_info["exhaustive_plans"] = len(full)
                got = float(found.objectives[0, i]) if i is not None else math.inf
                search_info["gap"] = (got - opt) / abs(opt) if i is not None else None
                pool = full  # the certified optimum is reported; the gap says how close the search was
        if best_index(pool) is None:
            raise InfeasibleError(diagnose(scorer, full if full is not None else found))
        order = np.flatnonzero(pool.feasible)
        order = order[np.argsort(pool.objectives[0, order], kind="stable")]
        best_i = int(order[0])
        best = _plan_record(scorer, pool.cols, best_i, objectives)
        alts, seen = [], {(best["gpu"], best["gpus"])}
        for j in order[1:]:
            key = (space.gpu[int(pool.cols["gpu"][j])], space.gpus[int(pool.cols["gpus"][j])])
            if key in seen:
                continue
            seen.add(key)
            alts.append(_plan_record(scorer, pool.cols, int(j), objectives))
            if len(alts) >= req.alternatives:
                break
        front: list[dict] = []
    else:
        src = out.evaluated
        keep = front_indices(src)
        if keep.size == 0:
            raise InfeasibleError(diagnose(scorer, src))
        front = [_plan_record(scorer, src.cols, int(j), objectives) for j in keep]
        search_info.update(out.front_check(keep))
        best_i = int(keep[0])
        best = front[0]
        alts = front[1 : 1 + req.alternatives]
        pool = src
    baseline = _baseline(scorer, pool.cols, best_i)
    best["why"] = explain(best, baseline)
    constraints = {**scorer.limits.summary(), "optimizer": req.optimizer, "binding": best["binding"]}
    return Result(
        req.net,
        objectives,
        best,
        alts,
        front,
        constraints,
        search_info,
        baseline,
        request={k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(req).items()},
    )
