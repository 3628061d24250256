"""Network specs: parse PALEO's JSON format, expand blocks, order layers, infer shapes.

The format is PALEO's (paleo-model.md §E.1): ``{"name": ..., "layers": {name: spec}}`` where
every spec has a ``type`` and ``parents``. ``Block`` namespaces its sublayers as ``block/sub``;
``ModelParallel`` is a block whose sublayers are copied ``splits`` times as ``block/sub@i``,
with ``x@self`` and ``x@all`` parents. A spec describes one sample: the ``Input`` tensor's
leading dimension is only the default batch.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from costs.errors import SpecError
from costs.specs import layers as layer_types
from costs.specs.nodes import Layer, Shape, ShapedLayer


@dataclass(frozen=True)
class Net:
    """A parsed network in topological order, with per-sample shapes."""

    name: str
    source: str
    layers: tuple[ShapedLayer, ...]
    default_batch: int
    meta: dict[str, Any] = field(compare=False, hash=False, default_factory=dict)

    def __getitem__(self, name: str) -> ShapedLayer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    @property
    def has_model_parallel(self) -> bool:
        return any(s.layer.device is not None for s in self.layers)


def load_spec(path: str | Path) -> dict[str, Any]:
    """Read a spec file; malformed JSON becomes a one-line :class:`SpecError`."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", source=str(path)) from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=str(path)
        ) from None
    return spec


def _check_layer_spec(name: str, spec: Any, source: str) -> None:
    if not isinstance(spec, dict):
        raise SpecError("a layer must be a JSON object", source=source, layer=name)
    if "type" not in spec:
        raise SpecError("missing 'type'", source=source, layer=name)
    parents = spec.get("parents")
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise SpecError("'parents' must be a list of layer names", source=source, layer=name)


def expand(spec: dict[str, Any], source: str) -> list[Layer]:
    """Flatten Blocks and ModelParallel blocks into layers with absolute parent names."""
    if not isinstance(spec, dict) or not isinstance(spec.get("layers"), dict):
        raise SpecError("a spec must be an object with a 'layers' object", source=source)
    out: list[Layer] = []
    endpoints: dict[str, list[str]] = {}  # block name -> the names its endpoint resolves to
    _expand_into(spec["layers"], "", (), None, out, endpoints, source)
    names = {layer.name for layer in out}

    def resolve(ref: str, owner: str) -> list[str]:
        if ref in names:
            return [ref]
        if ref in endpoints:
            return endpoints[ref]
        if ref.endswith("@all"):
            base = ref[: -len("@all")]
            copies = sorted(
                (n for n in names if n.rsplit("@", 1)[0] == base and "@" in n),
                key=lambda n: int(n.rsplit("@", 1)[1]),
            )
            if copies:
                return copies
        hint = difflib.get_close_matches(ref, sorted(names | set(endpoints)), n=3)
        also = f" (did you mean {', '.join(hint)}?)" if hint else ""
        raise SpecError(f"unknown parent '{ref}'{also}", source=source, layer=owner)

    resolved = []
    for layer in out:
        parents: list[str] = []
        for ref in layer.parents:
            for p in resolve(ref, layer.name):
                if p not in parents:
                    parents.append(p)
        resolved.append(Layer(layer.name, layer.type, tuple(parents), layer.spec, layer.device, layer.splits))
    return resolved


def _expand_into(
    layers: dict[str, Any],
    prefix: str,
    block_parents: tuple[str, ...],
    split: tuple[int, int] | None,
    out: list[Layer],
    endpoints: dict[str, list[str]],
    source: str,
) -> None:
    """Append the layers of one (possibly nested) block to ``out``."""
    local = set(layers)
    for name, spec in layers.items():
        full = prefix + name
        _check_layer_spec(full, spec, source)
        kind = spec["type"]
        parents = tuple(_local_ref(p, prefix, local, split) for p in spec["parents"]) or block_parents
        if kind in ("Block", "ModelParallel"):
            sub = spec.get("layers")
            if not isinstance(sub, dict) or not sub:
                raise SpecError(f"a {kind} needs a non-empty 'layers' object", source=source, layer=full)
            endpoint = spec.get("endpoint")
            if endpoint not in sub:
                raise SpecError(
                    f"endpoint {endpoint!r} is not one of the block's layers ({', '.join(sub)})",
                    source=source,
                    layer=full,
                )
            if kind == "Block":
                _expand_into(sub, full + "/", parents, split, out, endpoints, source)
                endpoints[full] = endpoints.get(full + "/" + endpoint, [full + "/" + endpoint])
            else:
                splits = spec.get("splits")
                if not isinstance(splits, int) or splits < 1:
                    raise SpecError("'splits' must be a positive integer", source=source, layer=full)
                for i in range(splits):
                    _expand_into(sub, full + "/", parents, (i, splits), out, endpoints, source)
                endpoints[full] = [f"{full}/{endpoint}@{i}" for i in range(splits)]
            continue
        if split is not None:
            out.append(Layer(f"{full}@{split[0]}", kind, parents, spec, split[0], split[1]))
        else:
            out.append(Layer(full, kind, parents, spec))


