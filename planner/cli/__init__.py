"""The `planner` command line (Typer). Each command imports only what it uses."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.options import (
    ConvAlg,
    Fmt,
    Parallel,
    Precision,
    RulesOpt,
    Scaling,
    SchemeOpt,
    What,
    parse_int_list,
)

app = typer.Typer(
    name="planner",
    help="Plan deep-learning training runs with the PALEO performance model: "
    "how to train network X, on which hardware, fastest or cheapest.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


ESTIMATE_COLUMNS = [
    ("workers", "workers"),
    ("scheme", "scheme"),
    ("batch_per_worker", "batch/wkr"),
    ("forward_ms", "fwd ms"),
    ("backward_ms", "bwd ms"),
    ("update_ms", "update ms"),
    ("compute_ms", "compute ms"),
    ("comm_ms", "comm ms"),
    ("total_ms", "total ms"),
    ("speedup", "speedup"),
    ("throughput_samples_s", "samples/s"),
]


@app.command()
def estimate(
    net: Annotated[
        str | None, typer.Argument(help="Zoo name (see `planner list nets`) or path to a PALEO JSON spec.")
    ] = None,
    device: Annotated[str, typer.Option(help="Device key (see `planner list devices`).")] = "TITAN_X",
    network: Annotated[
        str, typer.Option(help="Link between workers (see `planner list networks`).")
    ] = "ethernet",
    batch: Annotated[
        int | None,
        typer.Option(help="Batch: total for strong scaling, per worker for weak. Default: the spec's."),
    ] = None,
    workers: Annotated[
        str, typer.Option(help="Worker counts, e.g. 1,2,4,8 or 1-128.")
    ] = "1,2,4,8,16,32,64,128",
    scaling: Annotated[
        Scaling, typer.Option(help="strong: fixed total batch; weak: fixed batch per worker.")
    ] = Scaling.weak,
    scheme: Annotated[
        SchemeOpt, typer.Option(help="AllReduce scheme; 'all' is PALEO's three plus ring.")
    ] = SchemeOpt.all,
    ppp_comp: Annotated[
        float, typer.Option(help="PALEO's platform percent of peak for compute, in (0, 1].")
    ] = 1.0,
    ppp_comm: Annotated[
        float, typer.Option(help="PALEO's platform percent of peak for communication, in (0, 1].")
    ] = 1.0,
    pipeline: Annotated[
        bool, typer.Option("--pipeline", help="Overlap each layer's memory traffic with its compute.")
    ] = False,
    parallel: Annotated[
        Parallel, typer.Option(help="data, model (ModelParallel blocks, or every layer split), or hybrid.")
    ] = Parallel.data,
    split: Annotated[
        str | None, typer.Option(help="Hybrid: first model-parallel layer (default: the first FC layer).")
    ] = None,
    gpus_per_node: Annotated[
        int, typer.Option(help="GPUs per node: the device's intra-node link inside, --network between.")
    ] = 1,
    rules: Annotated[RulesOpt, typer.Option(help="PALEO rule set to reproduce.")] = RulesOpt.paleo_2018,
    conv_algorithm: Annotated[
        ConvAlg, typer.Option(help="Convolution cost model; best = the cheaper per layer.")
    ] = ConvAlg.gemm,
    precision: Annotated[
        Precision, typer.Option(help="Arithmetic precision (peak and element size).")
    ] = Precision.fp32,
    format: Annotated[Fmt, typer.Option("--format", help="Output format.")] = Fmt.table,
    plan: Annotated[
        str | None, typer.Option(help="Re-evaluate a saved plan (plan_<k>.json of `planner pareto`).")
    ] = None,
) -> None:
    """PALEO's estimate per worker count and AllReduce scheme: a scaling table."""
    from costs import comm
    from planner.estimate.estimate import EstimateRequest
    from planner.estimate.estimate import estimate as run
    from planner.report import render

    schemes = tuple(comm.SCHEME_NAMES) if scheme is SchemeOpt.all else (scheme.value,)
    if plan is not None:
        from planner.estimate.estimate import request_from_plan

        req = request_from_plan(plan, net)
    elif net is None:
        from planner.errors import BadInput

        raise BadInput("estimate needs NET (a zoo name or a spec file) or --plan FILE")
    else:
        req = EstimateRequest(
            net=net,
            device=device,
            network=network,
            batch=batch,
            workers=parse_int_list(workers, "--workers"),
            scaling=scaling.value,
            schemes=schemes,
            ppp_comp=ppp_comp,
            ppp_comm=ppp_comm,
            pipeline=pipeline,
            parallel=parallel.value,
            rules=rules.value,
            conv_algorithm=conv_algorithm.value,
            precision=precision.value,
            gpus_per_node=gpus_per_node,
            split=split,
        )
    records = run(req)
    if format is Fmt.json:
        typer.echo(render.to_json(records))
    elif format is Fmt.csv:
        typer.echo(render.to_csv(records), nl=False)
    else:
        r0 = records[0]
        typer.echo(
            f"{r0['net']} on {r0['device']} over {r0['network']}, {r0['scaling']} scaling, "
            f"{r0['parallel']} parallel, {r0['precision']}, rules {r0['rules']}"
        )
        typer.echo(render.table(records, ESTIMATE_COLUMNS))


