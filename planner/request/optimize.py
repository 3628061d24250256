"""The Request stage of `planner optimize` and `planner pareto`: what was asked, validated.

:class:`OptimizeRequest` holds the options as the user typed them (from the CLI or a sweep
spec); :func:`validate` checks every one, looks the names up in the catalogs and returns a
:class:`Problem`: typed values with SI units that the later stages read and never re-parse.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from costs.hardware import PRECISIONS
from costs.llm.evaluator import description
from planner import catalog, fabrics, resizing
from planner.energy import Energy, with_options
from planner.epochs import EpochsRule, resolve
from planner.errors import BadInput
from planner.goodput import Reliability, of_request
from planner.metrics.limits import Limits
from planner.metrics.model import CostModel, loader_for
from planner.metrics.objectives import OBJECTIVES
from planner.request import bounds, defaults
from planner.request.parse import memory_fraction, parse_budgets, parse_duration
from planner.request.prices import for_instances, given_prices, host_arrays, price_columns, price_table
from planner.request.tokens import Tokens, llm_global_batch, llm_tokens, spec_seq_len

# A spec without a "training" section trains like the ImageNet nets of the zoo: 90 epochs
# (Goyal et al. 2017) of the 1,281,167 ILSVRC-2012 training images (Russakovsky et al. 2015).
DEFAULT_EPOCHS = 90
IMAGENET_TRAIN = 1_281_167


@dataclass(frozen=True)
class OptimizeRequest:
    """Everything `planner optimize` was asked (strings as the user typed them).

    ``axes`` holds the options of declared search axes (:mod:`planner.space.axes`) that the
    user set, as (axis name, text) pairs, e.g. (("accumulation", "1,2,4,8"),).
    """

    net: str
    budget: tuple[str, ...] = ()
    deadline: str | None = None
    objective: str = "time"
    gpu: str | None = None
    prices: tuple[str, ...] = ()  # DEVICE=USD per GPU-hour overrides of prices.toml
    provider: str | None = None  # "aws,lambda": price from these providers only; None: all
    pricing: str = "on-demand"  # on-demand | spot | reserved (1-year) | reserved-3y
    owned: tuple[str, ...] = ()  # DEVICE:COUNT[@USD_PER_GPU_HOUR]: your GPUs, priced 0 or at that rate
    pue: float | None = None  # data-centre PUE; None: configs/energy.toml's
    grid_intensity: float | None = None  # gCO2 per kWh; None: configs/energy.toml's
    electricity: float | str | None = None  # USD per kWh for owned GPUs; None: configs/energy.toml's
    network: str = defaults.NETWORK
    instance: str | None = None  # "aws/p4d.24xlarge[,...]": only these instances (planner.hosts)
    cpu_cores_per_gpu: float | None = None  # host CPU cores per GPU; None: each host's
    nics: int | None = None  # NICs per node at --network's rate; None: each host's
    fabric: str = "nonblocking"  # the network's tiers between nodes (configs/fabrics.toml)
    rank_order: str = fabrics.DEFAULT_ORDER  # the parallel groups' rank order (costs.comm.ranks)
    epochs: float | None = None
    convergence: str = (
        "auto"  # epochs by global batch: auto | goyal-2017 | mlperf-lars | fixed (planner.epochs)
    )
    dataset_size: int | None = None
    global_batch: int | None = None  # None: the net's (transformers), else free
    seq_len: int | None = None  # transformers: None is the model's
    image_size: int | str | None = None  # vision nets: px a side or a schedule; None: the net's
    attention: str | None = None  # transformers: standard | flash kernel; None: the net spec's
    tokens: str | None = None  # transformers: training tokens ("15T", "2e12"); None: the net's
    global_batch_tokens: str | None = None  # transformers: tokens per optimizer step ("4M")
    memory_headroom: float | None = None  # share of GPU memory a plan may fill; None: the default
    max_global_batch: int = 8192
    min_global_batch: int = 1
    optimizer: str = defaults.OPTIMIZER
    precision: str = defaults.PRECISION
    pipeline: bool = False
    hybrid: bool = True
    ppp_comp: float = defaults.PPP_COMP
    ppp_comm: float = defaults.PPP_COMM
    rules: str = defaults.RULES
    calibration: str | None = None  # profile file; None: the shipped default (modern rules)
    data_loader: str = defaults.DATA_LOADER  # auto | cpu | dali | none (modern rules)
    goodput: str = "on"  # on: time to train counts failures, checkpoints, restarts (planner.goodput)
    failures_per_1k_gpu_hours: float | None = None  # None: Llama 3's rate (planner.goodput)
    ckpt_write_gbs: float | None = None  # checkpoint write GB/s, all writers; None: planner.goodput's
    restart_min: float | None = None  # job relaunch before the reload; None: the cited default
    async_ckpt: bool = False  # asynchronous checkpoints: only the copy to host memory blocks
    conv_algorithm: str = "gemm"
    trials: int = 200
    timeout: float | None = None
    seed: int = 0
    storage: str | None = None
    study_name: str | None = None
    exhaustive: str = "auto"  # auto | always | never
    alternatives: int = 5
    axes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Problem:
    """A validated request: catalog entries, limits and the net's cost coefficients."""

    request: OptimizeRequest
    objectives: tuple[str, ...]
    limits: Limits
    gpus: tuple[str, ...]  # device keys the search may use
    devices: tuple  # catalog.DeviceInfo per key of ``gpus``
    network: object  # catalog.NetworkInfo: the link between nodes
    prices: np.ndarray  # (gpus, node sizes of hosts) USD per GPU-hour of each node size, NaN when unknown
    costs: object  # costs.specs.coefficients.NetCosts
    epochs: float
    dataset_size: int
    model: CostModel | None = None  # rule set, calibration profile, optimizer
    price_sources: tuple = ()  # per key of ``gpus`` and node size: where its price comes from
    llm: dict | None = None  # transformer description (costs.llm.shard.dims) under the modern rules
    tokens: Tokens | None = None  # transformers: training tokens and global batch, with their sources
    hosts: object = None  # planner.hosts.HostArrays: each device's host per node size
    epochs_rule: EpochsRule | None = None  # epochs by global batch (planner.epochs); None: ``epochs``
    resize: resizing.Resized | None = None  # a resizing schedule's net at each size; None: one size

    @property
    def global_batch(self) -> int | None:
        return self.request.global_batch

    energy: Energy | None = None  # energy parameters (defaults with --pue, --grid-intensity)
    gpu_caps: np.ndarray | None = None  # most GPUs per key of ``gpus`` (owned), inf: no cap
    kwh_usd: np.ndarray | None = None  # USD per kWh charged per key of ``gpus``: owned ones, else 0
    reliability: Reliability | None = None  # goodput parameters; None: planner.goodput's defaults

    def axis_option(self, name: str) -> str | None:
        """The user's text for a declared axis's option, or None when not given."""
        return dict(self.request.axes).get(name)


