"""Epochs to a target accuracy as a function of the global batch and the optimizer.

A net's fixed epoch count makes a larger global batch free: the same epochs in fewer, larger
steps. Published studies say otherwise past a point, so for the nets with a cited schedule the
epochs follow the batch:

``goyal-2017`` (SGD with momentum; the planner's ``auto``, ``sgd`` and ``momentum`` optimizers)
    Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
    arXiv:1706.02677 (2017): with the linear learning-rate scaling rule and 5 epochs of gradual
    warmup, ResNet-50 trained for 90 epochs loses no accuracy "with large minibatch sizes up to
    8192 images" (abstract); past 8k the 90-epoch error rises. Past 8,192 the rule keeps the
    number of optimizer steps of the 8k run (90 x 1,281,167 / 8,192 steps), so epochs grow with
    the batch: Shallue et al., "Measuring the Effects of Data Parallelism on Neural Network
    Training", JMLR 20(112), 2019, find that steps to a goal error stop falling beyond a
    workload's largest useful batch (their "maximal data parallelism" regime). This is the
    optimistic reading: a batch past 8k costs at least that many steps.
``mlperf-lars`` (LARS: You, Gitman and Ginsburg, "Large Batch Training of Convolutional
    Networks", arXiv:1708.03888, 2017)
    MLPerf Training's reference convergence points for ResNet-50 v1.5 to 75.9% top-1 with LARS:
    the mean epochs to converge of each reference batch size (1,632 to 67,840), linear in
    log(batch) between them, flat outside (the answer says when a batch lies outside).

Nets without a cited schedule (every net but ResNet-50 and ResNet-101, and any net trained with
Adam) keep their spec's fixed epochs, and the answer says so. ``--epochs`` overrides every rule.

``--convergence`` picks the rule (:data:`CHOICES`): ``auto`` (goyal-2017 for SGD where it covers
the net, else fixed), a rule by name (refused, in one line, for a net or optimizer its study did
not train), or ``fixed`` (the net's own count, or ``--epochs``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GOYAL_EPOCHS = 90.0  # Goyal et al. 2017, section 5.1: 90 epochs for every minibatch size
GOYAL_MAX_BATCH = 8192  # ... no loss of accuracy up to 8,192 images (abstract)
GOYAL_SOURCE = (
    "Goyal et al. 2017, arXiv:1706.02677: 90 epochs, linear LR scaling + 5-epoch warmup, no "
    "accuracy loss up to a global batch of 8,192; past it, the 8k run's step count (Shallue et al. "
    "2019, JMLR 20(112): steps to a goal stop falling past the largest useful batch)"
)
# MLPerf Training reference convergence points, ResNet-50 v1.5 to 75.9% top-1 with LARS:
# batch size -> "Epochs to converge" of every reference run, as printed in
# https://github.com/mlcommons/logging/blob/0a0a659d895eb34818bd929f76acdd616f8de3ee/mlperf_logging/rcp_checker/training_4.0.0/rcps_resnet.json
# (read 2026-11-24).
MLPERF_RCP_EPOCHS: dict[int, tuple[int, ...]] = {
    1632: (34, 34, 34, 35, 35, 37, 35, 35, 33, 35, 35, 37, 37, 35, 35, 34, 35),
    3264: (36, 35, 34, 34, 36, 35, 35, 35, 35, 37, 35, 35, 35, 36, 35),
    4096: (39, 42, 40, 41, 39, 40, 41, 39, 40, 39),
    8192: (42, 44, 43, 41, 41, 41, 42, 42, 43, 41),
    13056: (46, 46, 44, 46, 45, 46, 45, 45, 45, 46),
    32768: (56, 56, 55, 56, 56, 56, 56, 56, 57, 56),
    49152: (68, 68, 68, 68, 69, 68, 68, 67, 69, 67),
    58880: (80, 81, 80, 78, 80, 80, 81, 79, 80, 80),
    65536: (83, 85, 84, 86, 85, 85, 83, 84, 85, 85),
    67840: (86, 87, 86, 87, 86, 85, 86, 86, 86, 85, 86, 86, 86, 86, 86, 85)
    + (86, 86, 87, 85, 85, 86, 85, 87, 86, 85, 85, 86),
}
MLPERF_SOURCE = (
    "MLPerf Training reference convergence points, ResNet-50 v1.5 to 75.9% top-1 with LARS "
    "(You et al. 2017, arXiv:1708.03888), mlcommons/logging rcp_checker/training_4.0.0/rcps_resnet.json "
    "@0a0a659 (read 2026-11-24)"
)
# Nets the studies trained: Goyal et al. 2017 report ResNet-50 and ResNet-101 at up to 8k;
# MLPerf's references are ResNet-50 v1.5.
_NETS = {"goyal-2017": ("resnet50", "resnet101"), "mlperf-lars": ("resnet50",)}
RULES = ("goyal-2017", "mlperf-lars")
CHOICES = ("auto", *RULES, "fixed")  # --convergence
_SGD = ("auto", "sgd", "momentum")  # the optimizers both studies used (LARS is momentum SGD per layer)


@dataclass(frozen=True)
class EpochsRule:
    """Epochs to the target of a cited study, as a function of the global batch (samples)."""

    name: str  # one of RULES
    source: str

    def epochs(self, global_batch) -> np.ndarray:
        """Epochs for each global batch (samples per optimizer step), arrays of any shape."""
        b = np.asarray(global_batch, dtype=float)
        if self.name == "goyal-2017":
            return GOYAL_EPOCHS * np.maximum(b / GOYAL_MAX_BATCH, 1.0)
        sizes = np.array(sorted(MLPERF_RCP_EPOCHS), dtype=float)
        means = np.array([np.mean(MLPERF_RCP_EPOCHS[int(s)]) for s in sizes])
        return np.interp(np.log(b), np.log(sizes), means)

    def cited_range(self) -> tuple[int, int]:
        """The global batches (samples) the study measured."""
        if self.name == "goyal-2017":
            return 256, GOYAL_MAX_BATCH  # Goyal et al.'s runs span 64 to 65,536; no loss to 8k
        return min(MLPERF_RCP_EPOCHS), max(MLPERF_RCP_EPOCHS)

    def describe(self, global_batch: int) -> str:
        """A short line for the answer: the rule, the batch it was applied at and the citation's
        short form; the full citation is :attr:`source`."""
        lo, hi = self.cited_range()
        short = "Goyal et al. 2017 + Shallue et al. 2019" if self.name == "goyal-2017" else "MLPerf RCP, LARS"
        where = ""
        if self.name == "mlperf-lars" and not lo <= global_batch <= hi:
            where = f"; outside the reference batches {lo:,}-{hi:,}: the nearest's epochs"
        if self.name == "goyal-2017" and global_batch > hi:
            where = f"; past {hi:,}: the {hi:,} run's step count"
        return f"{self.name} at global batch {global_batch:,}, {short}{where}"


def rule_for(net: str, optimizer: str, name: str = "auto") -> EpochsRule | None:
    """The epochs rule of a net trained with ``optimizer`` (``auto``, ``sgd``, ``momentum``,
    ``adam``), or None where no cited study covers the pair: the net keeps its fixed epochs.
    ``name`` picks a rule (``auto``: goyal-2017 for SGD)."""
    if name == "auto":
        name = "goyal-2017" if optimizer in ("auto", "sgd", "momentum") else ""
    if name not in RULES or net not in _NETS[name]:
        return None
    return EpochsRule(name, GOYAL_SOURCE if name == "goyal-2017" else MLPERF_SOURCE)


def resolve(choice: str, net: str, optimizer: str, epochs: float | None = None) -> EpochsRule | None:
    """The rule ``--convergence`` asks for: ``auto`` as :func:`rule_for` (None when ``--epochs``
    is given), ``fixed`` None, a named rule when its study trained ``net`` with ``optimizer``;
    else a one-line :class:`~planner.errors.BadInput` naming the option, the value and what is valid."""
    from planner.errors import BadInput

    if choice not in CHOICES:
        raise BadInput(f"--convergence '{choice}' (valid: {', '.join(CHOICES)})")
    if choice == "fixed" or (choice == "auto" and epochs is not None):
        return None
    if choice == "auto":
        return rule_for(net, optimizer)
    if epochs is not None:
        raise BadInput(f"--convergence {choice} with --epochs {epochs:g}: --epochs fixes the count; give one")
    if net not in _NETS[choice]:
        raise BadInput(
            f"--convergence {choice}: its study trained {', '.join(_NETS[choice])}, not '{net}' (valid for it: auto, fixed)"
        )
    if optimizer not in _SGD:
        raise BadInput(
            f"--convergence {choice} is for SGD with momentum (LARS for mlperf-lars), not --optimizer {optimizer} "
            "(valid: auto, sgd, momentum)"
        )
    return rule_for(net, optimizer, choice)
