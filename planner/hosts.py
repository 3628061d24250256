"""Hosts: the instance a plan's GPUs sit in. Its CPU cores decode the training data, its NICs
carry the traffic between nodes, and its price is what the plan pays.

configs/instances.toml describes the instance types the price table refers to (one row per
provider's instance, each cited); a price row names its instance in ``host``. For a device and a
node size, the *offers* are the kept providers' price rows of that device whose instance holds
that many GPUs (a row whose instance is not described: its own GPU count when it prices a
multi-GPU instance, every size the device comes in when it quotes one GPU).
Each provider counts once, at its cheapest offer of that size (of the pricing kind asked, or
on-demand where that is cheaper or the only one, as :mod:`planner.pricing` does for devices). A
plan is priced and hosted as the **median-priced offer** (the lower of the two middle ones for
an even count), so that the price, the cores and the NICs are those of one instance someone
rents. A device with no price row (owned GPUs, one priced with ``--price``, PALEO's devices)
sits on the *assumed host* of configs/efficiencies.toml [host.default] (a DGX H100: 14 cores
per GPU) with one NIC per GPU at ``--network``'s rate, and the answer says so.

Overrides: ``--cpu-cores-per-gpu`` sets the cores of every host, ``--nics`` the NICs per node
(each at ``--network``'s rate), ``--instance`` keeps only the offers of the instances it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from planner.errors import BadInput, CatalogError

_KEYS = {
    "id": str,
    "provider": str,
    "instance": str,
    "device": str,
    "gpus": int,
    "vcpus": int,
    "cpu_cores": int,
    "cpu": str,
    "host_memory_gib": (int, float),
    "nics": int,
    "nic_gbit_s": (int, float),
    "network": str,
    "local_nvme_gb": (int, float),
    "source": str,
    "date": str,
    "note": str,
}
_REQUIRED = ("id", "provider", "instance", "device", "gpus", "vcpus", "source", "date")
_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
NODE_SIZES = (1, 2, 4, 8)  # GPUs per node every search tries (planner.space.declare.PER_NODE)
# GPUs per NVLink domain larger than a server, tried only for devices whose catalog node reaches
# them: a GB200 NVL72 rack joins 72 GPUs in one NVLink domain (devices.toml GB200, networks.toml
# nvlink5_nvl72), which the cost model treats as one "node" (the intra-node link inside it).
DOMAIN_SIZES = (72,)
MAX_CORES_PER_GPU = 1024.0  # --cpu-cores-per-gpu bound (a 2-socket host has at most a few hundred)
MAX_NICS = 1024  # --nics bound per node


def node_sizes(max_per_node) -> tuple[int, ...]:
    """GPUs per node a search over devices of these catalog maxima (``max_gpus_per_node``) tries:
    :data:`NODE_SIZES`, then each of :data:`DOMAIN_SIZES` that some device's maximum reaches (a
    device still takes only the sizes up to its own maximum: the per-node axis's constraint)."""
    widest = max(max_per_node, default=0)
    return NODE_SIZES + tuple(n for n in DOMAIN_SIZES if n <= widest)


@dataclass(frozen=True)
class Instance:
    """One rentable instance type (configs/instances.toml row)."""

    id: str  # "<provider>/<instance>"
    provider: str
    instance: str
    device: str
    gpus: int
    vcpus: int
    source: str
    date: str
    cpu_cores: int | None = None  # physical cores, where the provider states them
    cpu: str = ""
    host_memory_gib: float | None = None
    nics: int | None = None  # NICs for traffic between instances
    nic_gbit_s: float | None = None  # per NIC
    network: str = ""
    local_nvme_gb: float | None = None
    note: str = ""

    @property
    def cores(self) -> float:
        """Physical CPU cores: as stated, else vCPUs / 2 (two hardware threads per core, as the
        x86 instances of the catalog run them)."""
        return float(self.cpu_cores) if self.cpu_cores else self.vcpus / 2.0

    @property
    def node_gbit_s(self) -> float | None:
        """NIC bandwidth of the instance between nodes, Gbit/s per direction (None: not stated)."""
        if self.nics is None or self.nic_gbit_s is None:
            return None
        return float(self.nics * self.nic_gbit_s)

    def describe(self) -> str:
        """'aws p4d.24xlarge: 8 x A100_40GB, 96 vCPUs (48 cores), 4 x 100 Gb/s efa'."""
        cores = f"{self.cpu_cores} cores" if self.cpu_cores else f"~{self.cores:g} cores"
        nic = (
            f", {self.nics} x {self.nic_gbit_s:g} Gb/s {self.network}".rstrip()
            if self.node_gbit_s is not None
            else ", network not stated"
        )
        return (
            f"{self.provider} {self.instance}: {self.gpus} x {self.device}, {self.vcpus} vCPUs ({cores}){nic}"
        )


def instance_id(provider: str, instance: str) -> str:
    """An instance's id: '<provider>/<instance>' with every run of characters other than letters,
    digits, '.' and '_' made one '-', so that a Reproduce line needs no quoting."""
    return f"{provider}/{re.sub(r'[^A-Za-z0-9._]+', '-', instance).strip('-')}"


def _fail(i: int, e, msg: str) -> CatalogError:
    name = e.get("id", "?") if isinstance(e, dict) else "?"
    return CatalogError(f"instances.toml: [[instance]] row {i} ({name}): {msg}")


