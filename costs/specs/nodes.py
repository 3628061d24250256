"""The nodes of a network graph: layers before and after shape inference (value objects).

Kept apart from :mod:`costs.specs.graph` (which parses and shapes specs with the layer rules of
:mod:`costs.specs.layers`) so that the layer rules can name these types without an import cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from costs.errors import SpecError

Shape = tuple[int, ...]  # per-sample shape, batch axis left out: (H, W, C) or (D,)


@dataclass(frozen=True)
class Layer:
    """One layer after block expansion. ``device`` is the split index of a model-parallel copy."""

    name: str
    type: str
    parents: tuple[str, ...]
    spec: dict[str, Any] = field(compare=False, hash=False)
    device: int | None = None
    splits: int = 1


@dataclass(frozen=True)
class ShapedLayer:
    """A layer with its input and output shapes resolved (per sample)."""

    layer: Layer
    in_shapes: tuple[Shape, ...]
    out_shape: Shape

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def type(self) -> str:
        return self.layer.type


def prod(shape) -> int:
    """Number of elements of a per-sample shape."""
    return math.prod(int(d) for d in shape)


def one_input(layer: Layer, in_shapes) -> Shape:
    """The single parent shape of a layer that takes one input (else a SpecError)."""
    if len(in_shapes) != 1:
        raise SpecError(f"{layer.type} takes one parent, got {len(in_shapes)}", layer=layer.name)
    return in_shapes[0]
