"""The fabric catalog (configs/fabrics.toml) and the ``--fabric`` option: which network between
nodes an answer assumes, checked against the plans it is asked for.

A fabric row becomes a :class:`costs.comm.fabric.Fabric` (SI units); ``nonblocking``, the default,
is the one flat network every estimate assumed before fabrics were modelled, and it leaves every
number as it was (the evaluator skips the fabric terms for it). ``--rank-order`` names how the
plan's parallel groups lie over the GPUs (:mod:`costs.comm.ranks`), which decides the domains
and nodes they cross; Megatron-Core's default leaves every number as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from costs.comm.fabric import Fabric, Tier
from costs.comm.ranks import MEGATRON, ORDERS, PP_INSIDE_DP
from costs.errors import SpecError
from planner import catalog
from planner.errors import BadInput, CatalogError

DEFAULT = "nonblocking"
DEFAULT_ORDER = MEGATRON  # --rank-order: Megatron-Core's default, the pipeline outermost
_ORDER_TEXT = {
    MEGATRON: "pipeline outermost, Megatron-Core's default",
    PP_INSIDE_DP: "pipeline inside data parallelism, Llama 3's",
}
_KEYS = {"name": str, "tiers": list, "hop_latency_us": float, "in_network_reduction": bool}
_TEXT = ("source", "url", "date_read")


@dataclass(frozen=True)
class FabricInfo:
    """One catalog row: its key, the cost model's :class:`Fabric`, and its citation."""

    key: str
    name: str
    fabric: Fabric
    source: str
    url: str
    date_read: str


def _check_keys(where: str, e: dict) -> None:
    """Every key of a row present, of its type, and no other."""
    if not isinstance(e, dict):
        raise CatalogError(f"{where} must be a table")
    for k, kind in _KEYS.items():
        value = e.get(k)
        number = kind is float and isinstance(value, int) and not isinstance(value, bool)
        if not (isinstance(value, kind) or number):
            raise CatalogError(f"{where} needs {k} ({kind.__name__})")
    missing = [k for k in _TEXT if not isinstance(e.get(k), str)]
    if missing:
        raise CatalogError(f"{where} needs {', '.join(missing)} (text)")
    extra = set(e) - set(_KEYS) - set(_TEXT) - {"gpus_max"}
    if extra:
        raise CatalogError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
    size = e.get("gpus_max")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise CatalogError(f"{where} gpus_max must be a positive integer, got {size!r}")


def _row(key: str, e: dict) -> FabricInfo:
    where = f"fabrics.toml: [{key}]"
    _check_keys(where, e)
    try:
        tiers = tuple(Tier(int(t["gpus"]), float(t["oversubscription"])) for t in e["tiers"])
        fab = Fabric(
            key, tiers, float(e["hop_latency_us"]) * 1e-6, e["in_network_reduction"], e.get("gpus_max")
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(f"{where} tiers need gpus and oversubscription ({exc})") from None
    except SpecError as exc:
        raise CatalogError(f"{where}: {exc}") from None
    return FabricInfo(key, e["name"], fab, e["source"], e["url"], e["date_read"])


@lru_cache(maxsize=1)
def fabrics() -> dict[str, FabricInfo]:
    """Every fabric of configs/fabrics.toml, by key (validated once)."""
    data = catalog.read_toml("fabrics.toml")
    out = {key: _row(key, e) for key, e in data.items()}
    if DEFAULT not in out or not out[DEFAULT].fabric.flat:
        raise CatalogError(f"fabrics.toml: [{DEFAULT}] must exist and be one flat network")
    return out


def get(name: str | None) -> FabricInfo:
    """The fabric called ``name`` (None: the default); a one-line BadInput naming the valid ones."""
    key = DEFAULT if name is None else str(name)
    table = fabrics()
    if key not in table:
        raise BadInput(f"--fabric {key!r} is not in fabrics.toml (valid: {', '.join(table)})")
    return table[key]


def check_size(name: str | None, gpus: int | None, what: str) -> None:
    """Refuse ``gpus`` GPUs (asked for by option ``what``; None: no count asked) on a fabric that
    connects fewer; an unknown fabric name is refused too."""
    info = get(name)
    size = info.fabric.max_gpus
    if size is not None and gpus is not None and gpus > size:
        raise BadInput(
            f"--fabric {info.key} connects at most {size:,} GPUs (fabrics.toml gpus_max); "
            f"{what} asks for {gpus:,} (valid: 1-{size})"
        )


def rank_order(name: str | None) -> str:
    """The rank order called ``name`` (None: Megatron-Core's default); a one-line BadInput
    naming the valid ones."""
    key = MEGATRON if name is None else str(name)
    if key not in ORDERS:
        raise BadInput(f"--rank-order '{key}' (valid: {', '.join(ORDERS)})")
    return key


def describe_order(order: str | None) -> str:
    """One line for an answer: the rank order it assumes."""
    order = order or MEGATRON
    return f"Rank order: {order} ({_ORDER_TEXT[order]})."


def describe(name: str | None) -> str:
    """One line for an answer: the fabric it assumes."""
    info = get(name)
    if info.fabric.flat:
        return f"Fabric: {info.key} (every GPU at its NIC's rate across nodes)."
    tiers = ", ".join(f"{t.gpus:,}-GPU domains at 1:{t.oversubscription:g}" for t in info.fabric.tiers)
    sharp = "; in-network reduction (SHARP)" if info.fabric.in_network_reduction else ""
    return f"Fabric: {info.key} ({tiers}{sharp}; {info.url})."


def answer_lines(records: list[dict]) -> list[str]:
    """The fabric line of an estimate's answer: its named fabric, or the default where a row
    crosses nodes (none for answers inside one node under the default), and its rank order."""
    name = records[0].get("fabric") if records else None
    order = records[0].get("rank_order") if records else None  # recorded when not the default
    crosses = any(r.get("workers", 1) > r.get("gpus_per_node", 1) for r in records)
    piped = any(r.get("pp", 1) > 1 for r in records)
    return network_lines(name, order, piped) if name or crosses else []


def network_lines(name: str | None, order: str | None, pipeline: bool = False) -> list[str]:
    """The fabric's line and the rank order's: always when one is named, and for a pipeline in
    Megatron-Core's default too (the order decides which GPUs its sends and the gradient
    reductions cross; without a pipeline both orders lay the groups alike)."""
    return [describe(name)] + ([describe_order(order)] if order or pipeline else [])


def listing() -> tuple[list[dict], list[tuple[str, str]]]:
    """`planner list fabrics`: one record per fabric, units in the keys."""
    recs = [
        {
            "fabric": f.key,
            "name": f.name,
            "gpus_max": f.fabric.max_gpus if f.fabric.max_gpus is not None else "-",
            "tier_gpus": "/".join(str(t.gpus) for t in f.fabric.tiers) or "-",
            "oversubscription": "/".join(f"{t.oversubscription:g}" for t in f.fabric.tiers) or "-",
            "hop_latency_us": f.fabric.hop_latency * 1e6,
            "in_network_reduction": f.fabric.in_network_reduction,
            "source": f.source,
            "url": f.url,
            "date_read": f.date_read,
            "source_short": f.url or "planner's default",
        }
        for f in fabrics().values()
    ]
    cols = [
        ("fabric", "fabric"),
        ("gpus_max", "GPUs max"),
        ("tier_gpus", "domain GPUs"),
        ("oversubscription", "oversub."),
        ("hop_latency_us", "hop us"),
        ("in_network_reduction", "SHARP"),
        ("date_read", "read"),
        ("source_short", "source (full text: --format json)"),
    ]
    return recs, cols
