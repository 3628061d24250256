"""`planner estimate`, `planner summary` and `planner list`: parse options, call, print."""

from __future__ import annotations

from typing import Annotated

import typer

from planner.cli import model_options as host
from planner.cli.app import app
from planner.cli.model_options import (
    Calibration,
    Convergence,
    DataLoader,
    ImageSize,
    MemoryHeadroom,
    PppComm,
    PppComp,
    Rules,
    Stack,
)
from planner.cli.options import ConvAlg, Fmt, Parallel, Precision, RulesOpt, Scaling, SchemeOpt, What
from planner.request import defaults

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
    ("step_energy_j", "J/step"),
]
LLM_COLUMNS = [
    ("workers", "GPUs"),
    ("scheme", "scheme"),
    ("tp", "TP"),
    ("pp", "PP"),
    ("dp", "DP"),
    ("microbatch", "micro"),
    ("accumulation", "steps"),
    ("total_ms", "step ms"),
    ("bubble_ms", "bubble ms"),
    ("comm_ms", "comm ms"),
    ("tokens_per_s", "tokens/s"),
    ("mfu", "MFU"),
    ("hardware_tflops_per_gpu", "TFLOP/s/GPU"),
    ("memory_gb_per_gpu", "mem GB"),
]

_SCHEDULE_HELP = "Transformers: pipeline schedule: 1f1b (with --interleave), zb1p, dualpipe or dualpipev."


@app.command()
def estimate(
    net: Annotated[
        str | None, typer.Argument(help="Zoo name (see `planner list nets`) or path to a PALEO JSON spec.")
    ] = None,
    device: Annotated[str, typer.Option(help="Device key (see `planner list devices`).")] = defaults.DEVICE,
    network: Annotated[
        str, typer.Option(help="Link between nodes (see `planner list networks`).")
    ] = defaults.NETWORK,
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
        SchemeOpt,
        typer.Option(
            help="AllReduce scheme. auto (default): ring under the modern rules (NCCL's, what optimize "
            "uses for transformers), every scheme under a PALEO rule set; all: PALEO's three plus ring."
        ),
    ] = SchemeOpt.auto,
    ppp_comp: PppComp = defaults.PPP_COMP,
    ppp_comm: PppComm = defaults.PPP_COMM,
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
    rules: Rules = RulesOpt(defaults.RULES),
    calibration: Calibration = None,
    stack: Stack = None,
    optimizer: Annotated[
        str, typer.Option(help="Modern rules: optimizer step traffic, sgd, momentum or adam.")
    ] = defaults.OPTIMIZER,
    data_loader: DataLoader = defaults.DATA_LOADER,
    instance: host.Instance = None,
    cpu_cores_per_gpu: host.CpuCoresPerGpu = None,
    nics: host.Nics = None,
    fabric: host.Fabric = None,
    rank_order: host.RankOrder = None,
    conv_algorithm: Annotated[
        ConvAlg, typer.Option(help="Convolution cost model; best = the cheaper per layer.")
    ] = ConvAlg.gemm,
    precision: Annotated[
        Precision,
        typer.Option(
            help="Arithmetic precision; auto: the device's (bf16, else fp16 tensor cores, else fp32)."
        ),
    ] = Precision(defaults.PRECISION),
    format: Annotated[Fmt, typer.Option("--format", help="Output format.")] = Fmt.table,
    accumulation: Annotated[
        int, typer.Option(help="Gradient accumulation: microbatches per optimizer step (sync once per step).")
    ] = 1,
    plan: Annotated[
        str | None, typer.Option(help="Re-evaluate a saved plan (plan_<k>.json of `planner pareto`).")
    ] = None,
    tp: Annotated[int, typer.Option(help="Transformers: tensor-parallel degree (inside a node).")] = 1,
    pp: Annotated[int, typer.Option(help="Transformers: pipeline-parallel stages (1F1B).")] = 1,
    zero: Annotated[int, typer.Option(help="Transformers: ZeRO stage 0-3 (3 = FSDP full sharding).")] = 0,
    recompute: Annotated[
        str, typer.Option(help="Transformers: activation recomputation, none, selective or full.")
    ] = "none",
    sp: Annotated[
        bool, typer.Option("--sp", help="Transformers: sequence parallelism with tensor parallelism.")
    ] = False,
    tp_overlap: Annotated[
        bool,
        typer.Option(
            "--tp-overlap", help="Transformers: TP communication overlapped with GEMMs (Megatron-Core)."
        ),
    ] = False,
    ep: Annotated[int, typer.Option(help="Mixture of experts: expert-parallel degree.")] = 1,
    ep_overlap: Annotated[
        bool,
        typer.Option(
            "--ep-overlap",
            help="Mixture of experts: expert all-to-alls overlapped with another microbatch's compute "
            "(DeepEP with DualPipe, Megatron-Core's --overlap-moe-expert-parallel-comm).",
        ),
    ] = False,
    interleave: Annotated[int, typer.Option(help="Transformers: virtual pipeline stages per GPU.")] = 1,
    pp_schedule: Annotated[str, typer.Option(help=_SCHEDULE_HELP)] = "1f1b",
    cp: Annotated[
        int, typer.Option(help="Transformers: context-parallel degree (the sequence split over cp GPUs).")
    ] = 1,
    cp_comm: Annotated[
        str,
        typer.Option(
            help="Context parallelism's key/value exchange: p2p (ring), all_gather or a2a (Ulysses)."
        ),
    ] = "p2p",
    memory_headroom: MemoryHeadroom = None,
    microbatch: Annotated[
        int | None, typer.Option(help="Transformers: sequences per GPU per microbatch (default: --batch).")
    ] = None,
    global_batch: Annotated[
        int | None,
        typer.Option(help="Transformers: sequences per step; microbatches = global / (dp x microbatch)."),
    ] = None,
    seq_len: host.SeqLen = None,
    attention: host.Attention = None,
    image_size: ImageSize = None,
    convergence: Convergence = "auto",
    pue: Annotated[
        float | None, typer.Option(help="Data-centre PUE for energy (default 1.58, see configs/energy.toml).")
    ] = None,
    grid_intensity: Annotated[
        float | None, typer.Option(help="Grid carbon intensity, gCO2 per kWh (default 481, world 2023).")
    ] = None,
) -> None:
    """Predicted step time per worker count and AllReduce scheme (modern rules, or a PALEO rule set): a scaling table."""
    from planner.estimate.estimate import estimate as run
    from planner.report import render

    req = _estimate_request(locals())
    records = run(req)
    if format is Fmt.json:
        typer.echo(render.to_json(records))
    elif format is Fmt.csv:
        typer.echo(render.to_csv(records), nl=False)
    else:
        _print_text(records)