@app.command()
def summary(
    net: Annotated[str, typer.Argument(help="Zoo name or path to a PALEO JSON spec.")],
    batch: Annotated[int | None, typer.Option(help="Batch size (default: the spec's).")] = None,
    rules: Annotated[RulesOpt, typer.Option(help="PALEO rule set.")] = RulesOpt.paleo_2018,
    format: Annotated[Fmt, typer.Option("--format", help="Output format.")] = Fmt.table,
) -> None:
    """Per-layer table: type, output shape, parameters, FLOPs and activation bytes, with totals."""
    from planner.report import render
    from planner.report.summary import TOTAL_KEYS, summarize

    rows, totals = summarize(net, batch, rules.value)
    if format is Fmt.json:
        typer.echo(render.to_json({"layers": rows, "totals": totals}))
    elif format is Fmt.csv:
        typer.echo(render.to_csv(rows + [totals]), nl=False)
    else:
        cols = [
            ("layer", "layer"),
            ("type", "type"),
            ("output_shape", "output"),
            ("params", "params"),
            ("forward_flops", "fwd FLOPs"),
            ("backward_flops", "bwd FLOPs"),
            ("activation_bytes", "act bytes"),
        ]
        typer.echo(f"{totals['net']} at batch {totals['batch']} (rules {rules.value})")
        typer.echo(render.table(rows + [{**totals, "layer": "total", "type": ""}], cols, 0))
        del TOTAL_KEYS


@app.command(name="list")
def list_(
    what: Annotated[What, typer.Argument(help="nets, devices or networks.")],
    format: Annotated[Fmt, typer.Option("--format", help="Output format.")] = Fmt.table,
) -> None:
    """What the catalogs hold, with units and sources."""
    from planner.report import render
    from planner.report.listing import listing

    records, cols = listing(what.value)
    if format is not Fmt.table:
        records = [{k: v for k, v in r.items() if k != "source_short"} for r in records]
    if format is Fmt.json:
        typer.echo(render.to_json(records))
    elif format is Fmt.csv:
        typer.echo(render.to_csv(records), nl=False)
    else:
        typer.echo(render.table(records, cols, 2))


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
        str, typer.Option(help="time (default), cost, throughput, or time,cost for the Pareto set.")
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
    network: Annotated[
        str, typer.Option(help="Link between nodes (see `planner list networks`).")
    ] = "eth100",
    epochs: Annotated[
        float | None, typer.Option(help="Epochs to train (default: the net's, e.g. 90 for ImageNet).")
    ] = None,
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
    min_global_batch: Annotated[int, typer.Option(help="Smallest global batch.")] = 1,
    optimizer: Annotated[
        str, typer.Option(help="Optimizer state kept per parameter: sgd, momentum or adam.")
    ] = "momentum",
    precision: Annotated[str, typer.Option(help="fp32, tf32, fp16, bf16, or any to search it.")] = "fp32",
    pipeline: Annotated[
        bool,
        typer.Option(
            "--pipeline/--no-pipeline", help="Overlap each layer's memory traffic with its compute."
        ),
    ] = False,
    hybrid: Annotated[
        bool, typer.Option("--hybrid/--no-hybrid", help="Also search hybrid data/model splits.")
    ] = True,
    ppp_comp: Annotated[
        float, typer.Option(help="Platform percent of peak for compute (PALEO's TensorFlow value).")
    ] = 0.62,
    ppp_comm: Annotated[float, typer.Option(help="Platform percent of peak for communication.")] = 0.72,
    rules: Annotated[RulesOpt, typer.Option(help="PALEO rule set.")] = RulesOpt.paleo_2018,
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
        str, typer.Option(help="auto: enumerate the space when small and report the gap; always; never.")
    ] = "auto",
    out: Annotated[
        str | None, typer.Option(help="Run folder (default results/<timestamp>_<net>_<budget>/).")
    ] = None,
    format: Annotated[
        Fmt, typer.Option("--format", help="table or json (csv: the best plan and alternatives).")
    ] = Fmt.table,
) -> None:
    """The fastest (or cheapest) training plan under constraints, why it wins, what binds."""
    from planner.report import render
    from planner.report.files import dumps, run_dir, versions, write_atomic
    from planner.result.optimize import PLAN_COLUMNS
    from planner.result.optimize import optimize as run

    req = _optimize_request(locals())
    budgets = req.budget
    result = run(req)
    data = result.to_dict()
    data["versions"] = versions()
    saved = None
    if storage is None:
        what = "_".join(budgets) or "nobudget"
        saved = write_atomic(Path(out) if out else run_dir("results", net, what), {"run.json": dumps(data)})
        data["run_dir"] = str(saved)
    if format is Fmt.json:
        typer.echo(render.to_json(data))
        return
    rows = [result.best] + result.alternatives
    if format is Fmt.csv:
        typer.echo(render.to_csv(rows, PLAN_COLUMNS), nl=False)
        return
    typer.echo(render.optimize_text(result, saved))