def request_dict(req: OptimizeRequest) -> dict:
    """The request as plain data for run records: lists for tuples, axis options as keys."""
    data = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(req).items() if k != "axes"}
    unset = {"image_size": None, "convergence": "auto", "fabric": "nonblocking", "attention": None}
    unset["rank_order"] = fabrics.DEFAULT_ORDER  # recorded when set (older run records lack them)
    data = {k: v for k, v in data.items() if k not in unset or v != unset[k]}
    return {**data, **dict(req.axes)}


def parse_objectives(text: str) -> tuple[str, ...]:
    """'time,cost' -> ('time', 'cost'); each must be one of :data:`OBJECTIVES`, once."""
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
        if not sep or not bounds.price_ok(price, zero=False):  # refuses nan and inf too
            raise BadInput(
                f"--price '{raw}' is not DEVICE=USD_PER_GPU_HOUR {bounds.PRICES}, e.g. H100_SXM=2.49"
            )
        out[catalog.device(key.strip()).key] = price
    return out


_OWNED_FORM = "DEVICE:COUNT or DEVICE:COUNT@USD_PER_GPU_HOUR, e.g. A100_80GB:16 or A100_80GB:16@0.80"


def parse_owned(values: tuple[str, ...] | list[str]) -> dict[str, tuple[int, float]]:
    """``--owned A100_80GB:16@0.80`` -> {device key: (GPUs owned, USD per GPU-hour)}; the rate is 0
    (no marginal price) when not given."""
    out: dict[str, tuple[int, float]] = {}
    for raw in values:
        name, sep, rest = raw.partition(":")
        count, at, rate = rest.partition("@")
        try:
            n, usd = int(count.strip()), float(rate.strip().lstrip("$")) if at else 0.0
        except ValueError:
            n, usd = 0, 0.0
        if (
            not sep
            or not name.strip()
            or not 1 <= n <= bounds.MAX_GPUS
            or not bounds.price_ok(usd, zero=True)
        ):
            raise BadInput(f"--owned '{raw}' is not {_OWNED_FORM}")
        out[catalog.device(name.strip()).key] = (n, usd)
    return out


def _matching(devices: dict, part: str) -> list[str]:
    """Device keys named by one ``--gpu`` word: an exact key, else every key it prefixes."""
    exact = [k for k in devices if k.lower() == part.lower()]
    return exact or [k for k in devices if k.lower().startswith(part.lower().replace("-", "_"))]


