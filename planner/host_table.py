"""Offers and host tables: for a device and a node size, the median-priced offer among the kept
providers (its price, its instance as the host: see :mod:`planner.hosts`), and the table of
hosts of a search (devices x node sizes) or of one estimate."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from planner import hosts
from planner.errors import BadInput
from planner.hosts import Host, Instance, Overrides, assumed, from_instance

__all__ = ["Host", "Instance", "HostArrays", "choose", "for_estimate", "for_search"]


def _kept(r, device: str, kind: str, keep, over: Overrides) -> bool:
    """Whether price row ``r`` is an offer of ``device`` under --pricing, --provider, --instance."""
    return (
        r.device == device
        and r.pricing in (kind, "on-demand")
        and (keep is None or r.provider in keep)
        and (not over.instances or r.host in over.instances)
    )


def _offers(rows, device: str, n: int, kind: str, keep, over: Overrides, max_per_node: int) -> dict:
    """{provider: (USD per GPU-hour, row)}: each kept provider's cheapest offer of nodes of ``n``
    GPUs of ``device`` (of ``kind`` or on-demand), see the module docstring."""
    known = hosts.instances()
    best: dict = {}
    for r in rows:
        if not _kept(r, device, kind, keep, over):
            continue
        inst = known.get(r.host) if r.host else None
        # the node size: the described instance's; a multi-GPU row's own count; a per-GPU quote any
        size = inst.gpus if inst else (r.gpus_per_instance if r.gpus_per_instance > 1 else None)
        if (size or n) != n or n > max(max_per_node, size or 0):
            continue
        if r.provider not in best or r.usd_per_gpu_hour < best[r.provider][0]:
            best[r.provider] = (r.usd_per_gpu_hour, r)
    return best


def choose(
    rows, device: str, n: int, kind: str, keep, over: Overrides, link_gbit_s: float, max_per_node: int
):
    """The host and price of nodes of ``n`` GPUs of ``device``: the median-priced offer (module
    docstring); None when no kept provider offers that size (or none publishes ``kind`` for it)."""
    if not any(
        r.device == device and r.pricing == kind and (keep is None or r.provider in keep) for r in rows
    ):
        return None
    best = _offers(rows, device, n, kind, keep, over, max_per_node)
    if not best:
        return None
    ranked = sorted(best.values(), key=lambda t: (t[0], t[1].provider))
    usd, row = ranked[(len(ranked) - 1) // 2]
    what = f"{row.provider} {row.instance} {row.pricing}"
    if len(ranked) > 1:
        names = ", ".join(sorted(best))
        what += f"; the median-priced of {len(ranked)} providers' {n}-GPU offers ({names})"
    inst = hosts.instances().get(row.host) if row.host else None
    if inst is None:
        host = assumed(usd, what + "; host not described: assumed", over)
        return replace(host, offers=len(ranked))
    return from_instance(inst, usd, what, over, link_gbit_s, len(ranked))


@dataclass(frozen=True)
class HostArrays:
    """Hosts of the devices of a search (rows) and the node sizes it tries (columns)."""

    sizes: tuple[int, ...]  # GPUs per node of each column
    table: tuple[tuple[Host | None, ...], ...]  # None: nobody rents nodes of that size
    devices: tuple[str, ...] = ()  # device key of each row
    over: Overrides = Overrides()  # the user's host options (reproduced by :meth:`args`)

    @cached_property
    def _arrays(self) -> dict[str, np.ndarray]:
        """The table's columns as (devices, sizes) arrays, built once (plans read them per call)."""

        def grid(value) -> np.ndarray:
            return np.array([[value(h) if h else np.nan for h in row] for row in self.table], dtype=float)

        return {
            "cores": grid(lambda h: h.cpu_cores_per_gpu),
            "nics": grid(lambda h: np.nan if h.nics is None else h.nics),
            "usd": grid(lambda h: h.usd_per_gpu_hour),
            "offered": np.array([[h is not None for h in row] for row in self.table], dtype=bool),
        }

    def cores(self) -> np.ndarray:
        """(devices, sizes) host CPU cores per GPU (NaN where not offered)."""
        return self._arrays["cores"]

    def nics(self) -> np.ndarray:
        """(devices, sizes) NICs per node at --network's rate (NaN: one per GPU)."""
        return self._arrays["nics"]

    def usd(self) -> np.ndarray:
        """(devices, sizes) USD per GPU-hour (NaN: no price or not offered)."""
        return self._arrays["usd"]

    def offered(self) -> np.ndarray:
        """(devices, sizes) whether some kept provider rents nodes of that size."""
        return self._arrays["offered"]

    def column(self, gpus_per_node) -> np.ndarray:
        """The column of each node size (sizes not in the table take the nearest smaller)."""
        sizes = np.asarray(self.sizes)
        return np.clip(np.searchsorted(sizes, np.asarray(gpus_per_node), side="right") - 1, 0, len(sizes) - 1)

    def at(self, g: int, gpus_per_node: int) -> Host | None:
        """The host of device row ``g`` in nodes of ``gpus_per_node``."""
        return self.table[g][int(self.column(gpus_per_node))]

    def args(self, g: int, gpus_per_node: int) -> list[str]:
        """The `planner estimate` options that put a plan on the same host."""
        host = self.at(g, gpus_per_node)
        out = [f"--instance {shlex.quote(host.id)}"] if host is not None and host.id else []
        if self.over.cpu_cores_per_gpu is not None:
            out.append(f"--cpu-cores-per-gpu {self.over.cpu_cores_per_gpu:g}")
        if self.over.nics is not None:
            out.append(f"--nics {self.over.nics}")
        return out


