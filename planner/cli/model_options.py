"""The cost-model options every command shares (`optimize`, `pareto`, `estimate`), declared once.

Defaults come from :mod:`planner.request.defaults`, so the commands cannot drift apart.
"""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from costs.comm.ranks import MEGATRON
from planner.cli.options import RulesOpt

PppComp = Annotated[
    float, typer.Option(help="PALEO rule sets: platform percent of peak for compute, in (0, 1].")
]
PppComm = Annotated[
    float, typer.Option(help="PALEO rule sets: platform percent of peak for communication, in (0, 1].")
]
Rules = Annotated[
    RulesOpt, typer.Option(help="Cost model: modern (calibrated roofline) or a PALEO rule set.")
]
MemoryHeadroom = Annotated[
    float | None,
    typer.Option(
        help="Share of each GPU's memory a plan may fill, in (0, 1] (default 0.9: the CUDA context, "
        "NCCL buffers and allocator slack take the rest; published recipes fit it)."
    ),
]
Calibration = Annotated[
    str | None,
    typer.Option(help="Calibration profile of the modern rules (`planner calibrate -o`); default: shipped."),
]
DataLoader = Annotated[
    str,
    typer.Option(
        help="Input pipeline bound (modern rules): cpu (JPEG decoding on the host's cores), dali (GPU "
        "decoding), none; auto: cpu for image sets read from storage (ImageNet), none otherwise."
    ),
]
Epochs = Annotated[
    float | None,
    typer.Option(
        help="Epochs to train (default: the net's, e.g. 90 for ImageNet, or --convergence's rule's)."
    ),
]
Convergence = Annotated[
    str,
    typer.Option(
        help="Epochs to the target by global batch: auto (goyal-2017 for ResNet-50/101 with SGD, else "
        "fixed), goyal-2017 (Goyal et al. 2017: 90 epochs to a batch of 8k, then the 8k run's steps), "
        "mlperf-lars (LARS: MLPerf Training's ResNet-50 reference convergence points), fixed (the net's "
        "own count or --epochs).",
    ),
]
ImageSize = Annotated[
    str | None,
    typer.Option(
        help="Vision nets (efficientnet, convnext, vit, swin): input side in px, square (default: the net's "
        "published size); FLOPs, activations and the loader's per-image work follow it. Or a progressive "
        "resizing schedule SIZE:FRACTION,... (fractions of the epochs, summing to 1; e.g. FFCV's ResNet-50 "
        "recipe 160:71/88,192:17/88): each phase's steps at its size, memory at the largest.",
        metavar="PX|SCHEDULE",
    ),
]
Stack = Annotated[
    str | None,
    typer.Option(
        help="Software stack the prediction is for (see `planner list stacks`): its calibration profile "
        "and the plans it can run. Default: megatron for transformers, optimized-cnn for CNNs."
    ),
]
Instance = Annotated[
    str | None,
    typer.Option(
        help="Rent only these instance types, e.g. aws/p4d.24xlarge (see `planner list instances`): "
        "their GPUs, node size, host CPU cores, NICs and price."
    ),
]
CpuCoresPerGpu = Annotated[
    float | None,
    typer.Option(
        help="Host CPU cores per GPU that decode the data (default: each instance's, or 14 on the "
        "assumed DGX H100-class host)."
    ),
]
Fabric = Annotated[
    str | None,
    typer.Option(
        help="Network between nodes (see `planner list fabrics`): its switch tiers, oversubscription and "
        "in-network reduction (default nonblocking: every GPU at its NIC's rate)."
    ),
]
RankOrder = Annotated[
    str | None,
    typer.Option(
        help="Rank order of the parallel groups, spelled as Megatron-Core's `order`: tp-cp-ep-dp-pp (default: "
        "the pipeline outermost) or tp-cp-ep-pp-dp (Llama 3's; Megatron-LM's --use-tp-pp-dp-mapping: each "
        "pipeline on consecutive GPUs, data parallelism outermost). It sets which switch domains a "
        "pipeline's sends and the gradient reductions cross on a --fabric; on the nonblocking fabric it "
        "changes nothing once TP x CP fill a node (below that it picks which of the two shares a node).",
        metavar="ORDER",
    ),
]
SeqLen = Annotated[int | None, typer.Option(help="Transformers: sequence length (default: the model's).")]
Attention = Annotated[
    str | None,
    typer.Option(
        help="Transformers: the run's attention kernel, standard (the s^2 softmax scores kept in memory; "
        "selective recomputation recomputes them) or flash (one fused kernel: no scores kept, a causal "
        "mask's masked tiles skipped). Default: the net spec's; the kernel belongs to the software, e.g. "
        "GPT-3 175B on Megatron-Core or NeMo with Transformer Engine runs flash.",
        metavar="KERNEL",
    ),
]
Nics = Annotated[
    int | None,
    typer.Option(help="NICs per node between nodes, each at --network's rate (default: each instance's)."),
]


RUN_KEYS = ("fabric", "rank_order", "attention")  # the run's options of run_parameters, as fields


def run_parameters() -> list[inspect.Parameter]:
    """`optimize` and `pareto`'s options of the run that are not the net's or a searched axis:
    --fabric, --rank-order and --attention, for a Typer command's signature."""
    kw = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter("fabric", kw, default=None, annotation=Fabric),
        inspect.Parameter("rank_order", kw, default=None, annotation=RankOrder),
        inspect.Parameter("attention", kw, default=None, annotation=Attention),
    ]


def run_fields(opts: dict) -> dict:
    """The request fields of --fabric, --rank-order and --attention in ``opts`` (defaults where
    absent; attention None: the net spec's kernel)."""
    return {
        "fabric": opts.get("fabric") or "nonblocking",
        "rank_order": opts.get("rank_order") or MEGATRON,
        "attention": opts.get("attention"),
    }
