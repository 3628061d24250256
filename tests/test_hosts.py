"""Hosts (planner.hosts) and per-GPU data loaders (planner.loaders): the instance a plan sits in
sets its price, its host cores and its NICs; the rule that picks it; the loaders per GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner import catalog, host_table, hosts, loaders
from planner.errors import BadInput, CatalogError
from planner.pricing import PriceRow

INST = {
    "x/one": hosts.Instance(
        "x/one", "x", "one", "A100_40GB", 1, 12, "s", "2026-11-24", nics=1, nic_gbit_s=25.0
    ),
    "x/eight": hosts.Instance(
        "x/eight", "x", "eight", "A100_40GB", 8, 96, "s", "2026-11-24", cpu_cores=48, nics=4, nic_gbit_s=100.0
    ),
    "y/eight": hosts.Instance("y/eight", "y", "eight", "A100_40GB", 8, 240, "s", "2026-11-24"),
    "z/eight": hosts.Instance(
        "z/eight", "z", "eight", "A100_40GB", 8, 128, "s", "2026-11-24", nics=8, nic_gbit_s=200.0
    ),
}


def row(provider, usd, host="", gpus=1, pricing="on-demand", instance=None):
    return PriceRow(
        "A100_40GB",
        provider,
        instance or host or "per GPU",
        gpus,
        usd * gpus,
        pricing,
        "r",
        "s",
        "2026-11",
        "",
        host,
    )


@pytest.fixture
def known(monkeypatch):
    monkeypatch.setattr(hosts, "instances", lambda: INST)
    return INST


def test_median_priced_offer_of_the_node_size_sets_price_and_host(known):
    rows = [
        row("x", 3.0, "x/eight", 8),
        row("y", 2.0, "y/eight", 8),
        row("z", 4.0, "z/eight", 8),
        row("x", 1.0, "x/one"),
    ]
    h = host_table.choose(rows, "A100_40GB", 8, "on-demand", None, hosts.Overrides(), 100.0, 8)
    # three providers' 8-GPU offers at 2, 3, 4 $/GPU-h: the median is x's, its instance the host
    assert h.usd_per_gpu_hour == 3.0 and h.id == "x/eight" and h.offers == 3
    assert h.cpu_cores_per_gpu == 48 / 8  # stated physical cores
    assert h.nics == 4 * 100 / 100  # 4 x 100 Gb/s = 4 links of --network's 100 Gb/s
    # two offers: the lower of the two middle ones, so the price is one someone rents
    two = host_table.choose(rows[:2], "A100_40GB", 8, "on-demand", None, hosts.Overrides(), 100.0, 8)
    assert two.usd_per_gpu_hour == 2.0 and two.id == "y/eight"
    assert two.cpu_cores_per_gpu == 240 / 2 / 8  # vCPUs / 2 where cores are not stated
    assert two.nics is None  # network not stated: one NIC per GPU at --network's rate
    one = host_table.choose(rows, "A100_40GB", 1, "on-demand", None, hosts.Overrides(), 100.0, 8)
    assert one.id == "x/one" and one.usd_per_gpu_hour == 1.0 and one.nics == 0.25


def test_no_offer_of_a_node_size_means_it_is_not_rented(known):
    rows = [row("x", 3.0, "x/eight", 8), row("x", 1.0, "x/one")]
    assert host_table.choose(rows, "A100_40GB", 4, "on-demand", None, hosts.Overrides(), 100.0, 8) is None
    # a row whose instance is not described offers every size the device comes in, on the assumed host
    loose = rows + [row("w", 2.5)]
    h = host_table.choose(loose, "A100_40GB", 4, "on-demand", None, hosts.Overrides(), 100.0, 8)
    assert h.instance is None and h.usd_per_gpu_hour == 2.5
    assert h.cpu_cores_per_gpu == catalog.host_cores_per_gpu()
    assert host_table.choose(loose, "A100_40GB", 16, "on-demand", None, hosts.Overrides(), 100.0, 8) is None


def test_providers_pricing_and_instance_filters(known):
    rows = [
        row("x", 3.0, "x/eight", 8),
        row("x", 1.5, "x/eight", 8, pricing="spot"),
        row("z", 4.0, "z/eight", 8),
    ]
    spot = host_table.choose(rows, "A100_40GB", 8, "spot", None, hosts.Overrides(), 100.0, 8)
    assert spot.usd_per_gpu_hour == 1.5  # z has no spot rate: its on-demand one counts (4.0)
    assert "2 providers" in spot.price_source
    only_z = host_table.choose(rows, "A100_40GB", 8, "on-demand", ("z",), hosts.Overrides(), 100.0, 8)
    assert only_z.id == "z/eight" and only_z.nics == 16.0
    # a kind nobody kept publishes: not offered
    assert host_table.choose(rows, "A100_40GB", 8, "spot", ("z",), hosts.Overrides(), 100.0, 8) is None
    pinned = host_table.choose(
        rows, "A100_40GB", 8, "on-demand", None, hosts.Overrides(("z/eight",)), 100.0, 8
    )
    assert pinned.id == "z/eight"


def test_overrides_replace_cores_and_nics(known):
    rows = [row("x", 3.0, "x/eight", 8)]
    over = hosts.Overrides(cpu_cores_per_gpu=2.0, nics=1)
    h = host_table.choose(rows, "A100_40GB", 8, "on-demand", None, over, 100.0, 8)
    assert (h.cpu_cores_per_gpu, h.nics, h.id) == (2.0, 1.0, "x/eight")


@pytest.mark.parametrize(
    "instance, cores, nics, message",
    [
        ("nope/none", None, None, "--instance 'nope/none' names no known instance"),
        (None, 0, None, "--cpu-cores-per-gpu 0 must be in (0, 1024]"),
        (None, -3.5, None, "--cpu-cores-per-gpu -3.5 must be in (0, 1024]"),
        (None, float("nan"), None, "--cpu-cores-per-gpu nan must be in (0, 1024]"),
        (None, 1e9, None, "--cpu-cores-per-gpu 1000000000.0 must be in (0, 1024]"),
        (None, None, 0, "--nics 0 must be an integer in [1, 1024]"),
        (None, None, 5000, "--nics 5000 must be an integer in [1, 1024]"),
    ],
)
def test_bad_host_options_are_one_line_errors(instance, cores, nics, message):
    with pytest.raises(BadInput) as e:
        hosts.parse_overrides(instance, cores, nics)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_instances_table_is_validated():
    devices = set(catalog.devices())
    good = {"id": "a/b", "provider": "a", "instance": "b", "device": "T4", "gpus": 1, "vcpus": 4}
    good |= {"source": "s", "date": "2026-11-24"}
    assert hosts.parse_instances({"instance": [good]}, devices)["a/b"].cores == 2.0
    for bad, msg in [
        ({**good, "gpus": 0}, "gpus must be positive"),
        ({**good, "device": "T5"}, "device 'T5' is not in devices.toml"),
        ({**good, "id": "a/c"}, "id must be 'a/b'"),
        ({**good, "vcpus": "4"}, "vcpus has the wrong type"),
        ({**good, "colour": "red"}, "unknown key(s) colour"),
        ({k: v for k, v in good.items() if k != "source"}, "lacks source"),
        ({**good, "date": "yesterday"}, "date 'yesterday'"),
    ]:
        with pytest.raises(CatalogError, match=None) as e:
            hosts.parse_instances({"instance": [bad]}, devices)
        assert msg in str(e.value), (msg, str(e.value))
    with pytest.raises(CatalogError, match="repeats an earlier id"):
        hosts.parse_instances({"instance": [good, good]}, devices)


def _table(keys, cores=14.0):
    host = hosts.Host(None, cores, None, math.nan, "")
    return host_table.HostArrays((1, 8), tuple((host, host) for _ in keys), tuple(keys))


def test_cpu_loader_is_cores_times_the_cited_rate_per_core():
    per_core = catalog.loader_rates()["cpu_jpeg"]["samples_per_s_per_core"]
    assert per_core == 182.0  # DALI issue 2326: 11,647 img/s on 64 cores
    rate, decode = loaders.per_plan("cpu", _table(["T4"], cores=2.0), np.array([0, 0]), np.array([1, 8]))
    assert rate.tolist() == [364.0, 364.0] and decode.tolist() == [0.0, 0.0]


def test_dali_per_gpu_hardware_decoder_sm_decoding_and_no_dali_on_amd():
    keys = ["A100_40GB", "V100_16GB", "MI300X"]
    table = _table(keys)
    rate, decode = loaders.per_plan("dali", table, np.array([0, 1, 2]), np.array([8, 8, 8]))
    hw = catalog.loader_rates()["gpu_dali"]["samples_per_s_per_gpu"]
    assert rate[0] == hw == 7000.0 and decode[0] == 0.0  # A100's NVJPG: the blog's measured rate
    # V100 has no hardware JPEG decoder: decoding runs on its SMs, charged as GPU time per image
    v100_fp32 = catalog.device("V100_16GB").device.peak_flops["fp32"]
    sm = catalog.loader_rates()["gpu_dali_sm"]["samples_per_s_per_gpu"] * v100_fp32 / loaders.A100_FP32_FLOPS
    assert np.isinf(rate[1]) and decode[1] == pytest.approx(1.0 / sm)
    # DALI is CUDA-only: an AMD GPU's images are decoded on the host's cores
    assert rate[2] == 182.0 * 14.0 and decode[2] == 0.0
    assert loaders.device_mode("dali", "MI300X") == "cpu"
    assert "CUDA-only" in loaders.describe("dali", table, 2, 8)["loader"]
    assert "its 32 hardware JPEG cores serve AMD's rocJPEG" in loaders.describe("dali", table, 2, 8)["loader"]


@pytest.mark.parametrize(
    "key", ["A30", "L4", "H100_PCIE", "H100_SXM", "H200", "GH200", "B200", "GB200", "B300"]
)
def test_dali_uses_the_vendor_cited_hardware_decoders(key):
    """NVIDIA's MIG User Guide or product datasheets give these GPUs JPEG engines (devices.toml)."""
    assert loaders.device_mode("dali", key) == "dali-hw"
    rate, decode = loaders.per_plan("dali", _table([key]), np.array([0]), np.array([8]))
    assert rate[0] == 7000.0 and decode[0] == 0.0


@pytest.mark.parametrize("key", ["L40", "L40S", "H800", "A10G", "T4"])
def test_dali_without_a_cited_decoder_decodes_on_the_sms(key):
    """No vendor source states these GPUs' JPEG engines: the conservative reading, SM decoding."""
    assert loaders.device_mode("dali", key) == "dali-sm"
    assert (
        "no hardware JPEG decoder cited in the catalog"
        in loaders.describe("dali", _table([key]), 0, 8)["loader"]
    )
