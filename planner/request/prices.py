"""What a search's plans pay and where they run: the price of each device (``--provider``,
``--pricing``, ``--price``, ``--owned``) and the host of each device and node size
(:mod:`planner.hosts`: ``--instance``, ``--cpu-cores-per-gpu``, ``--nics``). ``req`` is an
:class:`~planner.request.optimize.OptimizeRequest` (not imported: it imports this module)."""

from __future__ import annotations

import numpy as np

from planner import catalog, host_table, hosts, pricing


def price_table(req) -> tuple[dict, str]:
    """The chosen price of each device (planner.pricing.Price) under --provider and --pricing, and
    those options in words (for errors)."""
    rows = catalog.price_rows()
    keep = pricing.parse_providers(req.provider, rows)
    kind = pricing.parse_pricing(req.pricing)
    table = {}
    for key in catalog.devices():
        price = pricing.choose(rows, key, kind, keep)
        if price is not None:
            table[key] = price
    return table, f"{kind} price" + (f" from {', '.join(keep)}" if keep else "")


def _owned_source(n: int, rate: float, usd_per_kwh: float) -> str:
    """Where an owned device's price comes from: its amortisation rate and electricity price."""
    if not rate and not usd_per_kwh:
        return f"owned ({n} GPUs, no marginal price)"
    amortised = f"${rate:g}/GPU-h amortised" if rate else "no amortisation rate"
    return f"owned ({n} GPUs, {amortised}, electricity ${usd_per_kwh:g}/kWh)"


def given_prices(
    overrides: dict[str, float], owned: dict[str, tuple[int, float]], usd_per_kwh: float
) -> dict:
    """{device: (USD per GPU-hour, source)} of owned GPUs and ``--price`` overrides."""
    out = {k: (usd, "your --price") for k, usd in overrides.items()}
    out.update({k: (rate, _owned_source(n, rate, usd_per_kwh)) for k, (n, rate) in owned.items()})
    return out


def instance_devices(over: hosts.Overrides) -> set[str]:
    """The devices of the instances ``--instance`` names (empty: no restriction)."""
    known = hosts.instances()
    return {known[i].device for i in over.instances}


def for_instances(req, gpus: list[str], what: str) -> tuple[hosts.Overrides, list[str], str]:
    """The host options, the devices left under ``--instance`` and the offer in words (errors)."""
    over = hosts.parse_overrides(req.instance, req.cpu_cores_per_gpu, req.nics)
    if not over.instances:
        return over, gpus, what
    kept = [k for k in gpus if k in instance_devices(over)]
    return over, kept, what + f" for --instance {req.instance}" + (f" and --gpu {req.gpu}" if req.gpu else "")


def host_arrays(req, gpus, infos, net_info, given: dict, over: hosts.Overrides):
    """The hosts (and so the prices) of every device of the search and node size it tries."""
    rows = catalog.price_rows()
    keep = pricing.parse_providers(req.provider, rows)
    kind = pricing.parse_pricing(req.pricing)
    link_gbit_s = net_info.link.bandwidth * 8 / 1e9
    caps = [i.device.max_per_node for i in infos]
    sizes = hosts.node_sizes(caps)  # the per-node axis's choices (planner.space.axes)
    return host_table.for_search(gpus, caps, sizes, rows, kind, keep, over, link_gbit_s, given)


def price_columns(table: host_table.HostArrays) -> tuple[np.ndarray, tuple[tuple[str, ...], ...]]:
    """(devices, node sizes) USD per GPU-hour (NaN when unknown or not offered) and sources."""
    src = tuple(tuple(h.price_source if h else "not offered" for h in row) for row in table.table)
    return table.usd(), src