def _check_row(i: int, e, devices) -> None:
    if not isinstance(e, dict):
        raise _fail(i, e, "must be a table")
    unknown = set(e) - set(_KEYS)
    if unknown:
        raise _fail(i, e, f"unknown key(s) {', '.join(sorted(unknown))} (valid: {', '.join(_KEYS)})")
    missing = [k for k in _REQUIRED if k not in e]
    if missing:
        raise _fail(i, e, f"lacks {', '.join(missing)}")
    for k, v in e.items():
        if not isinstance(v, _KEYS[k]) or isinstance(v, bool):
            raise _fail(i, e, f"{k} has the wrong type ({type(v).__name__})")
    if e["device"] not in devices:
        raise _fail(i, e, f"device '{e['device']}' is not in devices.toml")
    if e["id"] != instance_id(e["provider"], e["instance"]):
        raise _fail(
            i,
            e,
            f"id must be '{instance_id(e['provider'], e['instance'])}' (<provider>/<instance>, shell-safe)",
        )
    for k in ("gpus", "vcpus", "cpu_cores", "nics", "nic_gbit_s", "host_memory_gib"):
        if k in e and not 0 < e[k] < float("inf"):
            raise _fail(i, e, f"{k} must be positive, got {e[k]}")
    if not _DATE.match(e["date"]):
        raise _fail(i, e, f"date '{e['date']}' is not YYYY-MM or YYYY-MM-DD")


def parse_instances(data: dict, devices) -> dict[str, Instance]:
    """The validated instances of a parsed instances.toml, by id."""
    extra = set(data) - {"instance"}
    if extra:
        raise CatalogError(f"instances.toml: unknown table(s) {', '.join(sorted(extra))}")
    rows = data.get("instance", [])
    if not isinstance(rows, list):
        raise CatalogError("instances.toml: instance must be an array of tables ([[instance]])")
    out: dict[str, Instance] = {}
    for i, e in enumerate(rows, 1):
        _check_row(i, e, devices)
        if e["id"] in out:
            raise _fail(i, e, "repeats an earlier id")
        out[e["id"]] = Instance(**e)
    return out


@lru_cache(maxsize=1)
def instances() -> dict[str, Instance]:
    """Every instance of configs/instances.toml (empty when the file is absent)."""
    from planner import catalog

    try:
        data = catalog.read_toml("instances.toml")
    except CatalogError as exc:
        if "not found" in str(exc):
            return {}
        raise
    return parse_instances(data, set(catalog.devices()))


@dataclass(frozen=True)
class Host:
    """Where a plan's GPUs sit, and what it pays: one instance, or the assumed host."""

    instance: Instance | None  # None: the assumed host (no instance described)
    cpu_cores_per_gpu: float
    nics: float | None  # NICs per node at --network's rate; None: one per GPU
    usd_per_gpu_hour: float  # NaN: no price
    price_source: str
    offers: int = 0  # providers with an offer of this device and node size
    cores_given: bool = False  # cores per GPU from --cpu-cores-per-gpu

    @property
    def id(self) -> str | None:
        return self.instance.id if self.instance else None

    def describe(self) -> str:
        """The host in words, for answers."""
        cores = f"{self.cpu_cores_per_gpu:g} CPU cores per GPU" + (
            " (--cpu-cores-per-gpu)" if self.cores_given else ""
        )
        nets = "one NIC per GPU" if self.nics is None else f"{self.nics:g} NIC(s) per node"
        if self.instance is None:
            what = "" if self.cores_given else ", a DGX H100 (efficiencies.toml [host.default])"
            return f"assumed{what}: {cores}, {nets} at the --network rate"
        return f"{self.instance.describe()}; {cores}"


@dataclass(frozen=True)
class Overrides:
    """The user's host options: ``--instance``, ``--cpu-cores-per-gpu``, ``--nics``."""

    instances: tuple[str, ...] = ()
    cpu_cores_per_gpu: float | None = None
    nics: int | None = None


def parse_overrides(instance: str | None, cores, nics) -> Overrides:
    """Validate the host options (one-line :class:`BadInput` naming the option and bound)."""
    ids: tuple[str, ...] = ()
    if instance is not None and str(instance).strip():
        known = instances()
        ids = tuple(dict.fromkeys(s.strip() for s in str(instance).split(",") if s.strip()))
        bad = [s for s in ids if s not in known]
        if bad or not ids:
            raise BadInput(
                f"--instance '{instance}' names no known instance (see `planner list instances`; "
                f"e.g. {', '.join(sorted(known)[:3])})"
            )
    if cores is not None:
        c = float(cores)
        if not 0 < c <= MAX_CORES_PER_GPU:
            raise BadInput(f"--cpu-cores-per-gpu {cores} must be in (0, {MAX_CORES_PER_GPU:g}]")
        cores = c
    if nics is not None and not 1 <= int(nics) <= MAX_NICS:
        raise BadInput(f"--nics {nics} must be an integer in [1, {MAX_NICS}]")
    return Overrides(ids, cores, None if nics is None else int(nics))


def assumed(usd: float, source: str, over: Overrides) -> Host:
    """The assumed host at a given price."""
    from planner import catalog

    cores = over.cpu_cores_per_gpu or catalog.host_cores_per_gpu()
    nics = None if over.nics is None else float(over.nics)
    return Host(None, cores, nics, usd, source, cores_given=over.cpu_cores_per_gpu is not None)


def from_instance(inst: Instance, usd: float, source: str, over: Overrides, link_gbit_s: float, offers=1):
    """The host of an instance: its cores per GPU, and its NIC bandwidth as a count of
    ``--network`` links (``link_gbit_s`` each), unless overridden."""
    cores = over.cpu_cores_per_gpu or inst.cores / inst.gpus
    if over.nics is not None:
        nics = float(over.nics)
    elif inst.node_gbit_s is not None:
        nics = inst.node_gbit_s / link_gbit_s
    else:
        nics = None
    return Host(inst, cores, nics, usd, source, offers, over.cpu_cores_per_gpu is not None)
