"""configs/efficiencies.toml: every device and link gets cited efficiencies in (0, 1]."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from planner import catalog
from planner.errors import CatalogError


def test_every_device_and_link_has_efficiencies():
    devs, nets = list(catalog.devices()), list(catalog.networks())
    eff = catalog.efficiency(devs, nets)
    for name in ("gemm", "vector", "memory"):
        value = getattr(eff, name)
        assert np.all((value > 0) & (value <= 1)), name
    assert np.all((eff.link > 0) & (eff.link <= 1))
    assert eff.host_per_kernel_s > 0 and eff.kernel_min_s >= 0 and eff.iteration_s >= 0


def test_every_entry_is_cited():
    for table, entries in catalog.efficiencies().items():
        for key, e in entries.items():
            assert e.get("source") and e.get("date"), f"{table}.{key}"
            if not e["source"].startswith(("none", "as ", "mean of", "Per-generation")):
                assert "https://" in e["source"], f"{table}.{key}"


def test_lookup_order_device_then_generation_then_default():
    eff = catalog.efficiency(["A100_40GB", "A100_80GB", "T4", "H100_SXM"], ["nvlink3", "ib_hdr"])
    data = catalog.efficiencies()
    assert eff.memory[0] == data["memory"]["A100_40GB"]["value"]  # its own measurement
    assert eff.memory[1] == data["memory"]["default"]["value"]  # none: the default
    assert eff.gemm[2, 2] == data["gemm"]["Turing"]["value"]  # its generation
    assert eff.gemm[3, 3] == data["gemm"]["Hopper"]["value"]
    assert eff.link[0] == data["link"]["intra_node"]["value"]
    assert eff.link[1] == data["link"]["inter_node"]["value"]
    assert catalog.loader_rates()["cpu_jpeg"]["samples_per_s_per_core"] > 0


# ---- data loaders and host ------------------------------------------------------------------------


def test_every_loader_and_host_entry_is_cited_and_positive():
    data = catalog.efficiencies()
    entries = [("loader", k, e) for k, e in data["loader"].items()]
    entries += [("host", k, e) for k, e in data["host"].items()]
    for table, key, e in entries:
        assert "https://" in e["source"], f"{table}.{key}"
        assert e["date"].strip(), f"{table}.{key}"
        values = [v for k, v in e.items() if k not in ("source", "date")]
        assert values and all(v > 0 for v in values), f"{table}.{key}"


def test_loader_rates_give_both_loaders_with_their_units():
    rates = catalog.loader_rates()
    assert set(rates) >= {"cpu_jpeg", "gpu_dali"}
    for name, rate in rates.items():
        assert len(rate) == 1 and set(rate) <= {"samples_per_s_per_core", "samples_per_s_per_gpu"}, name
    # The cited figures (configs/efficiencies.toml): tf.data ResNet preprocessing on a 64-core
    # machine, 1,281,167 images in 110 s; DALI on an A100 with 75% on the hardware decoder.
    assert rates["cpu_jpeg"] == {"samples_per_s_per_core": pytest.approx(1_281_167 / 110 / 64, rel=0.01)}
    assert rates["gpu_dali"] == {"samples_per_s_per_gpu": 7000.0}


def test_host_cores_per_gpu_is_the_dgx_h100_ratio():
    # 2 x 56-core Xeon 8480C for 8 H100 (MLPerf Training v3.0 system description).
    assert catalog.host_cores_per_gpu() == 2 * 56 / 8
    # A CPU-decoding node of 8 GPUs then feeds about 20k img/s, a third of DALI's 8 x 7,000.
    cpu_node = catalog.loader_rates()["cpu_jpeg"]["samples_per_s_per_core"] * catalog.host_cores_per_gpu() * 8
    gpu_node = catalog.loader_rates()["gpu_dali"]["samples_per_s_per_gpu"] * 8
    assert 15_000 < cpu_node < 25_000 and cpu_node < gpu_node


@pytest.fixture
def eff_copy(tmp_path, monkeypatch):
    """A private copy of configs/ for editing efficiencies.toml; the cache cleared around it."""
    dst = tmp_path / "configs"
    shutil.copytree(catalog.configs_dir(), dst)
    monkeypatch.setenv("PLANNER_CONFIGS", str(dst))
    catalog.efficiencies.cache_clear()
    yield dst / "efficiencies.toml"
    catalog.efficiencies.cache_clear()


def _replace(path, old: str, new: str):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("samples_per_s_per_gpu = 7000.0", "samples_per_s_per_gpu = 0.0", ["gpu_dali", "positive"]),
        ("samples_per_s_per_core = 182.0", "", ["cpu_jpeg", "exactly one"]),
        (
            "samples_per_s_per_gpu = 7000.0",
            "samples_per_s_per_gpu = 7000.0\nsamples_per_s_per_core = 1.0",
            ["gpu_dali", "exactly one"],
        ),
        ("samples_per_s_per_gpu = 7000.0", "samples_per_s_per_node = 1.0", ["gpu_dali", "unknown"]),
        ("cpu_cores_per_gpu = 14.0", "cpu_cores_per_gpu = -1.0", ["host.default", "positive"]),
        ("cpu_cores_per_gpu = 14.0", "", ["host.default", "cpu_cores_per_gpu"]),
    ],
)
def test_bad_loader_or_host_entries_are_rejected(eff_copy, old, new, words):
    _replace(eff_copy, old, new)
    with pytest.raises(CatalogError) as info:
        catalog.efficiencies()
    msg = str(info.value)
    assert all(w in msg for w in words), msg
    assert "\n" not in msg


def test_missing_host_default_is_an_error(eff_copy):
    _replace(eff_copy, "\n[host.default]\n", "\n[host.dgx_h100]\n")
    with pytest.raises(CatalogError, match=r"host\.default"):
        catalog.host_cores_per_gpu()
