"""The price table (configs/prices.toml as typed rows) and the rule that turns it into one price
per GPU-hour per device (the headline price `planner list devices` shows; a plan is priced per
node size by :mod:`planner.hosts`, with the same per-provider rule over that size's offers).

:mod:`planner.catalog` reads the file and hands its parsed TOML to :func:`parse_rows`; this
module validates it (one-line :class:`CatalogError` naming the file, row and field) and chooses
prices. The rule: for each provider, its cheapest per-GPU-hour price (a provider with several
instance sizes counts once); the device's price is the median of those over the providers kept
(all, or those of ``--provider``).

Under ``--pricing spot`` or ``reserved`` a device is offered when at least one kept provider
publishes that kind for it, and the median runs over the same providers as on-demand: each at its
cheapest spot (or reserved) rate where it publishes one, at its on-demand rate where it does not
(a buyer who accepts preemption or a commitment can still rent on demand there). Since every
spot and reserved row is at most its instance's on-demand rate, each provider's term is at most
its on-demand price, and so is the median: a committed price never reads dearer than on-demand
because it was taken over fewer, dearer providers (the GCP-only reserved H100 rate, $7.67, beside
an eight-provider on-demand median of $5.07, did before).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from datetime import date

from planner.errors import BadInput, CatalogError

# pricing kinds of a row; --pricing takes these names, "reserved" meaning the 1-year rate
PRICING_KINDS = ("on-demand", "spot", "reserved-1y", "reserved-3y")
PRICING_CHOICES = {
    "on-demand": "on-demand",
    "spot": "spot",
    "reserved": "reserved-1y",
    "reserved-3y": "reserved-3y",
}
_ROW_KEYS = {
    "device": str,
    "provider": str,
    "instance": str,
    "gpus_per_instance": int,
    "usd_per_hour": (int, float),
    "pricing": str,
    "region": str,
    "source": str,
    "date": str,
    "note": str,
    "host": str,
}
_OPTIONAL = {"note", "host"}
_PROVIDER = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")


@dataclass(frozen=True)
class PriceRow:
    """One published price: a provider's instance (or per-GPU offer) at one pricing kind."""

    device: str  # catalog key
    provider: str
    instance: str
    gpus_per_instance: int
    usd_per_hour: float  # the whole instance, USD per hour
    pricing: str  # one of PRICING_KINDS
    region: str
    source: str
    date: str  # "YYYY-MM" or "YYYY-MM-DD"
    note: str = ""
    host: str = ""  # id of the instances.toml row the price is quoted for ("" when none)

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.gpus_per_instance

    def read_on(self) -> date:
        """The row's date (the first of the month when only a month is given)."""
        y, m, d = _DATE.match(self.date).groups()
        return date(int(y), int(m), int(d or 1))


@dataclass(frozen=True)
class Price:
    """The price chosen for one device and a one-line account of where it comes from."""

    usd_per_gpu_hour: float
    source: str  # e.g. "median on-demand of 4 providers (aws, azure, gcp, lambda)"


def _fail(file: str, i: int, entry, msg: str) -> CatalogError:
    what = f"{entry.get('device', '?')} {entry.get('provider', '?')}" if isinstance(entry, dict) else "?"
    return CatalogError(f"{file}: [[price]] row {i} ({what}): {msg}")


def _check_types(file: str, i: int, e: dict) -> None:
    unknown = set(e) - set(_ROW_KEYS)
    if unknown:
        raise _fail(
            file, i, e, f"unknown key(s) {', '.join(sorted(unknown))} (valid: {', '.join(_ROW_KEYS)})"
        )
    missing = set(_ROW_KEYS) - set(e) - _OPTIONAL
    if missing:
        raise _fail(file, i, e, f"lacks {', '.join(sorted(missing))}")
    for k, v in e.items():
        if not isinstance(v, _ROW_KEYS[k]) or isinstance(v, bool):
            raise _fail(file, i, e, f"{k} has the wrong type ({type(v).__name__})")


def _check_values(file: str, i: int, e: dict, devices) -> None:
    if e["device"] not in devices:
        raise _fail(file, i, e, f"device '{e['device']}' is not in devices.toml")
    if not _PROVIDER.match(e["provider"]):
        raise _fail(file, i, e, f"provider '{e['provider']}' must be lower-case letters, digits and -")
    if e["pricing"] not in PRICING_KINDS:
        raise _fail(file, i, e, f"pricing '{e['pricing']}' (valid: {', '.join(PRICING_KINDS)})")
    if e["gpus_per_instance"] < 1:
        raise _fail(file, i, e, f"gpus_per_instance must be >= 1, got {e['gpus_per_instance']}")
    if not 0 < e["usd_per_hour"] < float("inf"):
        raise _fail(file, i, e, f"usd_per_hour must be a positive number, got {e['usd_per_hour']}")
    m = _DATE.match(e["date"])
    if not m or not 1 <= int(m.group(2)) <= 12 or not 1 <= int(m.group(3) or 1) <= 31:
        raise _fail(file, i, e, f"date '{e['date']}' is not YYYY-MM or YYYY-MM-DD")
    for k in ("instance", "region", "source"):
        if not e[k].strip():
            raise _fail(file, i, e, f"{k} is empty")


