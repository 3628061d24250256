"""Progressive resizing: ``--image-size`` as a schedule of (size, share of the epochs) phases.

Training a vision net on small images first and the published size last trains faster for the
same accuracy. Two published ResNet-50 schedules, as this option writes them:

- fast.ai and DIU's ImageNet runs ("Now anyone can train Imagenet in 18 minutes",
  https://www.fast.ai/posts/2018-08-10-fastai-diu-imagenet.html; code
  https://github.com/cybertronai/imagenet18 @218ef7e, ``train.py`` ``eight_machines``, "19:04 to
  93.0" top-5 on 8 x p3.16xlarge; read 2026-11-25): 128 px for epochs 0-13, 224 px for 14-28,
  288 px for 29-34, 35 epochs in all (``training/train_imagenet_nv.py``: the last phase's end
  epoch): ``--image-size 128:2/5,224:3/7,288:6/35``.
- FFCV's ``rn50_configs/rn50_88_epochs.yaml`` (https://github.com/libffcv/ffcv-imagenet @5bab20e,
  read 2026-11-25): 88 epochs, ``min_res`` 160, ``max_res`` 192, a ramp from epoch 65 to 76 rounded
  to multiples of 32 px (``train_imagenet.py`` ``get_resolution`` @606c584): 71 epochs at 160 px,
  17 at 192 px: ``--image-size 160:71/88,192:17/88``.

A schedule is ``SIZE:FRACTION,...``: each size in px a side, each fraction the share of the
epochs trained at it (a decimal or ``p/q``), the fractions summing to exactly 1. The time to
train is the sum over phases of epochs x fraction x steps per epoch x the step time at that size
(:func:`blend`): every phase keeps the plan's batch, so the steps per epoch are the same and the
step times average with the fractions as weights; memory is that of the largest size (its
activations and, for a ViT, its position table). The published recipes also change the batch or
learning rate per phase (fast.ai's did); a plan here keeps one batch throughout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from planner.errors import BadInput

MAX_PHASES = 8  # each phase is one evaluator call per batch of plans
MAX_TEXT = 200  # characters of a schedule
EXAMPLE = "128:0.4,192:0.4,224:0.2"
_INT = re.compile(r"[+-]?\d{1,9}")
_FRACTION = re.compile(r"(\d{1,6}(?:\.\d{1,6})?|\d{1,6}/[1-9]\d{0,5})")


@dataclass(frozen=True)
class Phase:
    """``fraction`` of the epochs trained at ``size`` px a side."""

    size: int
    fraction: Fraction


@dataclass(frozen=True)
class Schedule:
    """Phases in training order; fractions positive, summing to exactly 1, each size once."""

    phases: tuple[Phase, ...]

    @property
    def text(self) -> str:
        """The canonical ``SIZE:FRACTION,...`` text (parses back to an equal schedule)."""
        return ",".join(f"{p.size}:{_fraction_text(p.fraction)}" for p in self.phases)

    @property
    def largest(self) -> int:
        """The largest size (px): the one memory must fit."""
        return max(p.size for p in self.phases)

    @property
    def weights(self) -> np.ndarray:
        """Each phase's share of the epochs (and of the optimizer steps), as floats."""
        return np.array([float(p.fraction) for p in self.phases])


