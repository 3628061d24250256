"""`planner optimize`, `pareto` and `report`: parse options, run :mod:`planner.pipeline`, print, save."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated

import typer

from planner.cli import goodput_options, model_options
from planner.cli.app import app
from planner.cli.model_options import Calibration, DataLoader, MemoryHeadroom, PppComm, PppComp, Rules
from planner.cli.options import ConvAlg, Fmt, RulesOpt
from planner.request import defaults


@app.command()
def optimize(
    net: Annotated[
        str, typer.Argument(help="Zoo name (see `planner list nets`) or path to a PALEO JSON spec.")
    ],
    budget: Annotated[
        list[str] | None,
        typer.Option(help="GPU count (16gpus, '16 GPUs', 16) or money ($500, 500usd); may be given twice."),
    ] = None,
    deadline: Annotated[str | None, typer.Option(help="Latest time to train, e.g. 24h, 90m, 2d.")] = None,
    objective: Annotated[
        str,
        typer.Option(
            help="time (default), cost, throughput, memory, energy, or time,cost for the Pareto set."
        ),
    ] = "time",
    gpu: Annotated[
        str | None,
        typer.Option(
            help="GPU types to consider, e.g. A100,H100 (prefixes). Default: current GPUs with a price."
        ),
    ] = None,
    price: Annotated[
        list[str] | None,
        typer.Option(
            help="Your price per GPU-hour, DEVICE=USD (e.g. H100_SXM=2.49); repeatable; overrides the catalog."
        ),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            help="Price from these providers only, e.g. aws,lambda (see `planner list prices`). "
            "Default: the median over every provider that offers the GPU."
        ),
    ] = None,
    pricing: Annotated[
        str,
        typer.Option(help="on-demand (default), spot, reserved (the 1-year rate) or reserved-3y."),
    ] = "on-demand",
    owned: Annotated[
        list[str] | None,
        typer.Option(
            help="GPUs you own, DEVICE:COUNT or DEVICE:COUNT@USD_PER_GPU_HOUR (amortisation): priced 0 "
            "or at that rate, plans on it use at most COUNT; repeatable."
        ),
    ] = None,
    pue: Annotated[
        float | None,
        typer.Option(help="Data-centre PUE for energy (default 1.58, see configs/energy.toml)."),
    ] = None,
    grid_intensity: Annotated[
        float | None,
        typer.Option(help="Grid carbon intensity, gCO2 per kWh, for CO2 (default 481, world 2023)."),
    ] = None,
    electricity: Annotated[
        str | None,
        typer.Option(
            metavar="USD_PER_KWH",
            help="Electricity price for --owned GPUs, USD per kWh at the meter (default 0.0806, U.S. "
            "industrial 2023, see configs/energy.toml); rented prices include power.",
        ),
    ] = None,
    network: Annotated[
        str, typer.Option(help="Link between nodes (see `planner list networks`).")
    ] = defaults.NETWORK,
    epochs: model_options.Epochs = None,
    convergence: model_options.Convergence = "auto",
    dataset_size: Annotated[
        int | None, typer.Option(help="Samples per epoch (default: the net's dataset).")
    ] = None,
    global_batch: Annotated[
        int | None,
        typer.Option(help="Fix the global batch (strong scaling) instead of searching the batch per GPU."),
    ] = None,
    max_global_batch: Annotated[
        int, typer.Option(help="Largest global batch (Goyal et al. 2017: 8192 for ImageNet).")
    ] = 8192,
    seq_len: Annotated[
        int | None, typer.Option(help="Transformers: tokens per sequence (default: the net's).")
    ] = None,
    tokens: Annotated[
        str | None,
        typer.Option(
            help="Transformers: tokens to train on, e.g. 15T, 300B or 2e12 (default: the net's published "
            "length; a net without one is costed per 1e12 tokens and says so)."
        ),
    ] = None,
    global_batch_tokens: Annotated[
        str | None,
        typer.Option(
            help="Transformers: tokens per optimizer step, e.g. 4M (default: the net's published batch, "
            "else GPT-3's for a model of its size)."
        ),
    ] = None,
    min_global_batch: Annotated[int, typer.Option(help="Smallest global batch.")] = 1,
    memory_headroom: MemoryHeadroom = None,
    image_size: model_options.ImageSize = None,
    optimizer: Annotated[
        str, typer.Option(help="Optimizer state kept per parameter: sgd, momentum or adam.")
    ] = defaults.OPTIMIZER,
    precision: Annotated[
        str,
        typer.Option(
            help="auto (each GPU's training precision: bf16, else fp16, else fp32), fp32, tf32, fp16, bf16, "
            "fp8 (transformers: Transformer Engine's FP8 linear layers), or any to search it."
        ),
    ] = defaults.PRECISION,
    pipeline: Annotated[
        bool,
        typer.Option(
            "--pipeline/--no-pipeline", help="Overlap each layer's memory traffic with its compute."
        ),
    ] = False,
    hybrid: Annotated[
        bool, typer.Option("--hybrid/--no-hybrid", help="Also search hybrid data/model splits.")
    ] = True,
    ppp_comp: PppComp = defaults.PPP_COMP,
    ppp_comm: PppComm = defaults.PPP_COMM,
    rules: Rules = RulesOpt(defaults.RULES),
    calibration: Calibration = None,
    data_loader: DataLoader = defaults.DATA_LOADER,
    instance: model_options.Instance = None,
    cpu_cores_per_gpu: model_options.CpuCoresPerGpu = None,
    nics: model_options.Nics = None,
    conv_algorithm: Annotated[ConvAlg, typer.Option(help="Convolution cost model.")] = ConvAlg.gemm,
    trials: Annotated[int, typer.Option(help="Optuna trials (total, counting a resumed study's).")] = 200,
    timeout: Annotated[
        float | None, typer.Option(help="Stop asking for trials after this many seconds.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Sampler seed, recorded in the output.")] = 0,
    storage: Annotated[
        str | None,
        typer.Option(help="Optuna storage to persist/resume: sqlite:///x.db, journal:FILE, postgresql://..."),
    ] = None,
    study_name: Annotated[
        str | None, typer.Option(help="Study name in --storage (default: derived from the request).")
    ] = None,
    exhaustive: Annotated[
        str,
        typer.Option(
            help="auto: enumerate a space of at most 1M valid plans instead of searching it; always: search, then "
            "enumerate and report the search's gap; never: search only."
        ),
    ] = "auto",
    out: Annotated[
        str | None, typer.Option(help="Run folder (default results/<timestamp>_<net>_<budget>/).")
    ] = None,
    format: Annotated[
        Fmt, typer.Option("--format", help="table or json (csv: the best plan and alternatives).")
    ] = Fmt.table,
    emit: Annotated[
        str | None,
        typer.Option(
            help="Also write the best plan's launch files for these targets (see `planner launch`)."
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(help="Keep the search to plans these launch targets run, and write their files."),
    ] = None,
    **axes,
) -> None:
    """The fastest (or cheapest) training plan under constraints, why it wins, what binds."""
    from planner.cli.launch import emit_option_check, emit_run
    from planner.pipeline import optimize as run
    from planner.report import render, text
    from planner.report.files import dumps, run_dir, versions, write_atomic
    from planner.request.files import check_writable
    from planner.result.records import PLAN_COLUMNS

    emit = emit_option_check(emit, target, storage)
    req = _optimize_request(_for_targets({**locals(), **axes}))
    check_writable(out or "results", "--out", folder=True)  # before the search
    budgets = req.budget
    result = run(req)
    data = result.to_dict()
    data["versions"] = versions()
    saved = None
    if storage is None:
        what = "_".join(budgets) or "nobudget"
        saved = write_atomic(Path(out) if out else run_dir("results", net, what), {"run.json": dumps(data)})
        data["run_dir"] = str(saved)
    launched = emit_run(saved, emit, provider, pricing) if emit else None
    if format is Fmt.json:
        typer.echo(render.to_json(data))
        return
    rows = [result.best] + result.alternatives
    if format is Fmt.csv:
        typer.echo(render.to_csv(rows, PLAN_COLUMNS), nl=False)
        return
    typer.echo(text.optimize_text(result, saved))
    if launched:
        typer.echo(launched)


def _for_targets(opts: dict) -> dict:
    """With --target, the axis options narrowed to what the targets run."""
    if not opts.get("target"):
        return opts
    from planner.launch.limits import restrict_axes
    from planner.space.axes import OPTIONS

    names = [a.name for a in OPTIONS]
    return {**opts, **restrict_axes(opts["net"], opts["target"], {n: opts.get(n) for n in names})}


def _optimize_request(opts: dict):
    """The OptimizeRequest of the options shared by `optimize` and `pareto`."""
    from planner.request.optimize import OptimizeRequest
    from planner.space.axes import OPTIONS

    budgets = tuple(opts["budget"] or ())
    objective = opts.get("objective") or opts.get("objectives")
    name = opts["study_name"]
    if opts["storage"] and not name:
        name = f"{opts['net']}_{'_'.join(budgets) or 'nobudget'}_{objective}".replace("$", "usd").replace(
            " ", ""
        )
    return OptimizeRequest(
        net=opts["net"],
        budget=budgets,
        deadline=opts["deadline"],
        objective=objective,
        gpu=opts["gpu"],
        prices=tuple(opts.get("price") or ()),
        provider=opts.get("provider"),
        pricing=opts.get("pricing") or "on-demand",
        owned=tuple(opts.get("owned") or ()),
        pue=opts.get("pue"),
        grid_intensity=opts.get("grid_intensity"),
        electricity=opts.get("electricity"),
        network=opts["network"],
        epochs=opts["epochs"],
        convergence=opts.get("convergence") or "auto",
        dataset_size=opts["dataset_size"],
        global_batch=opts["global_batch"],
        seq_len=opts.get("seq_len"),
        image_size=opts.get("image_size"),
        tokens=opts.get("tokens"),
        global_batch_tokens=opts.get("global_batch_tokens"),
        memory_headroom=opts.get("memory_headroom"),
        max_global_batch=opts["max_global_batch"],
        min_global_batch=opts["min_global_batch"],
        optimizer=opts["optimizer"],
        precision=opts["precision"],
        pipeline=opts["pipeline"],
        hybrid=opts["hybrid"],
        ppp_comp=opts["ppp_comp"],
        ppp_comm=opts["ppp_comm"],
        rules=opts["rules"].value,
        calibration=opts.get("calibration"),
        data_loader=opts.get("data_loader", defaults.DATA_LOADER),
        instance=opts.get("instance"),
        cpu_cores_per_gpu=opts.get("cpu_cores_per_gpu"),
        nics=opts.get("nics"),
        **goodput_options.request_fields(opts) | model_options.run_fields(opts),
        conv_algorithm=opts["conv_algorithm"].value,
        trials=opts["trials"],
        timeout=opts["timeout"],
        seed=opts["seed"],
        storage=opts["storage"],
        study_name=name,
        exhaustive=opts["exhaustive"],
        axes=tuple((a.name, str(opts[a.name])) for a in OPTIONS if opts.get(a.name) is not None),
    )


def pareto(**opts) -> None:
    """Time-vs-cost Pareto report: runs a two-objective search and writes a report folder."""
    from planner.cli.launch import emit_option_check, emit_run
    from planner.pipeline import pareto as run
    from planner.report import render
    from planner.report.files import run_dir, write_atomic
    from planner.report.pareto_table import CLI_COLUMNS, LLM_COLUMNS
    from planner.request.files import check_writable

    opts["emit"] = emit_option_check(opts["emit"], opts["target"], opts["storage"])
    req = _optimize_request(_for_targets(opts))
    check_writable(opts["out"] or "results", "--out", folder=True)  # before the search
    data, files = run(req)
    out = opts["out"]
    saved = write_atomic(Path(out) if out else run_dir("results", req.net, "pareto"), files)
    launched = emit_run(saved, opts["emit"], opts.get("provider"), opts["pricing"]) if opts["emit"] else None
    if opts["format"] is Fmt.json:
        typer.echo(render.to_json({"run_dir": str(saved), "front": data["front"], "search": data["search"]}))
        return
    cols = list(CLI_COLUMNS)
    if len({p.get("stack") for p in data["front"]}) > 1:
        cols[2:2] = [("stack", "stack")]
    if data["front"] and "tp" in data["front"][0] and "tokens_per_s" in data["front"][0]:
        cols[5:5] = LLM_COLUMNS
        cols[-1:-1] = [("tokens_per_s", "tokens/s"), ("mfu", "MFU")]
    typer.echo(
        f"Pareto front of {req.net}: {len(data['front'])} plan{'s' if len(data['front']) != 1 else ''} "
        f"({data['evaluated']:,} evaluated, {data['feasible']:,} feasible)"
    )
    typer.echo(render.table(data["front"], cols, 2))
    merged = data["search"].get("front_merged", 0)
    if merged:
        typer.echo(
            f"Merged {merged} plan{'s' if merged > 1 else ''} within {data['search']['front_tolerance']:.0%} of a "
            "listed plan on every objective into it (listed as its equivalents in run.json)."
        )
    _footer_lines(data)
    typer.echo(f"Report: {saved}/report.html (also report.md, pareto.csv, trials.csv, plan_<k>.json)")
    if launched:
        typer.echo(launched)


def _footer_lines(data: dict) -> None:
    """Why each GPU type off the front is off it, and the stacks of the front's plans."""
    from planner.stacks.listing import summary_line

    lines = [*data.get("off_front", [])]
    lines += [summary_line(n) for n in dict.fromkeys(p["stack"] for p in data["front"] if p.get("stack"))]
    if lines:
        typer.echo("\n".join(lines))