def _local_ref(ref: str, prefix: str, local: set[str], split: tuple[int, int] | None) -> str:
    """Turn a parent reference written inside a block into an absolute name."""
    base, _, tag = ref.partition("@")
    if base in local:
        if split is None:
            return prefix + ref
        if tag in ("", "self"):
            return f"{prefix}{base}@{split[0]}"
        return f"{prefix}{base}@{tag}"  # "all" or an explicit index
    return ref


def _index(layers: list[Layer], source: str) -> tuple[dict[str, Layer], dict[str, list[str]]]:
    """Layers by name (a repeated name is a :class:`SpecError`) and each layer's children."""
    by_name: dict[str, Layer] = {}
    for layer in layers:
        if layer.name in by_name:
            raise SpecError("duplicate layer name", source=source, layer=layer.name)
        by_name[layer.name] = layer
    children: dict[str, list[str]] = {name: [] for name in by_name}
    for layer in layers:
        for p in layer.parents:
            children[p].append(layer.name)
    return by_name, children


def toposort(layers: list[Layer], source: str) -> list[Layer]:
    """Kahn's algorithm, ties broken by file order; a cycle is a :class:`SpecError`."""
    by_name, children = _index(layers, source)
    order = {name: i for i, name in enumerate(by_name)}
    indeg = {name: len(layer.parents) for name, layer in by_name.items()}
    import heapq

    ready = [(order[n], n) for n, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    result: list[Layer] = []
    while ready:
        _, name = heapq.heappop(ready)
        result.append(by_name[name])
        for child in children[name]:
            indeg[child] -= 1
            if indeg[child] == 0:
                heapq.heappush(ready, (order[child], child))
    if len(result) != len(layers):
        stuck = sorted((n for n, d in indeg.items() if d > 0), key=order.get)
        raise SpecError(f"the layers form a cycle (involving {', '.join(stuck[:5])})", source=source)
    return result


def _shape(layer: Layer, in_shapes: tuple[Shape, ...], source: str, rules) -> Shape:
    """One layer's output shape under a rule set; every problem is a :class:`SpecError`."""
    if layer.type not in rules.layer_types:
        others = rules.others_supporting(layer.type)
        hint = f"; rules {', '.join(others)} support it" if others else ""
        raise SpecError(
            f"layer type '{layer.type}' is not supported by rules {rules.name} "
            f"(valid: {', '.join(sorted(rules.layer_types))}){hint}",
            source=source,
            layer=layer.name,
        )
    if layer.type != "Input" and not in_shapes:
        raise SpecError("a layer other than the Input needs a parent", source=source, layer=layer.name)
    try:
        out = layer_types.output_shape(layer, in_shapes, rules)
    except SpecError as exc:
        if exc.source is None:  # raised by a layer rule: add the file (and the layer)
            raise SpecError(exc.detail, source=source, layer=exc.layer or layer.name) from None
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise SpecError(f"bad or missing field: {exc}", source=source, layer=layer.name) from None
    if any(d <= 0 for d in out):
        raise SpecError(
            f"output shape {list(out)} is empty (inputs {[list(s) for s in in_shapes]})",
            source=source,
            layer=layer.name,
        )
    return out


def build_net(spec: dict[str, Any], source: str, rules) -> Net:
    """Expand, order and shape a spec under a rule set (which decides the layer types allowed)."""
    expanded = toposort(expand(spec, source), source)
    data = [layer for layer in expanded if layer.name == "data"]
    if not data or data[0].type != "Input":
        raise SpecError("a spec needs an Input layer named 'data'", source=source)
    shapes: dict[str, Shape] = {}
    shaped: list[ShapedLayer] = []
    for layer in expanded:
        in_shapes = tuple(shapes[p] for p in layer.parents)
        out = _shape(layer, in_shapes, source, rules)
        shapes[layer.name] = out
        shaped.append(ShapedLayer(layer, in_shapes, out))
    tensor = data[0].spec.get("tensor")
    default_batch = int(tensor[0]) if isinstance(tensor, list) and tensor and tensor[0] > 0 else 1
    meta = {k: v for k, v in spec.items() if k != "layers"}
    return Net(str(spec.get("name", source)), source, tuple(shaped), default_batch, meta)
