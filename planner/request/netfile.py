"""A net's spec file read and held to the shape bounds before any layer is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from costs.errors import SpecError
from planner.request.bounds import check_model, check_spec_layers
from planner.request.files import read_json


def read_net(path: str | Path) -> dict[str, Any]:
    """A spec file (a zoo net, a layer spec or a Hugging Face config.json) as a layer spec:
    read through the bounded reader, its model description within the shape bounds of
    :mod:`planner.request.bounds` (a config.json is checked before its layers are built)."""
    from costs.specs import hf_config

    name = Path(path).name
    spec = read_json(path, "spec file", SpecError)
    if hf_config.is_hf_config(spec):
        model = hf_config.to_model(spec)
        if spec.get("head_dim") is None:  # the config states no head size: heads split the width
            model = {k: v for k, v in model.items() if k != "head_dim"}
        check_model(model, name)
        spec = hf_config.to_spec(spec, name)
    check_model(spec.get("model") if isinstance(spec, dict) else None, name)
    check_spec_layers(spec, name)
    return spec