def _gpu_hits(devices: dict, part: str, priced: set[str], priced_only: bool) -> list[str]:
    """Device keys of one ``--gpu`` word; in a search that needs a cost, a prefix keeps only
    priced devices (a full key still selects its device)."""
    hits = _matching(devices, part)
    exact = any(k.lower() == part.lower() for k in hits)
    if hits and priced_only and not exact:
        unpriced = [h for h in hits if h not in priced]
        hits = [h for h in hits if h in priced]
        if not hits:
            raise BadInput(
                f"--gpu '{part}' matches only devices without a price ({', '.join(unpriced)}); "
                "give --price DEVICE=USD or name the device by its key"
            )
    if not hits:
        raise BadInput(f"--gpu '{part}' matches no device (valid: {', '.join(devices)})")
    return hits


def select_gpus(
    pattern: str | None,
    prices: dict[str, float] | None = None,
    priced_only: bool = False,
    table: dict | None = None,
) -> list[str]:
    """Device keys for ``--gpu A100,H100`` (case-insensitive keys or key prefixes); default:
    current GPUs with a price (in ``table``, the prices chosen for --provider/--pricing, else the
    catalog's defaults, or one given with --price).

    With ``priced_only`` (a search that needs a cost), a prefix keeps only the devices it matches
    that have a price: an unpriced device has no cost, so every plan on it would be invalid."""
    devices = catalog.devices()
    if table is None:
        table = {k: d for k, d in devices.items() if d.price_usd_per_hour is not None}
    priced = set(table) | set(prices or {})
    if not pattern:
        return [k for k, d in devices.items() if not d.paleo and k in priced]
    keys: list[str] = []
    for part in filter(None, (p.strip() for p in pattern.split(","))):
        keys += [h for h in _gpu_hits(devices, part, priced, priced_only) if h not in keys]
    return keys


def _check_numbers(req: OptimizeRequest) -> None:
    """Counts, batches, fractions and names that need no catalog."""
    if req.optimizer not in defaults.OPTIMIZERS:
        raise BadInput(f"--optimizer '{req.optimizer}' (valid: {', '.join(defaults.OPTIMIZERS)})")
    if req.precision not in (*PRECISIONS, "auto", "any"):
        raise BadInput(f"--precision '{req.precision}' (valid: auto, {', '.join(PRECISIONS)}, any)")
    for name, v in (
        ("--trials", req.trials),
        ("--max-global-batch", req.max_global_batch),
        ("--min-global-batch", req.min_global_batch),
        ("--global-batch", 1 if req.global_batch is None else req.global_batch),
    ):
        if v < 1:
            raise BadInput(f"{name} must be a positive integer, got {v}")
    if req.min_global_batch > req.max_global_batch:
        raise BadInput("--min-global-batch is larger than --max-global-batch")
    for name, v in (("--ppp-comp", req.ppp_comp), ("--ppp-comm", req.ppp_comm)):
        if not 0 < v <= 1:
            raise BadInput(f"{name} must be in (0, 1], got {v}")
    if req.exhaustive not in ("auto", "always", "never"):
        raise BadInput(f"--exhaustive '{req.exhaustive}' (valid: auto, always, never)")
    bounds.check_request(req)


def _training(req: OptimizeRequest, costs, spec_seq: int) -> tuple[float, int, Tokens | None]:
    """Epochs, samples per epoch and (transformers) the training tokens: the request's, else the
    net's, else ImageNet's for a CNN; a transformer that states no length is costed per
    :data:`TOKENS_UNIT` tokens and says so."""
    training = costs.net.meta.get("training", {})
    model = costs.net.meta.get("model")
    if isinstance(model, dict):
        seq = int(model["seq_len"])
        if req.tokens is not None and req.dataset_size is not None:
            raise BadInput("--tokens and --dataset-size both set the training length: give one")
        total, basis, unit = llm_tokens(req.tokens, req.dataset_size, training, seq, spec_seq or seq)
        epochs = req.epochs if req.epochs is not None else training.get("epochs", 1)
        dataset = max(1, math.ceil(total / seq))
        _check_length(epochs, dataset)
        return float(epochs), dataset, Tokens(total=total, basis=basis, unit=unit, batch_source="")
    for option, value in (("--tokens", req.tokens), ("--global-batch-tokens", req.global_batch_tokens)):
        if value is not None:
            raise BadInput(f"{option} is for transformers; {req.net} trains for --epochs over --dataset-size")
    epochs = req.epochs if req.epochs is not None else training.get("epochs", DEFAULT_EPOCHS)
    dataset = (
        req.dataset_size if req.dataset_size is not None else training.get("dataset_size", IMAGENET_TRAIN)
    )
    _check_length(epochs, dataset)
    return float(epochs), int(dataset), None