def _optimize_request(opts: dict):
    """The OptimizeRequest of the options shared by `optimize` and `pareto`."""
    from planner.result.optimize import OptimizeRequest

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
        network=opts["network"],
        epochs=opts["epochs"],
        dataset_size=opts["dataset_size"],
        global_batch=opts["global_batch"],
        max_global_batch=opts["max_global_batch"],
        min_global_batch=opts["min_global_batch"],
        optimizer=opts["optimizer"],
        precision=opts["precision"],
        pipeline=opts["pipeline"],
        hybrid=opts["hybrid"],
        ppp_comp=opts["ppp_comp"],
        ppp_comm=opts["ppp_comm"],
        rules=opts["rules"].value,
        conv_algorithm=opts["conv_algorithm"].value,
        trials=opts["trials"],
        timeout=opts["timeout"],
        seed=opts["seed"],
        storage=opts["storage"],
        study_name=name,
        exhaustive=opts["exhaustive"],
    )


def pareto(**opts) -> None:
    """Time-vs-cost Pareto report: runs a two-objective search and writes a report folder."""
    from planner.report import render
    from planner.report.files import run_dir, write_atomic
    from planner.report.pareto_run import run_pareto

    req = _optimize_request(opts)
    data, files = run_pareto(req)
    out = opts["out"]
    saved = write_atomic(Path(out) if out else run_dir("results", req.net, "pareto"), files)
    if opts["format"] is Fmt.json:
        typer.echo(render.to_json({"run_dir": str(saved), "front": data["front"], "search": data["search"]}))
        return
    cols = [
        ("label", "plan"),
        ("gpu", "gpu"),
        ("gpus", "gpus"),
        ("batch_per_worker", "batch/GPU"),
        ("scheme", "scheme"),
        ("time_text", "time to train"),
        ("cost_usd", "cost $"),
        ("kind", "bound by"),
    ]
    typer.echo(
        f"Pareto front of {req.net}: {len(data['front'])} plans "
        f"({data['evaluated']:,} evaluated, {data['feasible']:,} feasible)"
    )
    typer.echo(render.table(data["front"], cols, 2))
    typer.echo(f"Report: {saved}/report.html (also report.md, pareto.csv, trials.csv, plan_<k>.json)")


def _pareto_signature():
    """`pareto` takes every option of `optimize`, with --objectives for --objective, plus --out."""
    import inspect

    params = []
    for p in inspect.signature(optimize, eval_str=True).parameters.values():
        if p.name == "objective":
            p = p.replace(
                name="objectives",
                default="time,cost",
                annotation=Annotated[str, typer.Option(help="time,cost (default) or time,cost,memory.")],
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


pareto.__signature__ = _pareto_signature()
app.command(name="pareto")(pareto)


@app.command()
def report(run_dir: Annotated[str, typer.Argument(help="A folder written by `planner pareto`.")]) -> None:
    """Re-render a Pareto report (HTML, Markdown, charts) from a saved run, without searching."""
    from planner.report.pareto_run import rerender

    files = rerender(run_dir)
    typer.echo(f"Rendered {', '.join(files)} in {run_dir}")


from planner.cli.sweep import sweep_app  # noqa: E402

app.add_typer(sweep_app, name="sweep")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; turn every planner or usage error into one line on stderr."""
    from costs.errors import PlannerError

    try:  # recent Typer vendors Click
        from typer._click.exceptions import NoArgsIsHelpError, UsageError
    except ImportError:  # pragma: no cover - older Typer on top of Click
        from click.exceptions import NoArgsIsHelpError, UsageError
    Abort = typer.Abort

    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="planner", standalone_mode=False)
    except PlannerError as exc:
        typer.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except NoArgsIsHelpError as exc:
        # Typer's rich help prints itself while the error is built (its message is then "");
        # plain Click puts the help text in the message. Either way, show it once.
        message = exc.format_message()
        if message:
            typer.echo(message)
        return 0
    except UsageError as exc:
        typer.echo(f"error: {exc.format_message()}", err=True)
        return 2
    except Abort:
        typer.echo("aborted", err=True)
        return 130
    except BrokenPipeError:
        return 0
    return result if isinstance(result, int) else 0


def run() -> None:  # console-script entry
    sys.exit(main())