def _print_text(records: list[dict]) -> None:
    """The estimate as a table with its header, memory, stack and interval lines."""
    from planner.report import render
    from planner.report.text import attention_words

    r0 = records[0]
    typer.echo(
        f"{r0['net']} on {r0['device']} over {r0['network']}, {r0['scaling']} scaling, "
        f"{r0['parallel']} parallel, {r0['precision']}, rules {r0['rules']}"
        + (f", stack {r0['stack']}" if r0.get("stack") else "")
        + attention_words(r0)
        + (f", {r0['accumulation']} microbatches per step" if r0["accumulation"] != 1 else "")
        + "; J/step: energy at the meter per optimizer step (--pue; per million samples in --format json)"
    )
    cols = LLM_COLUMNS if "tp" in r0 else ESTIMATE_COLUMNS
    if r0.get("cp", 1) > 1:  # context parallelism: its degree and its exposed key/value exchange
        cols = [*cols[:3], ("cp", "CP"), *cols[3:9], ("cp_comm_ms", "CP ms"), *cols[9:]]
    typer.echo(render.table(records, cols))
    too_big = [x for x in records if not x.get("fits_memory", True)]
    if too_big:
        worst = max(too_big, key=lambda x: x["memory_gb"])
        typer.echo(
            f"Does not fit: {len(too_big)} of {len(records)} rows need more memory per GPU than the "
            f"{worst['device']}'s usable 90% (up to {worst['memory_gb']:,.1f} GB at {worst['workers']} workers, "
            f"batch {worst['batch_per_worker']}); "
            + (
                "ZeRO (--zero), tensor or pipeline parallelism (--tp, --pp), recomputation (--recompute) "
                "or a smaller --microbatch needs less."
                if "tp" in r0
                else "a smaller batch per worker or a hybrid split needs less."
            )
        )
    if "total_ms_range" in r0:
        lo, hi = r0["total_ms_range"][0] / r0["total_ms"], r0["total_ms_range"][1] / r0["total_ms"]
        typer.echo(
            f"80% interval ({_basis(r0)}, on {'transformer' if 'tp' in r0 else 'CNN'} runs): "
            f"each total x {lo:.2f} to {hi:.2f}, "
            f"e.g. {r0['total_ms']:,.2f} ms ({r0['total_ms_range'][0]:,.2f}-{r0['total_ms_range'][1]:,.2f} ms)"
        )
    if r0.get("stack"):
        from planner.stacks.listing import summary_line

        typer.echo(summary_line(r0["stack"], transformer="tp" in r0))
    from planner.fabrics import answer_lines

    for line in answer_lines(records):  # the network between nodes the answer assumes
        typer.echo(line)
    if r0.get("host"):
        loader = r0.get("loader_samples_s_per_gpu")
        rate = f": {loader:,.0f} images/s per GPU" if loader is not None else ""
        typer.echo(f"Host: {r0['host']}. Data loader: {r0['loader']}{rate}.")


