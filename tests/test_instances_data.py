"""configs/instances.toml (the machines behind the price rows) and its links from prices.toml.

Read with tomllib directly, so the data is checked whatever the loader does with it.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
REQUIRED = {"id": str, "provider": str, "instance": str, "device": str, "gpus": int, "vcpus": int}
REQUIRED |= {"source": str, "date": str}
OPTIONAL = {"cpu_cores": int, "cpu": str, "host_memory_gib": (int, float), "nics": int}
OPTIONAL |= {"nic_gbit_s": (int, float), "network": str, "local_nvme_gb": (int, float), "note": str}
NETWORKS = {"ethernet", "efa", "infiniband", "roce", "gpudirect-tcpx"}
# Instances with more GPUs than devices.toml's usual node for that device, and why.
MORE_THAN_A_NODE = {"gcp/a2-megagpu-16g": "16 GPUs in one VM"}
# Price rows of these providers all name a host, except these (provider, instance) pairs:
# no cited host description was found (instances.toml's header says why).
HOSTED_PROVIDERS = {"aws", "gcp", "azure", "lambda"}
UNHOSTED = {("gcp", "nvidia-tesla-p100 attached GPU")}


def _load(name: str) -> dict:
    with (CONFIGS / name).open("rb") as fh:
        return tomllib.load(fh)


INSTANCES = _load("instances.toml")["instance"]
BY_ID = {r["id"]: r for r in INSTANCES}
DEVICES = _load("devices.toml")
PRICES = _load("prices.toml")["price"]


def test_table_is_not_empty_and_ids_are_unique():
    assert len(INSTANCES) >= 25
    ids = [r["id"] for r in INSTANCES]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]


@pytest.mark.parametrize("row", INSTANCES, ids=lambda r: r.get("id", "?"))
def test_row_keys_types_and_values(row):
    missing = set(REQUIRED) - set(row)
    assert not missing, f"lacks {missing}"
    schema = REQUIRED | OPTIONAL
    assert not set(row) - set(schema), f"unknown keys {set(row) - set(schema)}"
    for k, v in row.items():
        assert isinstance(v, schema[k]) and not isinstance(v, bool), f"{k} has type {type(v).__name__}"
    # shell-safe: a Reproduce line with --instance needs no quoting
    assert row["id"].split("/", 1)[0] == row["provider"]
    assert re.fullmatch(r"[a-z0-9-]+/[A-Za-z0-9._-]+", row["id"])
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", row["provider"])
    assert row["device"] in DEVICES, f"device {row['device']} not in devices.toml"
    for k in ("gpus", "vcpus", "cpu_cores", "host_memory_gib", "nics", "nic_gbit_s"):
        if k in row:
            assert row[k] > 0, f"{k} = {row[k]}"
    assert row.get("local_nvme_gb", 0) >= 0
    assert row.get("cpu_cores", 0) <= row["vcpus"]
    assert ("nics" in row) == ("nic_gbit_s" in row), "nics and nic_gbit_s come together"
    assert row.get("network", "ethernet") in NETWORKS
    assert "http" in row["source"], "source names the page read"
    read = dt.date.fromisoformat(row["date"])
    assert dt.date(2016, 1, 1) <= read <= dt.date.today()


@pytest.mark.parametrize("row", INSTANCES, ids=lambda r: r["id"])
def test_gpus_fit_the_devices_node(row):
    limit = DEVICES[row["device"]]["max_gpus_per_node"]
    if row["id"] in MORE_THAN_A_NODE:
        assert row["gpus"] > limit and MORE_THAN_A_NODE[row["id"]] in row["note"]
    else:
        assert row["gpus"] <= limit


@pytest.mark.parametrize("price", [p for p in PRICES if "host" in p], ids=lambda p: p["host"])
def test_price_host_is_an_instance_of_the_same_device_and_provider(price):
    host = BY_ID.get(price["host"])
    assert host is not None, f"host {price['host']} is not in instances.toml"
    assert (host["provider"], host["device"]) == (price["provider"], price["device"])
    # A whole-instance price is for all of the host's GPUs; a per-GPU price is for one of them.
    assert price["gpus_per_instance"] in (1, host["gpus"])


def test_every_instance_hosts_a_price_and_big_providers_name_hosts():
    hosts = {p["host"] for p in PRICES if "host" in p}
    assert hosts == set(BY_ID), f"instances no price row names: {set(BY_ID) - hosts}"
    unhosted = {(p["provider"], p["instance"]) for p in PRICES if "host" not in p}
    assert {u for u in unhosted if u[0] in HOSTED_PROVIDERS} == UNHOSTED


def test_reference_rows_match_their_sources():
    # AWS EC2 User Guide (awsdocs commit d289961): p4d.24xlarge 96 vCPUs / 48 cores, 1152 GiB,
    # '4x 100 Gigabit' ENA | EFA, 8 x 1000 GB NVMe.
    p4d = BY_ID["aws/p4d.24xlarge"]
    assert (p4d["vcpus"], p4d["cpu_cores"], p4d["host_memory_gib"]) == (96, 48, 1152)
    assert (p4d["nics"], p4d["nic_gbit_s"], p4d["network"], p4d["local_nvme_gb"]) == (4, 100, "efa", 8000)
    # Azure ND H100 v5: 96 vCPUs, 1900 GiB, one 400 Gb/s InfiniBand NDR link per GPU.
    nd = BY_ID["azure/Standard_ND96isr_H100_v5"]
    assert (nd["gpus"], nd["vcpus"], nd["nics"], nd["nic_gbit_s"]) == (8, 96, 8, 400)
    assert nd["network"] == "infiniband" and nd["nics"] == nd["gpus"]
    # Google A3 High: 208 vCPUs, 1,872 GB (decimal, stored in GiB), 5 NICs, 1,000 Gbit/s in all.
    a3 = BY_ID["gcp/a3-highgpu-8g"]
    assert a3["vcpus"] == 208 and a3["host_memory_gib"] == pytest.approx(1872e9 / 2**30, abs=0.05)
    assert a3["nics"] * a3["nic_gbit_s"] == 1000


@pytest.mark.parametrize("key", sorted(k for k, v in DEVICES.items() if "jpeg_decoders" in v))
def test_jpeg_decoder_counts_are_cited(key):
    dev = DEVICES[key]
    assert isinstance(dev["jpeg_decoders"], int) and dev["jpeg_decoders"] >= 0
    assert "http" in dev["jpeg_source"] or "datasheet" in dev["jpeg_source"]
    assert re.search(r"read \d{4}-\d{2}-\d{2}", dev["jpeg_source"])


def test_jpeg_decoder_reference_counts():
    # A100 whitepaper p. 54: one 5-core NVJPG engine. NVIDIA's MIG User Guide, Supported MIG
    # Profiles, the full-GPU profile of each table: H100 80GB (PCIe and SXM5) 7g.80gb, H200
    # 7g.141gb and H100 on GH200 7g.96gb "7 NVDECs /7 JPEG"; A30 4g.24gb "1 JPEG". Product
    # datasheets' "Decoders" rows: NVIDIA Blackwell datasheet "7 NVDEC, 7 nvJPEG" per HGX B200 and
    # GB200 NVL72 GPU; Blackwell Ultra datasheet the same per HGX B300 GPU; NVIDIA L4 page
    # "NVENC | NVDEC | JPEG decoders" "2 | 4 | 4". AMD rocJPEG docs: MI300X 32 JPEG cores (unused
    # by planner: DALI is CUDA-only).
    got = {k: v["jpeg_decoders"] for k, v in DEVICES.items() if "jpeg_decoders" in v}
    assert got["A100_40GB"] == got["A100_80GB"] == got["A100_40GB_PCIE"] == got["A100_80GB_PCIE"] == 1
    assert got["H100_SXM"] == got["H100_PCIE"] == got["H200"] == got["GH200"] == 7
    assert got["B200"] == got["GB200"] == got["B300"] == 7 and got["L4"] == 4
    assert got["A30"] == 1 and got["MI300X"] == 32
    for key in ("H100_SXM", "H100_PCIE", "H200", "GH200", "A30"):
        assert "docs.nvidia.com/datacenter/tesla/mig-user-guide" in DEVICES[key]["jpeg_source"]
    for key in ("B200", "GB200"):
        assert "blackwell-datasheet" in DEVICES[key]["jpeg_source"]
    assert "blackwell-ultra-datasheet" in DEVICES["B300"]["jpeg_source"]
    assert "nvidia.com/en-us/data-center/l4/" in DEVICES["L4"]["jpeg_source"]
    # no vendor source found (see the devices.toml header): absent, not zero
    assert not {"L40", "L40S", "T4", "V100_16GB", "A10G", "H800", "MI325X"} & set(got)
    assert all("jpeg_source" in DEVICES[k] for k in got)
    assert not any("jpeg_source" in v and "jpeg_decoders" not in v for v in DEVICES.values())
