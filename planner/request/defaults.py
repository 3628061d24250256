"""Defaults shared by every command (optimize, pareto, sweep, estimate): one place, one set.

The cost model is the ``modern`` rule set with the shipped calibration profile, in the
precision a GPU trains in today (``auto``: bf16 mixed precision where the device has it, else
fp16 tensor cores, else fp32). PALEO's rule sets keep their own knobs, PPP_comp and PPP_comm,
defaulting to the values of PALEO's own profiler, 0.62 and 0.72 (paleo-model.md §A.10).
"""

from __future__ import annotations

RULES = "modern"
PRECISION = "auto"
PPP_COMP = 0.62
PPP_COMM = 0.72
NETWORK = "eth100"  # 100 Gbit/s Ethernet between nodes
OPTIMIZER = "auto"  # Adam for transformers (GPT-3, BERT and Llama train with Adam/AdamW), else
# SGD with momentum, as the zoo's CNNs train
OPTIMIZERS = ("auto", "sgd", "momentum", "adam")
DEVICE = "H100_SXM"  # `planner estimate` without --device
DATA_LOADER = "auto"  # a CPU JPEG loader for image sets read from storage, none otherwise


# FP8 training is Transformer Engine's, for the linear layers of transformers (costs.hardware)
FP8_CNN = (
    "--precision fp8 applies to transformers (Transformer Engine runs their linear layers in FP8); "
    "a CNN trains in fp32, tf32, fp16 or bf16"
)


def optimizer(name: str, transformer: bool, published: str = "") -> str:
    """The optimizer ``auto`` stands for: the net's published one (its spec's training
    section), else adam for a transformer, momentum otherwise."""
    if name != "auto":
        return name
    return published or ("adam" if transformer else "momentum")
