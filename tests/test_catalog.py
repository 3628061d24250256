"""The catalogs in configs/: devices, networks, prices (paleo-model.md §C) and their validation."""

from __future__ import annotations

import re
import shutil

import pytest

from costs.hardware import PRECISIONS
from planner import catalog
from planner.errors import CatalogError, PlannerError

# paleo-model.md §C: key -> (clock MHz, peak GFLOPS, memory bandwidth "GB/s")
PALEO_DEVICES = {
    "TITAN_X": (1000, 6144, 336.5),
    "K20": (1000, 3520, 208),
    "K20X": (1000, 3935, 250),
    "K40": (745, 4290, 288),
    "K80": (560, 5600, 480),
    "GEFORCE_780_TI": (875, 5040, 336),
    "GEFORCE_750_M": (941, 722.7, 80),
    "CPU_I7": (210000, 289, 68),
}
# paleo-model.md §C: key -> Gbit/s
PALEO_NETWORKS = {"aws": 2, "ethernet": 10, "ethernet20": 20, "infiniband": 70, "pcie2": 64, "pcie3": 128}
MODERN = [
    "P100",
    "V100_16GB",
    "V100_32GB",
    "T4",
    "A10G",
    "L4",
    "A100_40GB",
    "A100_80GB",
    "H100_SXM",
    "H100_PCIE",
    "H200",
    "B200",
    "MI250X",
    "MI300X",
]

# Devices added beside the first modern set: key -> (fp32 TFLOP/s, fp16 TFLOP/s or None, memory GB,
# GB/s, TDP W), as cited in configs/devices.toml (vendor datasheets and spec pages named there).
ADDED = {
    "K80_DIE": (2.8, None, 12, 240, 150),
    "M40": (6.844, None, 12, 288.4, 250),
    "P40": (11.76, None, 24, 346, 250),
    "TITAN_XP": (12.15, None, 12, 547.7, 250),
    "RTX_2080_TI": (13.45, 53.8, 11, 616, 250),
    "A100_40GB_PCIE": (19.5, 312.0, 40, 1555, 250),
    "A100_80GB_PCIE": (19.5, 312.0, 80, 1935, 300),
    "A30": (10.32, 165.2, 24, 933, 165),
    "RTX_3090": (35.6, 71.0, 24, 936, 350),
    "RTX_A6000": (38.7, 154.8, 48, 768, 300),
    "RTX_4090": (82.6, 165.2, 24, 1008, 450),
    "L40S": (91.6, 362.05, 48, 864, 350),
    "L40": (90.5, 181.05, 48, 864, 300),
    "GH200": (67.0, 990.0, 96, 4000, 1000),
    "MI250": (45.3, 362.1, 128, 3276.8, 560),  # AMD CDNA 2 white paper Table 1: "500W & 560W TDP"
    "MI325X": (163.4, 1307.4, 256, 6000, 1000),
}
# GeForce FP16 tensor peaks with FP16 accumulate (the vendor headline, dense): Turing whitepaper
# via github.com/sultim-t/prboom-plus-rt/issues/98 (2080 Ti 107.6); Tom's Hardware spec tables
# (3090: 142; 4090: 661 with sparsity -> 330.5, waredb.com dense FP8/FP32-acc 330.3).
GEFORCE_FP16_ACC = {"RTX_2080_TI": 107.6, "RTX_3090": 142.0, "RTX_4090": 330.5}
# Generations with tensor/matrix TF32, BF16 and FP8 (devices.toml header: which precisions exist).
# CDNA 4 has BF16 and FP8 matrix cores but no TF32 unit (AMD CDNA 4 whitepaper; devices.toml MI355X).
TF32_GENERATIONS = {"Ampere", "Ada Lovelace", "Hopper", "Blackwell", "CDNA3"}
BF16_GENERATIONS = TF32_GENERATIONS | {"CDNA2", "CDNA4"}
FP8_GENERATIONS = {"Ada Lovelace", "Hopper", "Blackwell", "CDNA3", "CDNA4"}