def _check_length(epochs: float, dataset: int) -> None:
    if not (0 < epochs < float("inf")) or dataset < 1:  # rejects nan and inf too
        raise BadInput(
            f"--epochs must be a positive finite number (got {epochs}) and --dataset-size positive"
        )


def validate(req: OptimizeRequest) -> Problem:
    """Check ``req`` and look its names up; every bad option raises :class:`BadInput`."""
    objectives = parse_objectives(req.objective)
    max_gpus, max_usd = parse_budgets(list(req.budget))
    deadline = parse_duration(req.deadline)
    _check_numbers(req)
    fabrics.check_size(req.fabric, max_gpus, f"--budget {max_gpus}gpus")  # a fabric may connect fewer
    reliability = of_request(req)
    prices = parse_prices(req.prices)
    owned = parse_owned(req.owned)
    energy = with_options(catalog.energy_defaults(), req.pue, req.grid_intensity, req.electricity)
    table, what = price_table(req)
    priced = {**prices, **{k: usd for k, (_, usd) in owned.items()}}
    gpus = select_gpus(req.gpu, priced, "cost" in objectives or max_usd is not None, table)
    over, gpus, what = for_instances(req, gpus, what)
    if not gpus:
        raise BadInput(f"no device has a {what} in prices.toml (see `planner list prices`)")
    net_info = catalog.network(req.network)
    req = replace(req, image_size=resizing.normal(req.image_size))
    size = resizing.largest(req.image_size)  # a schedule's largest: memory must fit it
    costs = catalog.net_costs(req.net, req.rules, req.conv_algorithm, req.seq_len, size, req.attention)
    resize = resizing.phase_costs(req.image_size, req.net, req.rules, req.conv_algorithm, req.seq_len)
    llm = description(costs)
    if req.precision == "fp8" and llm is None:
        raise BadInput(defaults.FP8_CNN)
    spec_seq = spec_seq_len(req.net, req.rules, req.seq_len, costs.net.meta) if llm is not None else 0
    req, batch_source = _resolved(req, costs, spec_seq)
    epochs, dataset, tokens = _training(req, costs, spec_seq)
    if tokens is not None:
        tokens = replace(tokens, batch_source=batch_source)
    infos = tuple(catalog.device(k) for k in gpus)
    host_table = host_arrays(
        req, gpus, infos, net_info, given_prices(prices, owned, energy.usd_per_kwh), over
    )
    usd, sources = price_columns(host_table)
    caps = np.array([owned[k][0] if k in owned else np.inf for k in gpus], dtype=float)
    # an owned GPU's power is paid for on top of its amortisation; a rented GPU's price includes it
    kwh_usd = np.array([energy.usd_per_kwh if k in owned else 0.0 for k in gpus], dtype=float)
    return Problem(
        request=req,
        objectives=objectives,
        limits=Limits(
            max_gpus,
            max_usd,
            deadline,
            req.max_global_batch,
            req.min_global_batch,
            memory_fraction=memory_fraction(req.memory_headroom),
            owned=bool(owned),
        ),
        gpus=tuple(gpus),
        devices=infos,
        network=net_info,
        prices=usd,
        costs=costs,
        epochs=epochs,
        dataset_size=dataset,
        epochs_rule=resolve(req.convergence, req.net, req.optimizer, req.epochs),
        model=CostModel.of(
            req.rules,
            req.calibration,
            req.optimizer,
            loader_for(costs.net.meta, req.data_loader),
            dict(req.axes).get("stack"),
            req.fabric,
            req.rank_order,
        ).for_net(costs.net.meta, host_table, resizing.mean_scale(resize)),
        price_sources=sources,
        hosts=host_table,
        llm=llm,
        energy=energy,
        gpu_caps=caps,
        tokens=tokens,
        kwh_usd=kwh_usd,
        reliability=reliability,
        resize=resize,
    )


def _resolved(req: OptimizeRequest, costs, spec_seq: int) -> tuple[OptimizeRequest, str]:
    """The request with what depends on the net filled in: ``auto`` optimizer, and a
    transformer's global batch (``spec_seq`` > 0: see :func:`llm_global_batch`), with where it
    comes from."""
    llm = spec_seq > 0
    batch, source = req.global_batch, ""
    if llm:
        batch, source = llm_global_batch(
            req.global_batch,
            req.global_batch_tokens,
            costs.net.meta.get("training", {}),
            float(costs.total_params),
            int(costs.net.meta["model"]["seq_len"]),
            spec_seq,
        )
    published = str(costs.net.meta.get("training", {}).get("optimizer", ""))
    return replace(
        req, optimizer=defaults.optimizer(req.optimizer, llm, published), global_batch=batch
    ), source