def for_search(
    gpus, max_per_node, sizes, rows, kind, keep, over: Overrides, link_gbit_s, given: dict
) -> HostArrays:
    """The hosts of a search over ``gpus`` (device keys) and node ``sizes``.

    ``given``: {device: (USD per GPU-hour, source)} of owned GPUs and ``--price`` overrides:
    every size up to the device's node is offered, at that price, on the instance of the
    median-priced offer of that size where one exists (a ``--price``), else on the assumed host.
    """
    table = []
    for k, cap in zip(gpus, max_per_node, strict=True):
        row: list[Host | None] = []
        for n in sizes:
            host = choose(rows, k, n, kind, keep, over, link_gbit_s, cap)
            if k in given:
                usd, src = given[k]
                owned = src.startswith("owned")
                if host is None or owned:
                    host = assumed(usd, src, over) if n <= cap else None
                else:
                    host = replace(host, usd_per_gpu_hour=usd, price_source=src)
            elif host is None and not any(r.device == k for r in rows):
                host = assumed(np.nan, "no price", over) if n <= cap else None
            row.append(host)
        table.append(tuple(row))
    return HostArrays(tuple(sizes), tuple(table), tuple(gpus), over)


def for_estimate(device: str, gpus_per_node: int, link_gbit_s: float, over: Overrides) -> HostArrays:
    """The host of one estimate: ``--instance``'s (which must hold ``device`` in nodes of
    ``gpus_per_node``), else the assumed host; ``--cpu-cores-per-gpu`` and ``--nics`` apply."""
    if over.instances:
        if len(over.instances) > 1:
            raise BadInput(f"--instance '{','.join(over.instances)}': estimate takes one instance")
        inst = hosts.instances()[over.instances[0]]
        if inst.device != device or inst.gpus != gpus_per_node:
            raise BadInput(
                f"--instance {inst.id} holds {inst.gpus} x {inst.device}: give --device {inst.device} "
                f"--gpus-per-node {inst.gpus} (got {device}, {gpus_per_node})"
            )
        host = from_instance(inst, np.nan, inst.id, over, link_gbit_s)
    else:
        host = assumed(np.nan, "", over)
    return HostArrays((gpus_per_node,), ((host,),), (device,), over)