def _basis(rec: dict) -> str:
    """What the interval is: held-out or in-sample error of the stack (in-sample where the profile
    was fitted without leave-one-source-out), widened when no stack was named."""
    return (
        rec.get("interval_basis")
        or f"{rec.get('interval_kind', 'held-out')} error of stack {rec.get('stack')}"
    )


def _estimate_request(o: dict):
    """The EstimateRequest of `planner estimate`'s options ``o`` (the command's parameters; the
    Python API's :func:`planner.api.estimate` builds its request here too)."""
    from costs.comm import schemes as comm
    from planner.request.estimate import EstimateRequest
    from planner.request.parse import parse_int_list

    schemes = _schemes(o["scheme"], o["rules"].value, comm.SCHEME_NAMES)
    if o["plan"] is not None:
        from dataclasses import replace

        from planner.request.estimate import request_from_plan

        req = replace(
            request_from_plan(o["plan"], o["net"]),
            pue=o["pue"],
            grid_intensity=o["grid_intensity"],
            memory_headroom=o["memory_headroom"],
        )
        req = replace(req, **{k: o[k] for k in ("stack", *host.RUN_KEYS) if o.get(k) is not None})
    elif o["net"] is None:
        from planner.errors import BadInput

        raise BadInput("estimate needs NET (a zoo name or a spec file) or --plan FILE")
    else:
        req = EstimateRequest(
            net=o["net"],
            device=o["device"],
            network=o["network"],
            batch=o["batch"],
            workers=parse_int_list(o["workers"], "--workers"),
            scaling=o["scaling"].value,
            schemes=schemes,
            ppp_comp=o["ppp_comp"],
            ppp_comm=o["ppp_comm"],
            pipeline=o["pipeline"],
            parallel=o["parallel"].value,
            rules=o["rules"].value,
            conv_algorithm=o["conv_algorithm"].value,
            precision=o["precision"].value,
            gpus_per_node=o["gpus_per_node"],
            split=o["split"],
            accumulation=o["accumulation"],
            calibration=o["calibration"],
            stack=o.get("stack"),
            optimizer=o["optimizer"],
            data_loader=o["data_loader"],
            instance=o["instance"],
            cpu_cores_per_gpu=o["cpu_cores_per_gpu"],
            nics=o["nics"],
            **host.run_fields(o),  # --fabric, --rank-order, --attention
            tp=o["tp"],
            pp=o["pp"],
            zero=o["zero"],
            recompute=o["recompute"],
            sp=o["sp"],
            tp_overlap=o["tp_overlap"],
            ep=o["ep"],
            ep_overlap=o["ep_overlap"],
            interleave=o["interleave"],
            cp=o["cp"],
            cp_comm=o["cp_comm"],
            pp_schedule=o["pp_schedule"],
            memory_headroom=o["memory_headroom"],
            microbatch=o["microbatch"],
            global_batch=o["global_batch"],
            seq_len=o["seq_len"],
            image_size=o["image_size"],
            convergence=o["convergence"],
            pue=o["pue"],
            grid_intensity=o["grid_intensity"],
        )
    return req


@app.command()
def summary(
    net: Annotated[str, typer.Argument(help="Zoo name or path to a PALEO JSON spec.")],
    batch: Annotated[int | None, typer.Option(help="Batch size (default: the spec's).")] = None,
    rules: Rules = RulesOpt(defaults.RULES),
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
    what: Annotated[
        What, typer.Argument(help="nets, devices, networks, prices, instances, stacks or fabrics.")
    ],
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
        if what is What.prices:
            from planner.report.listing import price_notes

            typer.echo(price_notes(records))
        if what is What.instances:
            typer.echo(
                f"{len(records)} instance types. cores/GPU: physical cores where the provider states them, "
                "else vCPUs / 2 (two hardware threads per core); they feed the CPU data loader. Sources: "
                "--format json."
            )


def _schemes(scheme: SchemeOpt, rules: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The schemes to tabulate: auto is ring under the modern rules (what a plan of optimize
    uses for a transformer), every scheme under a PALEO rule set."""
    if scheme is SchemeOpt.auto:
        return ("ring",) if rules == "modern" else tuple(names)
    return tuple(names) if scheme is SchemeOpt.all else (scheme.value,)