DEVICES = catalog.devices()
NETWORKS = catalog.networks()


def _clear_caches():
    catalog.devices.cache_clear()
    catalog.networks.cache_clear()
    catalog.prices.cache_clear()
    catalog.price_rows.cache_clear()


# ---- devices -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(DEVICES))
def test_every_device_is_complete(key):
    d = DEVICES[key]
    assert d.key == key == d.device.name
    assert d.source.strip() and d.date.strip()
    assert re.fullmatch(r"(19|20)\d\d-(0[1-9]|1[0-2])", d.date), d.date
    assert d.name.strip() and d.vendor.strip()
    dev = d.device
    assert dev.peak_flops["fp32"] > 0
    assert set(dev.peak_flops) <= set(PRECISIONS)
    assert all(v > 0 for v in dev.peak_flops.values())
    assert dev.memory_bytes > 0
    assert dev.mem_bandwidth > 0
    assert dev.clock_hz > 0
    assert dev.max_per_node >= 1
    # Units: the catalog's GB, GB/s, MHz and TFLOP/s become bytes, bytes/s, Hz and FLOP/s.
    raw = d.raw
    assert dev.memory_bytes == pytest.approx(raw["memory_gb"] * 2**30)  # binary, as vendors mean it
    assert dev.mem_bandwidth == pytest.approx(raw["mem_bandwidth_gbs"] * 1e9)
    assert dev.clock_hz == pytest.approx(raw["clock_mhz"] * 1e6)
    assert dev.peak_flops["fp32"] == pytest.approx(raw["peak_tflops"]["fp32"] * 1e12)


@pytest.mark.parametrize("key", list(DEVICES))
def test_every_intra_node_link_exists(key):
    link = DEVICES[key].device.intra_link
    assert link in NETWORKS
    assert NETWORKS[link].kind == "intra_node"


@pytest.mark.parametrize("key", list(PALEO_DEVICES))
def test_paleo_devices_exactly(key):
    mhz, gflops, gbs = PALEO_DEVICES[key]
    d = DEVICES[key]
    assert d.paleo is True
    assert d.raw["clock_mhz"] == mhz
    assert d.raw["mem_bandwidth_gbs"] == gbs
    assert round(d.raw["peak_tflops"]["fp32"] * 1000, 6) == gflops
    assert round(d.device.peak_flops["fp32"] / 1e9, 6) == gflops
    assert round(d.device.clock_hz / 1e6, 6) == mhz
    assert round(d.device.mem_bandwidth / 1e9, 6) == gbs
    assert set(d.device.peak_flops) == {"fp32"}  # PALEO knows fp32 only


def test_paleo_flag_marks_exactly_the_eight():
    assert {k for k, d in DEVICES.items() if d.paleo} == set(PALEO_DEVICES)


@pytest.mark.parametrize("key", MODERN)
def test_modern_devices_exist(key):
    d = catalog.device(key)
    assert d.paleo is False
    assert d.device.peak_flops["fp32"] > 1e12
    if key not in ("P100", "V100_16GB", "V100_32GB", "T4"):  # no bf16 before Ampere / CDNA2
        assert "bf16" in d.device.peak_flops


def test_tensor_precisions_are_faster_than_fp32():
    for key, d in DEVICES.items():
        peak = d.device.peak_flops
        for p in ("fp16", "bf16", "tf32"):
            if p in peak:
                assert peak[p] >= peak["fp32"], (key, p)


# default (median on-demand) prices of the added devices that have rows in prices.toml: GH200 lambda
# 2.29 and coreweave 6.50; RTX_A6000 lambda 1.09 and hyperstack 0.50; A100_80GB_PCIE crusoe 2.00 and
# runpod 1.59; L40S runpod 1.09, crusoe 1.50, nebius 1.55, coreweave 18.00 / 8; RTX_4090 runpod 0.74;
# MI325X tensorwave 1.95
PRICED_LATER = {
    "GH200": (2.29 + 6.50) / 2,
    "RTX_A6000": (1.09 + 0.50) / 2,
    "A100_80GB_PCIE": (2.00 + 1.59) / 2,
    "L40S": (1.50 + 1.55) / 2,
    "RTX_4090": 0.74,
    "MI325X": 1.95,
}


