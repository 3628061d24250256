"""Keeping a search to plans a launch target runs (`planner optimize --target T`).

Each target declares, per search axis, the choices its engine takes (:attr:`Target.axes`,
option text as `planner optimize` reads it); the search's axis options become the
intersection of the user's and every named target's. A target whose rules couple two axes
may then keep the options to one region it runs whole (:meth:`Target.couple`: accelerate keeps
ZeRO 2 and 3 when tensor or context parallelism is searched); other couplings (Megatron-LM's
FSDP2 without pipeline parallelism, say) are not axis choices: the targets' refusals still check
the plan the search returns.
"""

from __future__ import annotations

from planner.errors import BadInput
from planner.launch.registry import engine_for, parse_targets


def _choices(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _engines(targets) -> list:
    """The engines of a target list; a scheduler adds the engine it wraps."""
    engines = {t.name: t for t in targets if not t.scheduler}
    if any(t.scheduler for t in targets):
        first = engine_for(targets)
        engines.setdefault(first.name, first)
    return list(engines.values())


def _narrow(name: str, current: str, allowed: tuple[str, ...], target: str) -> str:
    """The choices of ``current`` (option text) that ``allowed`` keeps."""
    keep = [c for c in _choices(current) if c in allowed]
    if not keep:
        raise BadInput(
            f"--{name.replace('_', '-')} {current}: --target {target} runs none of it (it takes: {', '.join(allowed)})"
        )
    return ",".join(keep)


def restrict_axes(net: str, targets_text: str, given: dict[str, str | None]) -> dict[str, str]:
    """The axis options (name -> text) that keep a search on ``net`` to plans every target of
    ``targets_text`` runs, starting from the user's options ``given``; transformer nets only
    (a CNN's model-parallel axes have one choice already)."""
    from planner import catalog

    targets = parse_targets(targets_text)
    out = {k: v for k, v in given.items() if v is not None}
    if not catalog.net_spec(net).get("model"):
        return out
    for t in _engines(targets):
        for axis, allowed in t.takes().items():
            out[axis] = _narrow(axis, out[axis], allowed, t.name) if axis in out else ",".join(allowed)
        out = t.couple(out)
    return out