def parse_rows(data: dict, devices, file: str = "prices.toml") -> tuple[PriceRow, ...]:
    """The validated rows of a parsed price table; ``devices`` are the catalog's device keys."""
    extra = set(data) - {"price"}
    if extra:
        raise CatalogError(f"{file}: unknown table(s) {', '.join(sorted(extra))} (valid: [[price]] rows)")
    entries = data.get("price", [])
    if not isinstance(entries, list):
        raise CatalogError(f"{file}: price must be an array of tables ([[price]])")
    rows, seen = [], {}
    for i, e in enumerate(entries, 1):
        if not isinstance(e, dict):
            raise _fail(file, i, e, "must be a table")
        _check_types(file, i, e)
        _check_values(file, i, e, devices)
        key = (e["device"], e["provider"], e["instance"], e["pricing"], e["region"])
        if key in seen:
            raise _fail(
                file, i, e, f"repeats row {seen[key]} (same device, provider, instance, pricing, region)"
            )
        seen[key] = i
        rows.append(PriceRow(**{**e, "usd_per_hour": float(e["usd_per_hour"])}))
    return tuple(rows)


def providers(rows) -> list[str]:
    """Every provider of the table, sorted."""
    return sorted({r.provider for r in rows})


def parse_providers(text: str | None, rows) -> tuple[str, ...] | None:
    """``--provider aws,lambda`` -> ('aws', 'lambda'); None (all providers) when not given."""
    if text is None or not text.strip():
        return None
    valid = providers(rows)
    names = tuple(dict.fromkeys(p.strip().lower() for p in text.split(",") if p.strip()))
    bad = [p for p in names if p not in valid]
    if bad or not names:
        raise BadInput(f"--provider '{text}' names no known provider (valid: {', '.join(valid)})")
    return names


def parse_pricing(text: str) -> str:
    """``--pricing`` name -> the row kind it selects (reserved is the 1-year rate)."""
    kind = PRICING_CHOICES.get(text.strip().lower()) if isinstance(text, str) else None
    if kind is None:
        raise BadInput(
            f"--pricing '{text}' (valid: {', '.join(PRICING_CHOICES)}; reserved is the 1-year rate)"
        )
    return kind


def _cheapest(rows, device: str, kinds: set[str], keep) -> dict[str, tuple[float, str]]:
    """{provider: (cheapest USD per GPU-hour among rows of ``kinds``, the kind of that row)}."""
    best: dict[str, tuple[float, str]] = {}
    for r in rows:
        if r.device == device and r.pricing in kinds and (keep is None or r.provider in keep):
            if r.provider not in best or r.usd_per_gpu_hour < best[r.provider][0]:
                best[r.provider] = (r.usd_per_gpu_hour, r.pricing)
    return best


def choose(rows, device: str, kind: str = "on-demand", keep: tuple[str, ...] | None = None) -> Price | None:
    """The price of ``device`` (USD per GPU-hour): the median over providers (those in ``keep``,
    or all) of each provider's cheapest price; for spot and reserved, each provider's cheapest of
    that kind and on-demand (module docstring). None when no kept provider publishes ``kind``."""
    if not _cheapest(rows, device, {kind}, keep):
        return None
    best = _cheapest(rows, device, {kind, "on-demand"}, keep)
    names = sorted(best)
    termed = [n for n in names if best[n][1] == kind]
    fallback = [n for n in names if best[n][1] != kind]
    median = statistics.median(v for v, _ in best.values())
    if len(names) == 1:
        return Price(median, f"{names[0]} {kind}")
    if not fallback:
        return Price(median, f"median {kind} of {len(names)} providers ({', '.join(names)})")
    return Price(
        median,
        f"median of {len(names)} providers ({kind}: {', '.join(termed)}; "
        f"on-demand where no cheaper {kind} rate is published: {', '.join(fallback)})",
    )


def is_old(row: PriceRow, today: date, months: int = 12) -> bool:
    """Whether the row was read more than ``months`` months before ``today`` (a month-only date
    counts from the first of its month)."""
    y, m = divmod(today.year * 12 + today.month - 1 - months, 12)
    return row.read_on() < date(y, m + 1, min(today.day, 28))