@pytest.mark.parametrize("key", list(ADDED))
def test_added_devices(key):
    fp32, fp16, mem_gb, gbs, tdp = ADDED[key]
    d = DEVICES[key]
    assert d.paleo is False
    if key in PRICED_LATER:  # on-demand rows read 2026-05 to 2026-09 (prices.toml)
        assert d.price_usd_per_hour == pytest.approx(PRICED_LATER[key])
    else:
        assert d.price_usd_per_hour is None  # no price: they stay out of default searches
    assert d.raw["peak_tflops"]["fp32"] == fp32
    assert d.raw["peak_tflops"].get("fp16") == fp16
    assert (d.raw["memory_gb"], d.raw["mem_bandwidth_gbs"], d.raw["tdp_w"]) == (mem_gb, gbs, tdp)
    assert d.device.peak_flops["fp32"] == pytest.approx(fp32 * 1e12)


def test_k80_die_is_half_a_k80_board():
    board, die = DEVICES["K80"], DEVICES["K80_DIE"]
    for k in ("memory_gb", "mem_bandwidth_gbs", "tdp_w"):
        assert die.raw[k] * 2 == board.raw[k], k
    assert die.raw["peak_tflops"]["fp32"] * 2 == board.raw["peak_tflops"]["fp32"]
    assert die.raw["clock_mhz"] == board.raw["clock_mhz"]
    assert die.device.max_per_node == 2 * board.device.max_per_node  # AWS p2.16xlarge: 16 dies, 8 boards
    assert die.device.intra_link == board.device.intra_link
    assert board.paleo and not die.paleo


@pytest.mark.parametrize("key", list(GEFORCE_FP16_ACC))
def test_geforce_fp16_is_the_fp32_accumulate_rate(key):
    """GeForce cards run FP16 tensor math with FP32 accumulate at half the FP16-accumulate rate."""
    assert DEVICES[key].raw["peak_tflops"]["fp16"] == pytest.approx(GEFORCE_FP16_ACC[key] / 2, rel=2e-3)
    # the professional GA102 (RTX A6000) runs it at full rate: 4x its FP32 rate, the 3090 only 2x
    a6000, g3090 = DEVICES["RTX_A6000"].raw["peak_tflops"], DEVICES["RTX_3090"].raw["peak_tflops"]
    assert a6000["fp16"] / a6000["fp32"] == pytest.approx(4, rel=1e-3)
    assert g3090["fp16"] / g3090["fp32"] == pytest.approx(2, rel=1e-2)


@pytest.mark.parametrize("key", list(DEVICES))
def test_precisions_follow_the_generation(key):
    d = DEVICES[key]
    peak, gen = d.raw["peak_tflops"], d.raw.get("generation", "")
    assert ("tf32" in peak) == (gen in TF32_GENERATIONS), (key, gen)
    assert ("bf16" in peak) == (gen in BF16_GENERATIONS), (key, gen)
    assert ("fp8" in peak) == (gen in FP8_GENERATIONS), (key, gen)


@pytest.mark.parametrize("key", list(DEVICES))
def test_pcie_cards_use_a_pcie_link(key):
    d = DEVICES[key]
    if d.raw.get("form_factor") == "pcie":
        assert d.device.intra_link.startswith("pcie"), key


# ---- networks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(PALEO_NETWORKS))
def test_paleo_networks_exactly(key):
    n = NETWORKS[key]
    assert n.paleo is True
    assert n.raw["bandwidth_gbit_s"] == PALEO_NETWORKS[key]
    assert n.link.bandwidth == PALEO_NETWORKS[key] * 1e9 / 8  # decimal bytes/s (§B.5 item 2)


