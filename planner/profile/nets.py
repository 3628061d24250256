"""The net a profile measures: a zoo net, a spec file or a Hugging Face config.json, with a
transformer's sequence length and attention kernel (and, for tests, its depth and vocabulary)
overridden.

Transformers are rebuilt from their ``model`` description (:mod:`costs.specs.transformer_spec`), so
an override changes the modelled net and the measured net alike. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from costs.rules import get_rules
from costs.specs import hf_config
from costs.specs.graph import Net, build_net, load_spec
from costs.specs.transformer_spec import build_layers, with_attention
from planner import catalog
from planner.errors import BadInput

RULES = "modern"  # the per-layer predictions are the modern rule set's


@dataclass(frozen=True)
class Overrides:
    """Changes to a transformer's model description; None keeps the spec's value."""

    seq_len: int | None = None
    n_layers: int | None = None
    vocab: int | None = None
    model: tuple[tuple[str, int], ...] = ()  # other model fields (tests build narrow copies)
    attention: str | None = None  # standard | flash (--attention); None: the spec's

    def any(self) -> bool:
        return bool(self.model) or any(v is not None for v in (self.seq_len, self.n_layers, self.vocab))


def _spec(name: str) -> tuple[dict, str]:
    path = catalog.net_path(name)
    spec = load_spec(path)
    if hf_config.is_hf_config(spec):
        spec = hf_config.to_spec(spec, path.name)
    return spec, path.name


def _model(spec: dict, over: Overrides, source: str) -> dict:
    model = dict(spec["model"])
    # Learned positions keep the spec's table size, so the parameters do not follow seq_len.
    model.setdefault("max_positions", model["seq_len"])
    for key in ("seq_len", "n_layers", "vocab"):
        value = getattr(over, key)
        if value is not None:
            if value < 1:
                raise BadInput(f"--{key.replace('_', '-')} must be a positive integer, got {value}")
            model[key] = value
    model.update(dict(over.model))
    learned = model.get("positional", "learned") == "learned"
    if learned and model["seq_len"] > model["max_positions"]:
        raise BadInput(
            f"--seq-len {model['seq_len']} exceeds the {model['max_positions']} learned positions of {source}"
        )
    return model


def load(name: str, over: Overrides | None = None) -> Net:
    """The shaped net under the modern rules (a SpecError or BadInput names what is wrong)."""
    over = over or Overrides()
    spec, source = _spec(name)
    if over.attention is not None:  # estimate's --attention checks: a bad kernel or a CNN is one line
        spec = with_attention(spec, over.attention, source)
    if "model" in spec:
        model = _model(spec, over, source)
        spec = {**spec, "model": model, "layers": build_layers(model)}
    elif over.any():
        raise BadInput(f"{source} is not a transformer: --seq-len applies to transformer nets only")
    return build_net(spec, source, get_rules(RULES))


def is_transformer(net: Net) -> bool:
    return "model" in net.meta


def display_name(name: str) -> str:
    """The net as rows name it: a zoo key, else the file name."""
    path = Path(name)
    return path.name if path.suffix == ".json" else name
