"""`planner list`: the catalogs as records, with units in the column names."""

from __future__ import annotations

from datetime import date

from planner import catalog


def listing(what: str) -> tuple[list[dict], list[tuple[str, str]]]:
    """Records and table columns for nets, devices, networks or prices."""
    if what == "prices":
        return price_listing(date.today())
    if what == "stacks":
        from planner.stacks.listing import listing as stacks

        return stacks()
    if what == "instances":
        return instance_listing()
    if what == "fabrics":
        from planner.fabrics import listing as fabrics

        return fabrics()
    if what == "devices":
        recs = []
        for d in catalog.devices().values():
            peak = d.device.peak_flops
            recs.append(
                {
                    "device": d.key,
                    "name": d.name,
                    "fp32_tflops": peak["fp32"] / 1e12,
                    "fp16_tflops": peak["fp16"] / 1e12 if "fp16" in peak else None,
                    "memory_gb": d.device.memory_bytes / 1e9,
                    "mem_bandwidth_gbs": d.device.mem_bandwidth / 1e9,
                    "intra_node_link": d.device.intra_link,
                    # a node, or an NVLink domain wider than one (GB200 NVL72: 72)
                    "max_gpus_per_node": d.device.max_per_node,
                    "usd_per_gpu_hour": d.price_usd_per_hour,
                    "paleo": d.paleo,
                    "source": d.source,
                    "date": d.date,
                }
            )
        cols = [
            ("device", "device"),
            ("fp32_tflops", "fp32 TFLOP/s"),
            ("fp16_tflops", "fp16 TFLOP/s"),
            ("memory_gb", "mem GB"),
            ("mem_bandwidth_gbs", "mem GB/s"),
            ("intra_node_link", "node link"),
            ("max_gpus_per_node", "GPUs/node"),
            ("usd_per_gpu_hour", "$/GPU-h"),
            ("date", "date"),
            ("source_short", "source (full text: --format json)"),
        ]
        for r in recs:
            r["fp16_tflops"] = "-" if r["fp16_tflops"] is None else r["fp16_tflops"]
            r["usd_per_gpu_hour"] = "-" if r["usd_per_gpu_hour"] is None else r["usd_per_gpu_hour"]
        return _short(recs), cols
    if what == "networks":
        recs = [
            {
                "network": n.key,
                "name": n.name,
                "kind": n.kind,
                "bandwidth_gbit_s": n.link.bandwidth * 8 / 1e9,
                "latency_us": n.link.latency * 1e6,
                "paleo": n.paleo,
                "source": n.source,
                "date": n.date,
            }
            for n in catalog.networks().values()
        ]
        cols = [
            ("network", "network"),
            ("kind", "kind"),
            ("bandwidth_gbit_s", "Gbit/s"),
            ("latency_us", "latency us"),
            ("date", "date"),
            ("source_short", "source (full text: --format json)"),
        ]
        return _short(recs), cols
    recs = []
    for name, meta in catalog.zoo_info().items():
        recs.append(
            {
                "net": name,
                "name": meta.get("name", name),
                "default_batch": meta["layers"]["data"]["tensor"][0],
                "source": meta.get("source", ""),
            }
        )
    cols = [("net", "net"), ("default_batch", "batch"), ("name", "name"), ("source_short", "source")]
    recs = _short(recs)
    return recs, cols


def _short(recs: list[dict], width: int = 60) -> list[dict]:
    """Add a one-line, shortened source for tables (records keep the full text)."""
    for r in recs:
        src = " ".join(str(r.get("source", "")).split())
        r["source_short"] = src if len(src) <= width else src[: width - 3] + "..."
    return recs


PRICE_COLUMNS = [
    ("device", "device"),
    ("provider", "provider"),
    ("instance_short", "instance"),
    ("gpus_per_instance", "GPUs"),
    ("usd_per_hour", "$/h"),
    ("usd_per_gpu_hour", "$/GPU-h"),
    ("pricing", "pricing"),
    ("region", "region"),
    ("date", "date"),
    ("old", "old"),
]


def price_listing(today: date) -> tuple[list[dict], list[tuple[str, str]]]:
    """Every row of the price table; ``old`` flags rows read more than 12 months before ``today``."""
    from planner.pricing import is_old

    recs = []
    for r in catalog.price_rows():
        recs.append(
            {
                "device": r.device,
                "provider": r.provider,
                "instance": r.instance,
                "instance_short": r.instance if len(r.instance) <= 40 else r.instance[:37] + "...",
                "gpus_per_instance": r.gpus_per_instance,
                "usd_per_hour": r.usd_per_hour,
                "usd_per_gpu_hour": round(r.usd_per_gpu_hour, 4),
                "pricing": r.pricing,
                "region": r.region,
                "date": r.date,
                "old": "OLD" if is_old(r, today) else "",
                "source": r.source,
                "note": r.note,
            }
        )
    return _short(recs), PRICE_COLUMNS


def price_notes(records: list[dict]) -> str:
    """The footer of `planner list prices`: how many rows are old and how defaults are chosen."""
    old = sum(1 for r in records if r["old"])
    return (
        f"{len(records)} prices; {old} marked OLD were read more than 12 months ago: re-check them. "
        "Default price of a GPU: the median over providers of each one's cheapest on-demand price "
        "(--provider, --pricing and --price change it; under --pricing spot or reserved the same "
        "providers count, each at that rate where it publishes one, on demand where not). "
        "Sources: --format json."
    )


INSTANCE_COLUMNS = [
    ("id", "instance"),
    ("device", "device"),
    ("gpus", "GPUs"),
    ("vcpus", "vCPUs"),
    ("cpu_cores_per_gpu", "cores/GPU"),
    ("host_memory_gib", "host GiB"),
    ("network_text", "network"),
    ("local_nvme_gb", "NVMe GB"),
    ("usd_per_gpu_hour", "$/GPU-h"),
    ("date", "date"),
]


def instance_listing() -> tuple[list[dict], list[tuple[str, str]]]:
    """Every instance type of configs/instances.toml, with its on-demand price per GPU-hour (the
    cheapest row that names it) and its source."""
    from planner import hosts

    price: dict[str, float] = {}
    for r in catalog.price_rows():
        if r.host and r.pricing == "on-demand":
            price[r.host] = min(price.get(r.host, float("inf")), r.usd_per_gpu_hour)
    recs = []
    for i in hosts.instances().values():
        nic = f"{i.nics} x {i.nic_gbit_s:g} Gb/s {i.network}" if i.node_gbit_s else "not stated"
        recs.append(
            {
                "id": i.id,
                "device": i.device,
                "gpus": i.gpus,
                "vcpus": i.vcpus,
                "cpu_cores_per_gpu": round(i.cores / i.gpus, 2),
                "host_memory_gib": i.host_memory_gib,
                "network_text": nic,
                "nics": i.nics,
                "nic_gbit_s": i.nic_gbit_s,
                "local_nvme_gb": i.local_nvme_gb,
                "nvme_text": "-" if i.local_nvme_gb is None else f"{i.local_nvme_gb:,.0f}",
                "usd_per_gpu_hour": round(price[i.id], 4) if i.id in price else None,
                "date": i.date,
                "source": i.source,
                "note": i.note,
            }
        )
    return recs, [(k if k != "local_nvme_gb" else "nvme_text", h) for k, h in INSTANCE_COLUMNS]
