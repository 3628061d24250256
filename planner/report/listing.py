"""`planner list`: the catalogs as records, with units in the column names."""

from __future__ import annotations

from planner import catalog


def listing(what: str) -> tuple[list[dict], list[tuple[str, str]]]:
    """Records and table columns for nets, devices or networks."""
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
