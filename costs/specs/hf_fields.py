"""Typed reads of a Hugging Face ``config.json`` field: one-line :class:`SpecError` naming it."""

from __future__ import annotations

from typing import Any

from costs.errors import SpecError


def as_int(cfg: dict, key: str, default: Any = None) -> int:
    """A positive integer field; ``default`` when absent (required when ``default`` is None)."""
    if key not in cfg and default is None:
        raise SpecError(f"config field '{key}' is missing")
    value = cfg.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise SpecError(f"config field '{key}' must be a positive integer, got {value!r}")
    return value


def as_bool(cfg: dict, key: str, default: bool) -> bool:
    """A true/false field; ``default`` when absent."""
    value = cfg.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"config field '{key}' must be true or false, got {value!r}")
    return value


def optional_int(cfg: dict, key: str, default: int | None = None) -> int | None:
    """A positive integer field that may be null (None); ``default`` when absent."""
    if cfg.get(key, default) is None:
        return None
    return as_int(cfg, key, default)


def choice(cfg: dict, key: str, valid: tuple[str, ...], default: str) -> str:
    """A string field with a fixed set of values."""
    value = cfg.get(key, default)
    if value not in valid:
        which = valid[0] if len(valid) == 1 else f"one of {', '.join(valid)}"
        raise SpecError(f"config field '{key}' must be {which}, got {value!r}")
    return value