def test_paleo_network_flag_marks_exactly_the_six():
    assert {k for k, n in NETWORKS.items() if n.paleo} == set(PALEO_NETWORKS)


@pytest.mark.parametrize("key", list(NETWORKS))
def test_every_network_is_complete(key):
    n = NETWORKS[key]
    assert n.key == key == n.link.name
    assert n.source.strip() and n.date.strip() and n.name.strip()
    assert n.kind in ("inter_node", "intra_node")
    assert n.link.bandwidth > 0
    assert n.link.latency >= 0
    assert n.link.latency == pytest.approx(n.raw["latency_us"] * 1e-6)
    assert n.link.latency < 1e-3  # microseconds, not milliseconds or seconds


# ---- prices ------------------------------------------------------------------------------------


def test_prices_reference_existing_devices():
    prices = catalog.prices()
    assert prices
    for key, p in prices.items():
        assert key in DEVICES, key
        assert p.usd_per_gpu_hour > 0 and p.source.strip()
        assert DEVICES[key].price_usd_per_hour == p.usd_per_gpu_hour
        assert DEVICES[key].price_source == p.source
    for key, d in DEVICES.items():
        if key not in prices:
            assert d.price_usd_per_hour is None and d.price_source is None
    for r in catalog.price_rows():
        assert r.source.strip() and r.date.strip() and r.provider.strip() and r.region.strip()


def test_paleo_demo_price():
    assert catalog.prices()["TITAN_X"].usd_per_gpu_hour == 0.9  # paleo-model.md §C web demo


# ---- lookups -----------------------------------------------------------------------------------


def test_lookup_is_case_and_dash_insensitive():
    assert catalog.device("titan_x").key == "TITAN_X"
    assert catalog.device("h100-sxm").key == "H100_SXM"
    assert catalog.network("InfiniBand").key == "infiniband"


def test_unknown_device_lists_valid_names_and_suggests():
    with pytest.raises(CatalogError) as info:
        catalog.device("V100_16G")
    msg = str(info.value)
    assert "unknown device 'V100_16G'" in msg
    for key in DEVICES:
        assert key in msg
    assert "did you mean V100_16GB?" in msg
    assert "\n" not in msg
    assert isinstance(info.value, PlannerError) and info.value.exit_code == 2


def test_unknown_device_without_close_match():
    with pytest.raises(CatalogError) as info:
        catalog.device("zzzzzzzzzz")
    assert "did you mean" not in str(info.value)
    assert "TITAN_X" in str(info.value)


def test_unknown_network_lists_valid_names_and_suggests():
    with pytest.raises(CatalogError) as info:
        catalog.network("infiniban")
    msg = str(info.value)
    for key in NETWORKS:
        assert key in msg
    assert "did you mean infiniband?" in msg


def test_tables_follow_the_requested_order():
    table = catalog.device_table(["K80", "TITAN_X"])
    assert table.names == ("K80", "TITAN_X")
    assert table.peak[1, PRECISIONS.index("fp32")] == DEVICES["TITAN_X"].device.peak_flops["fp32"]
    links = catalog.link_table(["infiniband", "pcie3"])
    assert links.bandwidth.tolist() == [70e9 / 8, 128e9 / 8]


def test_zoo_and_aliases():
    zoo = catalog.zoo()
    for name in ("alexnet", "alexnet_cc2", "vgg16", "nin", "overfeat", "inception_v3"):
        assert name in zoo
    assert catalog.net_path("alex_v2") == zoo["alexnet"]
    assert catalog.net_path("alex_v2_1gpu") == zoo["alexnet_cc2"]
    with pytest.raises(CatalogError, match="did you mean alexnet"):
        catalog.net_path("alexnt")


# ---- strict validation ---------------------------------------------------------------------------


@pytest.fixture
def configs_copy(tmp_path, monkeypatch):
    """A private copy of configs/ that PLANNER_CONFIGS points at; caches cleared around it."""
    dst = tmp_path / "configs"
    shutil.copytree(catalog.configs_dir(), dst)
    monkeypatch.setenv("PLANNER_CONFIGS", str(dst))
    _clear_caches()
    yield dst
    _clear_caches()


