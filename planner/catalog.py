"""The only reader of ``configs/``: devices, networks, prices and the model zoo.

Catalog files are validated strictly when first read (unknown or missing keys are errors) and
cached. Units are converted here, once: GB/s and Gbit/s become bytes/s, TFLOP/s become FLOP/s,
microseconds become seconds (see the headers of the TOML files for the conventions).
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from costs.hardware import PRECISIONS, Device, DeviceTable, Link, LinkTable
from planner import training_defaults
from planner.errors import CatalogError, SpecError
from planner.request.files import read_bytes, read_json

GIB = 2.0**30  # memory_gb is binary: an 80 GB H100 has 80 GiB (devices.toml's header cites it)

# Names PALEO and its demo use for zoo nets (paleo-model.md §E.2).
NET_ALIASES = {"alex_v2": "alexnet", "alex_v2_1gpu": "alexnet_cc2"}

_DEVICE_KEYS = {
    **dict.fromkeys(("name", "vendor", "generation", "form_factor", "intra_node_link"), str),
    **dict.fromkeys(("source", "date", "sm_source", "jpeg_source"), str),
    **dict.fromkeys(("clock_mhz", "memory_gb", "mem_bandwidth_gbs", "tdp_w"), (int, float)),
    **{"paleo": bool, "max_gpus_per_node": int, "peak_tflops": dict, "sm_count": int, "jpeg_decoders": int},
    **{"gpus_per_host": int, "gpus_per_host_source": str},
}
_DEVICE_OPTIONAL = set("generation tdp_w form_factor sm_count sm_source jpeg_decoders jpeg_source".split())
_DEVICE_OPTIONAL |= {"gpus_per_host", "gpus_per_host_source"}  # hosts smaller than the NVLink domain
_NETWORK_KEYS = {"name": str, "kind": str, "paleo": bool, "bandwidth_gbit_s": (int, float)}
_NETWORK_KEYS |= {"latency_us": (int, float), "source": str, "date": str}


def configs_dir() -> Path:
    """Where the catalogs live: $PLANNER_CONFIGS, the installed package data, or the checkout."""
    env = os.environ.get("PLANNER_CONFIGS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    installed = here / "configs"
    if (installed / "devices.toml").is_file():
        return installed
    return here.parent / "configs"


def read_toml(name: str) -> dict:
    """A catalog TOML file, parsed (one-line CatalogError when absent or malformed)."""
    path = configs_dir() / name
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise CatalogError(f"catalog file {name} not found in {path.parent}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{name}: malformed TOML: {exc}") from None


def _check(file: str, key: str, entry: dict, schema: dict, optional=frozenset()) -> None:
    if not isinstance(entry, dict):
        raise CatalogError(f"{file}: [{key}] must be a table")
    unknown = set(entry) - set(schema)
    if unknown:
        raise CatalogError(
            f"{file}: [{key}] has unknown key(s) {', '.join(sorted(unknown))} (valid: {', '.join(schema)})"
        )
    missing = set(schema) - set(entry) - set(optional)
    if missing:
        raise CatalogError(f"{file}: [{key}] lacks {', '.join(sorted(missing))}")
    for k, v in entry.items():
        if not isinstance(v, schema[k]) or isinstance(v, bool) != (schema[k] is bool):
            raise CatalogError(f"{file}: [{key}] {k} has the wrong type ({type(v).__name__})")


@dataclass(frozen=True)
class DeviceInfo:
    """A catalog device: the model's :class:`Device` plus what reports show."""

    key: str
    device: Device
    name: str
    vendor: str
    paleo: bool
    source: str
    date: str
    price_usd_per_hour: float | None  # default price per GPU-hour (catalog.prices())
    price_source: str | None  # how it was chosen, e.g. "median on-demand of 4 providers (...)"
    raw: dict = field(compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class NetworkInfo:
    key: str
    link: Link
    name: str
    kind: str
    paleo: bool
    source: str
    date: str
    raw: dict = field(compare=False, hash=False, repr=False)


@lru_cache(maxsize=1)
def networks() -> dict[str, NetworkInfo]:
    """Every link in networks.toml, by key."""
    data = read_toml("networks.toml")
    out = {}
    for key, e in data.items():
        _check("networks.toml", key, e, _NETWORK_KEYS)
        if e["bandwidth_gbit_s"] <= 0 or e["latency_us"] < 0:
            raise CatalogError(f"networks.toml: [{key}] needs a positive bandwidth and latency >= 0")
        if e["kind"] not in ("inter_node", "intra_node"):
            raise CatalogError(f"networks.toml: [{key}] kind must be inter_node or intra_node")
        link = Link(key, e["bandwidth_gbit_s"] * 1e9 / 8, e["latency_us"] * 1e-6)
        out[key] = NetworkInfo(key, link, e["name"], e["kind"], e["paleo"], e["source"], e["date"], e)
    return out


@lru_cache(maxsize=1)
def price_rows():
    """Every row of prices.toml (planner.pricing.PriceRow), validated against devices.toml's keys."""
    from planner.pricing import parse_rows

    return parse_rows(read_toml("prices.toml"), set(read_toml("devices.toml")))


@lru_cache(maxsize=1)
def prices() -> dict:
    """The default price of each priced device (planner.pricing.Price): the median on-demand price
    per GPU-hour over the providers that offer it."""
    from planner.pricing import choose

    rows = price_rows()
    return {k: p for k in dict.fromkeys(r.device for r in rows) if (p := choose(rows, k)) is not None}


@lru_cache(maxsize=1)
def energy_defaults():
    """The cited energy defaults of energy.toml (planner.energy.Energy: PUE, grid, powers)."""
    from planner.energy import parse_defaults

    return parse_defaults(read_toml("energy.toml"))


@lru_cache(maxsize=1)
def devices() -> dict[str, DeviceInfo]:
    """Every device in devices.toml, by key, with its price when one is listed."""
    data = read_toml("devices.toml")
    links = networks()
    price = prices()
    out = {}
    for key, e in data.items():
        _check("devices.toml", key, e, _DEVICE_KEYS, _DEVICE_OPTIONAL)
        bad = set(e["peak_tflops"]) - set(PRECISIONS) - {"fp8"}
        if bad:
            raise CatalogError(
                f"devices.toml: [{key}.peak_tflops] unknown precision(s) {', '.join(sorted(bad))} "
                f"(valid: {', '.join(PRECISIONS)}, fp8)"
            )
        if "fp32" not in e["peak_tflops"]:
            raise CatalogError(f"devices.toml: [{key}.peak_tflops] lacks fp32")
        if e["intra_node_link"] not in links:
            raise CatalogError(
                f"devices.toml: [{key}] intra_node_link '{e['intra_node_link']}' is not in networks.toml"
            )
        peak = {p: float(v) * 1e12 for p, v in e["peak_tflops"].items() if p in PRECISIONS}
        dev = Device(
            key,
            peak,
            e["mem_bandwidth_gbs"] * 1e9,
            e["clock_mhz"] * 1e6,
            e["memory_gb"] * GIB,
            e["intra_node_link"],
            e["max_gpus_per_node"],
            e.get("sm_count", 0),
        )
        p = price.get(key)
        out[key] = DeviceInfo(
            key,
            dev,
            e["name"],
            e["vendor"],
            e["paleo"],
            e["source"],
            e["date"],
            p.usd_per_gpu_hour if p else None,
            p.source if p else None,
            e,
        )
    return out


def _lookup(kind: str, name: str, table: dict):
    if name in table:
        return table[name]
    folded = {k.lower().replace("-", "_"): k for k in table}
    key = folded.get(name.lower().replace("-", "_"))
    if key:
        return table[key]
    hint = difflib.get_close_matches(name, list(table), n=1, cutoff=0.5)
    also = f"; did you mean {hint[0]}?" if hint else ""
    raise CatalogError(f"unknown {kind} '{name}' (valid: {', '.join(table)}){also}")


def device(name: str) -> DeviceInfo:
    """One device by key (case-insensitive); the error lists the valid keys."""
    return _lookup("device", name, devices())


def network(name: str) -> NetworkInfo:
    """One link by key (case-insensitive); the error lists the valid keys."""
    return _lookup("network", name, networks())


def device_table(keys: list[str] | tuple[str, ...]) -> DeviceTable:
    return DeviceTable.of([device(k).device for k in keys])


def link_table(keys: list[str] | tuple[str, ...]) -> LinkTable:
    return LinkTable.of([network(k).link for k in keys])


_EFF_KEYS = {"value": (int, float), "source": str, "date": str, **{p: (int, float) for p in PRECISIONS}}
_EFF_TABLES = ("gemm", "vector", "memory", "link", "overhead", "loader", "host", "winograd", "attention")
# A loader's rate is per host CPU core (CPU decoding) or per GPU (GPU decoding): exactly one key.
_LOADER_RATES = ("samples_per_s_per_core", "samples_per_s_per_gpu")
_EFF_SCHEMAS = {
    "loader": {**{k: (int, float) for k in _LOADER_RATES}, "source": str, "date": str},
    "host": {"cpu_cores_per_gpu": (int, float), "source": str, "date": str},
}


@lru_cache(maxsize=1)
def efficiencies() -> dict[str, dict]:
    """configs/efficiencies.toml, validated: {table: {key: entry}}."""
    data = read_toml("efficiencies.toml")
    unknown = set(data) - set(_EFF_TABLES)
    if unknown:
        raise CatalogError(
            f"efficiencies.toml: unknown table(s) {', '.join(sorted(unknown))} (valid: {', '.join(_EFF_TABLES)})"
        )
    for table, entries in data.items():
        schema = _EFF_SCHEMAS.get(table, _EFF_KEYS)
        for key, e in entries.items():
            where = f"{table}.{key}"
            _check("efficiencies.toml", where, e, schema, set(schema) - {"source", "date"})
            values = {k: v for k, v in e.items() if k not in ("source", "date")}
            if table == "loader" and len(values) != 1:
                raise CatalogError(
                    f"efficiencies.toml: [{where}] needs exactly one of {', '.join(_LOADER_RATES)}"
                )
            if table == "host" and not values:
                raise CatalogError(f"efficiencies.toml: [{where}] lacks cpu_cores_per_gpu")
            if table in _EFF_SCHEMAS and any(v <= 0 for v in values.values()):
                raise CatalogError(f"efficiencies.toml: [{where}] needs positive values")
    return data


def _eff_value(table: dict, keys: tuple, precision: str | None = None) -> float:
    for k in keys:
        e = table.get(k)
        if e is not None and (precision in e or "value" in e):
            return float(e.get(precision, e.get("value")))
    raise CatalogError(f"efficiencies.toml: no entry for {keys[0]} (and no default)")


def efficiency(device_keys, link_keys):
    """The cited default efficiencies (costs.modern.efficiency.Efficiency) for these table rows."""
    import numpy as np

    from costs.modern.efficiency import Efficiency

    data = efficiencies()
    devs = [device(k) for k in device_keys]
    nets = [network(k) for k in link_keys]
    chain = [(d.key, d.raw.get("generation", ""), "default") for d in devs]
    gemm = [[_eff_value(data.get("gemm", {}), c, p) for p in PRECISIONS] for c in chain]
    over = data.get("overhead", {})
    return Efficiency(
        tuple(d.key for d in devs),
        tuple(x.key for x in nets),
        np.array(gemm, dtype=float).reshape(len(devs), len(PRECISIONS)),
        np.array([_eff_value(data.get("vector", {}), c) for c in chain]),
        np.array([_eff_value(data.get("memory", {}), c) for c in chain]),
        np.array([_eff_value(data.get("link", {}), (x.key, x.kind, "default")) for x in nets]),
        kernel_min_s=_eff_value(over, ("kernel_min_us",)) * 1e-6,
        host_per_kernel_s=_eff_value(over, ("host_per_kernel_us",)) * 1e-6,
        iteration_s=_eff_value(over, ("iteration_us",)) * 1e-6,
        winograd=np.array([_eff_value(data.get("winograd", {}), c) for c in chain]),
        attention=np.array([_eff_value(data.get("attention", {}), c) for c in chain]),
    )


def loader_rates() -> dict[str, dict[str, float]]:
    """Data-loader throughputs by name: {name: {rate key: samples/s}}.

    The rate key says what it is per: ``samples_per_s_per_core`` (a host CPU core: see
    planner.hosts) or ``samples_per_s_per_gpu`` (GPU decoding; a node's rate is that x its GPUs).
    """
    return {
        name: {k: float(v) for k, v in e.items() if k in _LOADER_RATES}
        for name, e in efficiencies().get("loader", {}).items()
    }


def host_cores_per_gpu() -> float:
    """Host CPU cores per GPU of a typical training node ([host.default] of efficiencies.toml)."""
    entry = efficiencies().get("host", {}).get("default")
    if entry is None:
        raise CatalogError("efficiencies.toml: no [host.default] entry (cpu_cores_per_gpu)")
    return float(entry["cpu_cores_per_gpu"])


def zoo() -> dict[str, Path]:
    """Zoo nets by name: the JSON files of configs/nets/."""
    return {p.stem: p for p in sorted((configs_dir() / "nets").glob("*.json"))}


def zoo_info() -> dict[str, dict]:
    """Each zoo net's spec as read from its file (name, source, training defaults, layers)."""
    return {name: training_defaults.checked(name, json.loads(p.read_text())) for name, p in zoo().items()}


def zoo_transformers() -> list[str]:
    """Zoo nets built from a transformer description (a ``model`` object; costed under the
    planner and modern rules only); the others are the CNNs PALEO's rules also accept."""
    return [name for name, spec in zoo_info().items() if "model" in spec]


def measurement_nets() -> dict[str, Path]:
    """Nets that only measured runs name (configs/measurements/nets/); not listed in the zoo."""
    return {p.stem: p for p in sorted((configs_dir() / "measurements" / "nets").glob("*.json"))}


def net_path(name: str) -> Path:
    """A zoo name (or PALEO alias), a measurement net's name, or a path to a spec file."""
    nets = zoo()
    key = NET_ALIASES.get(name, name)
    if key in nets or key in (extra := measurement_nets()):
        return nets.get(key) or extra[key]
    path = Path(name)
    if path.suffix == ".json" or os.sep in name:
        if not path.is_file():
            read_bytes(path, "spec file", SpecError)  # says why: a folder, a link loop, absent
            raise SpecError(f"spec file '{name}' not found")  # not a regular file
        return path
    hint = difflib.get_close_matches(name, list(nets), n=1)
    also = f"; did you mean {hint[0]}?" if hint else ""
    raise CatalogError(f"unknown net '{name}' (valid: {', '.join(nets)}, or a path to a .json spec){also}")


def net_spec(name: str) -> dict:
    """A net's spec file as read (a transformer's ``model`` description included)."""
    return read_json(net_path(name), "spec file", SpecError)  # bounded: size, UTF-8, nesting


def training(name: str) -> training_defaults.TrainingDefaults:
    """A net's published training run (tokens, sequence, global batch, sources), validated."""
    return training_defaults.parse(name, net_spec(name))


@lru_cache(maxsize=64)
def _net(path: str, rules_name: str, seq_len: int | None = None, image_size=None, attention=None):
    from costs.rules import get_rules
    from costs.specs.graph import build_net
    from costs.specs.vision_nets import resized
    from planner.request.netfile import read_net

    spec = read_net(path)  # bounded; a Hugging Face config.json's layers built
    spec = resized(spec, Path(path).name, seq_len, image_size, attention)  # None: the spec's own
    return build_net(spec, Path(path).name, get_rules(rules_name))


def load_net(name: str, rules: str, seq_len: int | None = None, image_size=None, attention=None):
    """Parse a zoo net or spec file under a rule set (cached), a transformer at ``seq_len``."""
    return _net(str(net_path(name)), rules, seq_len, image_size, attention)


@lru_cache(maxsize=64)
def _costs(path: str, rules_name: str, algorithm: str, *shape):  # seq_len, image_size, attention
    from costs.rules import get_rules
    from costs.specs import coefficients

    return coefficients.build(_net(path, rules_name, *shape), get_rules(rules_name), algorithm)


def net_costs(name: str, rules: str, algorithm="gemm", seq_len=None, image_size=None, attention=None):
    """Per-layer cost coefficients of a net (cached per net, rules, algorithm, length, px, kernel)."""
    return _costs(str(net_path(name)), rules, algorithm, seq_len, image_size, attention)


def profile_data(name: str) -> dict:
    """A shipped calibration profile, configs/profiles/<name>.toml, as parsed TOML."""
    return read_toml(f"profiles/{name}.toml")
