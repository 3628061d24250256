"""Rule sets: the knobs that make the evaluator reproduce one version of PALEO.

PALEO's FLOP and time rules changed once after the paper (commit 676f3ff, 2017-01-11).
``paleo-2016`` follows the initial release (b12c04b), which produced the authors' published
web-demo numbers; ``paleo-2018`` follows the final code (984bbf5). The differences are all
listed here, as flags, so that each quirk is named once and applied where the flag is read.
Both share PALEO's unit conventions: device memory bandwidth is *labelled* GB/s but used as
GiB/s (``bytes / 2**30 / bw``), network bandwidth is decimal, and the weight update ignores
PPP_comp (Qi et al. 2017; paleo-model.md §A.3, §A.5, §B.5).

``planner`` is PALEO's model with those defects fixed (paleo-model.md, "Known defects"): one
decimal unit convention, gradients costed as GEMMs, the update under PPP_comp, unpadded reads.
It reproduces no published number; it is the better estimate for today's hardware.

``modern`` shares ``planner``'s shapes but is scored by :mod:`costs.modern.evaluator`: a roofline per
layer and phase with achievable rates (:mod:`costs.modern.efficiency`), every memory-bound layer and
the optimizer step counted, kernel and framework overheads, and alpha-beta collectives
overlapped with the backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from costs.specs.transformer import TYPES as _TRANSFORMER_TYPES
from costs.specs.vision import TYPES as _VISION_TYPES

# Layer types of PALEO's initial release (paleo-model.md §E.1).
_TYPES_2016 = frozenset({"Input", "Convolution", "Pooling", "AvgPool", "Dropout", "Concatenate", "Softmax"})
# Types added by later commits; "Generic" stands for zero-cost pass-throughs such as BatchNorm.
_TYPES_2018 = _TYPES_2016 | frozenset(
    {
        "Elementwise",
        "InnerProduct",
        "Deconvolution",
        "Reshape",
        "Sigmoid",
        "UpSampling2D",
        "Generic",
        "BatchNorm",
        "ReLU",
        "Tanh",
    }
)


@dataclass(frozen=True)
class Rules:
    """One PALEO rule set. Flags are named for the quirk they switch on."""

    name: str
    description: str
    layer_types: frozenset[str]
    # Forward GEMM reads the padded input (2018) or the unpadded one (2016).
    read_padded_input: bool
    # SAME padding per side: TensorFlow's ((oh-1)*s + k - H)//2 (2018) or ((H-1)*s + k - H)//2
    # (2016), which is wrong for strided convolutions (paleo-model.md §A.4.1).
    tf_same_padding: bool
    # Odd-padding fix of the gradient convolution: when |before-after| == 1 (2018) or only
    # when before == after - 1 (2016); gradient padding min(before, after) (2018) or before (2016).
    symmetric_odd_fix: bool
    # Backward-data records the inserted zeros as "holes in inputs" and adds their FLOPs (2018).
    count_input_holes: bool
    # Backward-filter of a VALID layer stays VALID (2018) or takes the layer's padding (2016).
    valid_filter_grad: bool
    # Bytes per "GB" of device memory bandwidth: PALEO divides bytes by 2**30 (§B.5 item 1).
    mem_bytes_per_gb: float = float(2**30)
    # PALEO costs the weight update with PPP_comp fixed at 1.0 (§A.5, F.9).
    update_ignores_ppp: bool = True
    # Cost both gradients as GEMMs with the forward's FLOPs (im2col / col2im, as cuDNN and
    # cuBLAS compute them) instead of PALEO's dummy full convolutions, which count the zeros
    # inserted for strides and cost an FC-as-conv layer's data gradient kh*kw times its
    # forward (25x for AlexNet fc6; paleo-model.md §A.4.3, F.6).
    gemm_backward: bool = False
    # Score with the modern evaluator (costs.modern.evaluator) instead of PALEO's terms.
    modern: bool = False
    # With pipelining, PALEO bounds a layer's whole backward pass at once: it adds the data
    # and filter gradients' compute times, and their memory times, and takes the larger sum
    # (TimeMeasure.__add__ then .lowerbound, paleo/profilers/base.py and simulation.py, both
    # b12c04b and 984bbf5). One gradient's memory traffic thus hides behind the other's
    # compute. Off: each gradient kernel is bounded on its own, max(C, M) per phase. The two
    # differ only when one gradient is memory-bound and the other compute-bound, e.g. an FC
    # layer's weight-bound gradients at the small per-worker batches of strong scaling.
    pipeline_whole_backward: bool = False

    def others_supporting(self, layer_type: str) -> list[str]:
        """Names of the registered rule sets that accept ``layer_type`` (for error hints)."""
        return [r.name for r in RULES.values() if layer_type in r.layer_types]


PALEO_2018 = Rules(
    name="paleo-2018",
    description="PALEO's final code (984bbf5, 2018-03-19): TF padding, later layer types",
    layer_types=_TYPES_2018,
    read_padded_input=True,
    tf_same_padding=True,
    symmetric_odd_fix=True,
    count_input_holes=True,
    valid_filter_grad=True,
    pipeline_whole_backward=True,
)

PALEO_2016 = Rules(
    name="paleo-2016",
    description="PALEO's initial release (b12c04b, 2016-12-05): the authors' published demo values",
    layer_types=_TYPES_2016,
    read_padded_input=False,
    tf_same_padding=False,
    symmetric_odd_fix=False,
    count_input_holes=False,
    valid_filter_grad=False,
    pipeline_whole_backward=True,
)

PLANNER = Rules(
    name="planner",
    description="PALEO with its defects fixed: decimal units, GEMM-cost gradients, update with PPP",
    layer_types=_TYPES_2018 | _TRANSFORMER_TYPES | _VISION_TYPES,
    read_padded_input=False,
    tf_same_padding=True,
    symmetric_odd_fix=True,
    count_input_holes=False,
    valid_filter_grad=True,
    mem_bytes_per_gb=1e9,
    update_ignores_ppp=False,
    gemm_backward=True,
)

# The modern rules read nets as `planner` does (same shapes, FLOPs and bytes) and score them
# with costs.modern.evaluator instead of PALEO's terms.
MODERN = replace(
    PLANNER,
    name="modern",
    description="Roofline per layer with achievable rates, kernel overheads, overlapped alpha-beta collectives",
    modern=True,
)

RULES: dict[str, Rules] = {r.name: r for r in (PALEO_2018, PALEO_2016, PLANNER, MODERN)}


def get_rules(name: str) -> Rules:
    """Return the rule set called ``name``; raise with the valid names otherwise."""
    from costs.errors import PlannerError

    try:
        return RULES[name]
    except KeyError:
        raise PlannerError(f"unknown rule set '{name}' (valid: {', '.join(RULES)})") from None
