"""Per-layer cost coefficients, computed once per (net, rules, algorithm).

Every FLOP count and every byte count PALEO charges is an affine function of the batch per
worker ``n`` (shapes never depend on it), so each term is stored as ``a + b n``: the layer
functions are evaluated at ``n = 1`` and ``n = 2`` and the two results give ``a`` and ``b``.
Scoring then needs no per-layer Python work at all (see :mod:`costs.model`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from costs.errors import SpecError, UnsupportedError
from costs.specs import layers
from costs.specs.graph import Net
from costs.specs.layers import PHASES

_WEIGHTED = ("Convolution", "Deconvolution", "InnerProduct")


@dataclass(frozen=True)
class Terms:
    """Affine terms grouped by (layer, phase, variant); group g = (l * 3 + phase) * V + v."""

    a: np.ndarray
    b: np.ndarray
    group: np.ndarray  # sorted ascending

    @cached_property
    def starts(self) -> tuple[np.ndarray, np.ndarray]:
        uniq, start = np.unique(self.group, return_index=True)
        return uniq, start


@dataclass(frozen=True)
class NetCosts:
    """Everything the evaluator needs about one net under one rule set and algorithm."""

    net: Net
    rules: object
    algorithm: str
    variants: tuple[str, ...]  # ("gemm",), ("fft",) or ("gemm", "fft") for "best"
    flops: Terms
    bytes: Terms
    params: np.ndarray  # (L,) parameters per layer
    act_elems: np.ndarray  # (L,) output elements per sample
    gather_elems: np.ndarray  # (L,) input elements per sample of channel-mixing layers
    is_weighted: np.ndarray  # (L,) bool

    @property
    def n_layers(self) -> int:
        return len(self.net.layers)

    @property
    def n_groups(self) -> int:
        return self.n_layers * len(PHASES) * len(self.variants)

    @cached_property
    def total_params(self) -> int:
        return int(self.params.sum())

    @cached_property
    def params_before(self) -> np.ndarray:
        """(L+1,) parameters of the layers before each split point."""
        return np.concatenate([[0], np.cumsum(self.params)])

    @cached_property
    def act_before(self) -> np.ndarray:
        """(L+1,) activation elements per sample of the layers before each split point."""
        return np.concatenate([[0], np.cumsum(self.act_elems)])

    @cached_property
    def act_stored(self) -> float:
        """Activation elements per sample a framework keeps for the backward pass: every layer's
        output but those that are views of their input (a Reshape with as many elements: an
        identity shortcut or a flatten allocates nothing in PyTorch, MXNet or TensorFlow).
        PALEO's rules count every output (:attr:`act_before`); the modern rules count these."""
        view = np.array(
            [
                s.type == "Reshape"
                and len(s.in_shapes) == 1
                and np.prod(s.in_shapes[0]) == np.prod(s.out_shape)
                for s in self.net.layers
            ],
            dtype=bool,
        )
        return float(self.act_elems[~view].sum())

    @cached_property
    def gather_from(self) -> np.ndarray:
        """(L+1,) per-sample elements gathered by channel-mixing layers at or after a split."""
        return np.concatenate([np.cumsum(self.gather_elems[::-1])[::-1], [0]])

    @cached_property
    def weighted_from(self) -> np.ndarray:
        """(L+1,) number of channel-mixing layers at or after a split point."""
        return np.concatenate([np.cumsum(self.is_weighted[::-1])[::-1], [0]]).astype(float)

    def default_split(self) -> int:
        """The "one weird trick" boundary (Krizhevsky 2014): the first fully connected layer.

        A layer counts as fully connected when it is an InnerProduct, or a convolution whose
        output is 1 x 1 (an FC layer written as a convolution, as in PALEO's nets).
        """
        for i, s in enumerate(self.net.layers):
            if s.type == "InnerProduct" or (
                s.type == "Convolution" and len(s.out_shape) == 3 and s.out_shape[:2] == (1, 1)
            ):
                return i
        raise UnsupportedError(
            f"net '{self.net.name}' has no fully connected layer to start a hybrid split at"
        )

    def split_names(self) -> list[str]:
        """Names of the layers a hybrid split may start at (weighted layers)."""
        return [s.name for s in self.net.layers if s.type in _WEIGHTED]


def _work_at_1_and_2(s, rules, variant: str, source: str):
    """A layer's work at batch 1 and 2 (two points of each affine term)."""
    try:
        return layers.work(s, 1, rules, variant), layers.work(s, 2, rules, variant)
    except SpecError as exc:  # name the spec file too
        raise SpecError(exc.detail, source=source, layer=exc.layer or s.name) from None


def _affine(at1, at2, g: int, a: list, b: list, groups: list) -> None:
    """Append the terms a + b x batch through (1, at1) and (2, at2), each in group ``g``."""
    for x1, x2 in zip(at1, at2):
        a.append(2 * x1 - x2)
        b.append(x2 - x1)
        groups.append(g)


def build(net: Net, rules, algorithm: str = "gemm") -> NetCosts:
    """Collect every layer's FLOP and byte terms as affine functions of the batch."""
    if algorithm not in layers.ALGORITHMS:
        raise UnsupportedError(
            f"unknown convolution algorithm '{algorithm}' (valid: {', '.join(layers.ALGORITHMS)})"
        )
    variants = ("gemm", "fft") if algorithm == "best" else (algorithm,)
    nv = len(variants)
    fa, fb, fg, ba, bb, bg = [], [], [], [], [], []
    for li, s in enumerate(net.layers):
        for vi, variant in enumerate(variants):
            w1, w2 = _work_at_1_and_2(s, rules, variant, net.source)
            for pi, phase in enumerate(PHASES):
                if phase not in w1:
                    continue
                g = (li * len(PHASES) + pi) * nv + vi
                _affine(w1[phase].flops, w2[phase].flops, g, fa, fb, fg)
                _affine(w1[phase].bytes, w2[phase].bytes, g, ba, bb, bg)
    arr = lambda v, t=float: np.asarray(v, dtype=t)

    def terms(a, b, g) -> Terms:
        order = np.argsort(arr(g, np.int64), kind="stable")
        return Terms(arr(a)[order], arr(b)[order], arr(g, np.int64)[order])

    params = arr([layers.params(s) for s in net.layers], np.int64)
    act = arr([int(np.prod(s.out_shape)) for s in net.layers], np.int64)
    weighted = np.array([s.type in _WEIGHTED for s in net.layers])
    gather = np.array(
        [int(np.prod(s.in_shapes[0])) if w else 0 for s, w in zip(net.layers, weighted)],
        dtype=np.int64,
    )
    return NetCosts(
        net,
        rules,
        algorithm,
        variants,
        terms(fa, fb, fg),
        terms(ba, bb, bg),
        params,
        act,
        gather,
        weighted,
    )