def _axis_parameters() -> list[inspect.Parameter]:
    """A ``--<axis>`` option for every declared axis with an option (:mod:`planner.space.axes`)."""
    from planner.space.axes import OPTIONS

    return [
        inspect.Parameter(
            a.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[str | None, typer.Option(help=a.option)],
        )
        for a in OPTIONS
    ]


def _optimize_signature(axes: bool) -> inspect.Signature:
    """`optimize`'s options, the goodput and network options, plus (``axes``) the declared axes'."""
    params = [p for p in _OPTIMIZE_OPTIONS.parameters.values() if p.kind is not p.VAR_KEYWORD]
    extra = goodput_options.parameters() + model_options.run_parameters()
    extra += _axis_parameters() if axes else []
    return _OPTIMIZE_OPTIONS.replace(parameters=params + extra)


def add_axis_options() -> None:
    """Give `optimize` and `pareto` the declared axes' options. Called by :func:`planner.cli.main`
    for those two commands only: the declarations import numpy, which `planner --help` and the
    other commands need not wait for."""
    optimize.__signature__ = _optimize_signature(True)
    pareto.__signature__ = _pareto_signature()


def _pareto_signature():
    """`pareto` takes every option of `optimize`, with --objectives for --objective, plus --out."""
    params = []
    for p in inspect.signature(optimize, eval_str=True).parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if p.name == "objective":
            p = p.replace(
                name="objectives",
                default="time,cost",
                annotation=Annotated[
                    str, typer.Option(help="time,cost (default), time,cost,energy or time,cost,memory.")
                ],
            )
        if p.name == "out":
            p = p.replace(
                annotation=Annotated[
                    str | None,
                    typer.Option(help="Report folder (default results/<timestamp>_<net>_pareto/)."),
                ]
            )
        if p.name == "format":
            p = p.replace(
                annotation=Annotated[Fmt, typer.Option("--format", help="table or json (terminal output).")]
            )
        params.append(p)
    return inspect.Signature(params)


_OPTIMIZE_OPTIONS = inspect.signature(optimize, eval_str=True)  # as declared above, before any axis
optimize.__signature__ = _optimize_signature(False)
pareto.__signature__ = _pareto_signature()
app.command(name="pareto")(pareto)
