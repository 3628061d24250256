"""The nodes of a network graph: layers before and after shape inference (value objects).

Kept apart from :mod:`costs.graph` (which parses and shapes specs with the layer rules of
:mod:`costs.layers`) so that the layer rules can name these types without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