def _fraction_text(f: Fraction) -> str:
    """A decimal where one is exact (denominator of 2s and 5s only), else ``p/q``."""
    d = f.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d != 1:
        return f"{f.numerator}/{f.denominator}"
    text = format(Decimal(f.numerator) / Decimal(f.denominator), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _bad(value: str, why: str) -> BadInput:
    return BadInput(
        f"--image-size '{value}': {why} (a size in px, or a schedule SIZE:FRACTION,... whose fractions "
        f"of the epochs sum to 1, e.g. {EXAMPLE})"
    )


def parse(value: int | str | None) -> int | Schedule | None:
    """``--image-size`` as given: None (the net's size), one size (an int) or a :class:`Schedule`.
    Sizes are checked against the net later (costs.specs.vision_nets.check_image_size); here the
    form: at most :data:`MAX_PHASES` phases, fractions in (0, 1] summing to exactly 1."""
    if value is None or isinstance(value, Schedule):
        return value
    if isinstance(value, bool):
        raise _bad(str(value), "not a size")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if _INT.fullmatch(text):
        return int(text)
    if ":" not in text:
        raise _bad(text, "not an integer")
    if len(text) > MAX_TEXT:
        raise _bad(text[:40] + "...", f"longer than {MAX_TEXT} characters")
    parts = text.split(",")
    if len(parts) > MAX_PHASES:
        raise _bad(text, f"{len(parts)} phases, at most {MAX_PHASES}")
    phases = tuple(_phase(text, part) for part in parts)
    sizes = [p.size for p in phases]
    if len(set(sizes)) != len(sizes):
        raise _bad(text, "each size may appear once")
    total = sum((p.fraction for p in phases), Fraction(0))
    if total != 1:
        raise _bad(text, f"fractions sum to {_fraction_text(total)}, not 1")
    return Schedule(phases)


def _phase(text: str, part: str) -> Phase:
    size, sep, frac = part.strip().partition(":")
    if not sep or not _INT.fullmatch(size.strip()) or not _FRACTION.fullmatch(frac.strip()):
        raise _bad(text, f"phase '{part.strip()}' is not SIZE:FRACTION")
    fraction = Fraction(frac.strip())
    if not 0 < fraction <= 1:
        raise _bad(text, f"fraction {frac.strip()} must be in (0, 1]")
    return Phase(int(size), fraction)


def largest(value: int | str | Schedule | None) -> int | None:
    """The size the net is built at for everything but the step time: the only size, or the
    schedule's largest."""
    parsed = parse(value)
    return parsed.largest if isinstance(parsed, Schedule) else parsed


def normal(value: int | str | Schedule | None) -> int | str | None:
    """``--image-size`` in its recorded form: None, the size as an int, or the schedule's
    canonical text (what answers, plan files and Reproduce lines carry)."""
    parsed = parse(value)
    return parsed.text if isinstance(parsed, Schedule) else parsed


def scales(meta_at: list[dict]) -> np.ndarray:
    """Pixels per image over the net's published size, per phase (from each phase's built net)."""
    out = []
    for meta in meta_at:
        vision = meta.get("vision") or {}
        native = vision.get("native_image_size") or vision.get("image_size") or 1
        out.append((vision.get("image_size", native) / native) ** 2)
    return np.array(out, dtype=float)


def blend(parts: list, weights: np.ndarray):
    """One breakdown for a schedule: each time the weighted mean of the phases' (weights: shares
    of the optimizer steps, summing to 1), so steps x mean = the sum over phases; bytes and
    parameter counts the largest phase's (memory must fit every phase); samples per step are
    the plan's, the same in every phase."""
    first = parts[0]
    out: dict[str, Any] = {}
    for f in fields(first):
        values = [getattr(p, f.name) for p in parts]
        if values[0] is None or f.name == "samples":
            continue
        if f.name.endswith("_bytes") or f.name.endswith("_params"):
            out[f.name] = np.maximum.reduce(values)
        else:
            out[f.name] = sum(w * v for w, v in zip(weights, values, strict=True))
    return replace(first, **out)


@dataclass(frozen=True)
class Resized:
    """A schedule with its net built at each phase's size (costs.specs.coefficients.NetCosts)."""

    schedule: Schedule
    costs: tuple

    @property
    def weights(self) -> np.ndarray:
        """Each phase's share of the optimizer steps."""
        return self.schedule.weights

    @property
    def scales(self) -> np.ndarray:
        """Each phase's pixels per image over the net's published size."""
        return scales([c.net.meta for c in self.costs])

    @property
    def mean_scale(self) -> float:
        """The mean pixels per image over the published size (weights: shares of the steps): a
        loader's mean seconds per image grow with it (planner.metrics.model)."""
        return float(np.dot(self.weights, self.scales))

    def models(self, model) -> list:
        """The cost model of each phase: its loader at the phase's pixels per image."""
        return [replace(model, image_scale=float(s)) for s in self.scales]


def mean_scale(resize: Resized | None) -> float | None:
    """A schedule's mean pixels per image over the published size; None for one size."""
    return resize.mean_scale if resize is not None else None


def phase_costs(value, net: str, rules: str, algorithm: str, seq_len: int | None) -> Resized | None:
    """A schedule's net at each phase's size; None for one size. Each phase's net has the same
    layers (only their shapes follow the size), so a plan's split index means the same layer in
    every phase."""
    parsed = parse(value)
    if not isinstance(parsed, Schedule):
        return None
    from planner import catalog

    built = tuple(catalog.net_costs(net, rules, algorithm, seq_len, p.size) for p in parsed.phases)
    if len({c.n_layers for c in built}) > 1:
        raise BadInput(f"--image-size '{parsed.text}': '{net}' has other layers at other sizes; use one size")
    return Resized(parsed, built)
