"""configs/efficiencies.toml: every device and link gets cited efficiencies in (0, 1]."""

from __future__ import annotations

import numpy as np

from planner import catalog


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
    assert catalog.loader_rates()["cpu_jpeg"] > 0
