"""The frontier rows of the catalogs (GB200 NVL72, B300, MI355X / MI350X, 800G fabrics) against
the vendor figures their sources in configs/devices.toml and configs/networks.toml cite."""

from __future__ import annotations

import pytest

from planner import catalog

DEVICES = catalog.devices()
NETWORKS = catalog.networks()

# nvidia.com GB200 NVL72 spec table, GB200 Grace Blackwell Superchip column (2 GPUs): FP32 160
# TFLOPS; TF32 5, FP16/BF16 10, FP8 20 PFLOPS with sparsity ("Dense is one-half sparse spec
# shown"); 372 GB HBM3E, 16 TB/s; NVLink 3.6 TB/s.
GB200_SUPERCHIP = {
    "fp32": 160.0,
    "tf32": 5000.0 / 2,
    "bf16": 10000.0 / 2,
    "fp16": 10000.0 / 2,
    "fp8": 20000.0 / 2,
}
# nvidia.com HGX page, HGX B300 (8 GPUs): FP32 600 TFLOPS; TF32 18, FP16/BF16 36, FP8 72 PFLOPS
# with sparsity; 2.1 TB.
HGX_B300 = {"fp32": 600.0, "tf32": 18000.0 / 2, "bf16": 36000.0 / 2, "fp16": 36000.0 / 2, "fp8": 72000.0 / 2}
# AMD CDNA 4 whitepaper: 256 CUs; FLOP per clock per CU: vector FP32 256, matrix FP16/BF16 4096,
# FP8 8192 (dense); peak engine clock MI355X 2.4 GHz, MI350X 2.2 GHz; AMD's rounded headlines:
# MI355X 2.5 PFLOPS FP16 and 5 PFLOPS FP8, MI350X 2.3 and 4.6.
CDNA4_PER_CU = {"fp32": 256, "fp16": 4096, "bf16": 4096, "fp8": 8192}
CDNA4 = {"MI355X": (2.4, 1400, 2.5, 5.0), "MI350X": (2.2, 1000, 2.3, 4.6)}


def test_gb200_is_half_a_superchip():
    raw = DEVICES["GB200"].raw
    for p, superchip in GB200_SUPERCHIP.items():
        assert raw["peak_tflops"][p] == pytest.approx(superchip / 2), p
    assert (raw["memory_gb"], raw["mem_bandwidth_gbs"]) == (372 / 2, 16000 / 2)
    assert raw["tdp_w"] == 1200  # NVIDIA Blackwell Ultra blog, Table 1: Blackwell up to 1,200 W
    # GB200 NVL72: one NVLink domain of 72 GPUs at 3.6 TB/s per superchip = 900 GB/s per direction
    assert DEVICES["GB200"].device.max_per_node == 72
    link = NETWORKS[raw["intra_node_link"]]
    assert link.kind == "intra_node"
    assert link.link.bandwidth == pytest.approx(3.6e12 / 2 / 2)
    assert 72 * link.link.bandwidth * 2 == pytest.approx(130e12, rel=0.01)  # "130 TB/s" per rack


def test_b300_is_an_eighth_of_hgx_b300():
    raw = DEVICES["B300"].raw
    for p, hgx in HGX_B300.items():
        assert raw["peak_tflops"][p] == pytest.approx(hgx / 8), p
    assert raw["memory_gb"] * 8 == pytest.approx(2100, rel=0.03)  # "2.1 TB"
    # NVIDIA Blackwell Ultra datasheet, HGX B300 column: "270 GB HBM3E | 7.7 TB/s", "Configurable
    # up to 1,100 W" (8 TB/s and 1,400 W are its GB300 NVL72 column, not this 8-GPU board)
    assert (raw["mem_bandwidth_gbs"], raw["tdp_w"]) == (7700, 1100)
    assert raw["intra_node_link"] == "nvlink5" and DEVICES["B300"].device.max_per_node == 8


def test_b200_is_the_hgx_b200_column_of_the_blackwell_datasheet():
    # NVIDIA Blackwell datasheet, HGX B200 (per GPU): FP32 75 TFLOPS; FP16/BF16 4.5, FP8/FP6 9 PFLOPS
    # (sparse; dense is one-half); "180 GB HBM3E | 7.7 TB/s"; "Configurable up to 1,000 W". The
    # GB200 columns' 8 TB/s belongs to the GB200 row.
    raw = DEVICES["B200"].raw
    assert raw["peak_tflops"]["fp32"] == 75.0
    assert (raw["peak_tflops"]["bf16"], raw["peak_tflops"]["fp8"]) == (4500.0 / 2, 9000.0 / 2)
    assert (raw["memory_gb"], raw["mem_bandwidth_gbs"], raw["tdp_w"]) == (180, 7700, 1000)
    assert DEVICES["GB200"].raw["mem_bandwidth_gbs"] == 8000


@pytest.mark.parametrize("key", list(CDNA4))
def test_cdna4_peaks_are_cus_times_rate_times_clock(key):
    ghz, tbp, fp16_pf, fp8_pf = CDNA4[key]
    raw = DEVICES[key].raw
    assert raw["clock_mhz"] == ghz * 1000 and raw["tdp_w"] == tbp
    for p, per_cu in CDNA4_PER_CU.items():
        assert raw["peak_tflops"][p] == pytest.approx(256 * per_cu * ghz / 1000, abs=0.05), p
    assert raw["peak_tflops"]["fp16"] / 1000 == pytest.approx(fp16_pf, abs=0.05)
    assert raw["peak_tflops"]["fp8"] / 1000 == pytest.approx(fp8_pf, abs=0.05)
    assert "tf32" not in raw["peak_tflops"]  # no TF32 unit on CDNA 4
    assert (raw["memory_gb"], raw["mem_bandwidth_gbs"]) == (288, 8000)
    # 7 Infinity Fabric links of 76.8 GB/s per direction (1075.2 GB/s bidirectional in all)
    assert NETWORKS[raw["intra_node_link"]].link.bandwidth == pytest.approx(7 * 76.8e9)


@pytest.mark.parametrize("key", ["ib_xdr", "eth800"])
def test_800g_fabrics(key):
    n = NETWORKS[key]
    assert n.kind == "inter_node" and n.raw["bandwidth_gbit_s"] == 800
    assert n.link.bandwidth == pytest.approx(100e9)  # 800 Gbit/s = 100 GB/s per direction


@pytest.mark.parametrize("key", ["GB200", "B300", "MI355X", "MI350X"])
def test_frontier_rows_cite_the_vendor(key):
    d = DEVICES[key]
    vendor_site = {"nvidia": "nvidia.com", "amd": "amd.com"}[d.vendor]
    assert vendor_site in d.source and "2026-11-25" in d.source
    assert d.price_usd_per_hour is None  # no cited price row yet: out of default searches