def _edit(path, old: str, new: str):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_copy_validates_unchanged(configs_copy):
    assert catalog.configs_dir() == configs_copy
    assert set(catalog.devices()) == set(DEVICES)
    assert set(catalog.networks()) == set(NETWORKS)


def test_unknown_device_key_is_rejected(configs_copy):
    _edit(configs_copy / "devices.toml", "[K40]\n", "[K40]\nboost_clock_mhz = 875\n")
    with pytest.raises(CatalogError) as info:
        catalog.devices()
    msg = str(info.value)
    assert "devices.toml" in msg and "K40" in msg and "boost_clock_mhz" in msg
    assert "\n" not in msg


def test_unknown_network_key_is_rejected(configs_copy):
    _edit(configs_copy / "networks.toml", "[ethernet]\n", "[ethernet]\nmtu = 9000\n")
    with pytest.raises(CatalogError, match=r"networks\.toml.*ethernet.*mtu"):
        catalog.networks()


def test_unknown_price_key_is_rejected(configs_copy):
    _edit(configs_copy / "prices.toml", 'device = "K80"\n', 'device = "K80"\nspot = 0.3\n')
    with pytest.raises(
        CatalogError, match=r"prices\.toml: \[\[price\]\] row \d+ \(K80 aws\): unknown key.*spot"
    ):
        catalog.price_rows()


def test_missing_device_key_is_rejected(configs_copy):
    _edit(configs_copy / "devices.toml", "mem_bandwidth_gbs = 288\n", "")
    with pytest.raises(CatalogError, match=r"devices\.toml.*K40.*lacks mem_bandwidth_gbs"):
        catalog.devices()


def test_wrong_type_is_rejected(configs_copy):
    _edit(configs_copy / "devices.toml", "clock_mhz = 745 ", 'clock_mhz = "745" ')
    with pytest.raises(CatalogError, match=r"K40.*clock_mhz.*wrong type"):
        catalog.devices()


def test_unknown_precision_is_rejected(configs_copy):
    _edit(configs_copy / "devices.toml", "[K40.peak_tflops]\n", "[K40.peak_tflops]\nfp4 = 9.0\n")
    with pytest.raises(CatalogError, match=r"K40.*fp4"):
        catalog.devices()


def test_dangling_intra_node_link_is_rejected(configs_copy):
    _edit(configs_copy / "devices.toml", 'intra_node_link = "nvlink4"', 'intra_node_link = "nvlink9"')
    with pytest.raises(CatalogError, match="nvlink9"):
        catalog.devices()


def test_price_for_unknown_device_is_rejected(configs_copy):
    with (configs_copy / "prices.toml").open("a") as fh:
        fh.write('\n[GHOST_GPU]\nusd_per_gpu_hour = 1.0\nprovider = "x"\nsource = "x"\ndate = "2024-01"\n')
    with pytest.raises(CatalogError, match="GHOST_GPU"):
        catalog.devices()


def test_malformed_toml_is_a_catalog_error(configs_copy):
    (configs_copy / "networks.toml").write_text("[ethernet\nname = 1\n")
    with pytest.raises(CatalogError, match=r"networks\.toml.*malformed TOML"):
        catalog.networks()


def test_missing_catalog_file(configs_copy):
    (configs_copy / "devices.toml").unlink()
    with pytest.raises(CatalogError, match=r"devices\.toml not found"):
        catalog.devices()


def test_cli_reports_a_broken_catalog_in_one_line(configs_copy, capsys):
    from planner.cli import main

    _edit(configs_copy / "devices.toml", "[K40]\n", "[K40]\nboost_clock_mhz = 875\n")
    code = main(["list", "devices"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("error: devices.toml: [K40]") and err.count("\n") == 1
    assert "boost_clock_mhz" in err and "Traceback" not in err
