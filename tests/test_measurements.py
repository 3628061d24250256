"""The published measurement sets in configs/measurements/: format, citations and allowed values."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

MEAS = Path(__file__).resolve().parent.parent / "configs" / "measurements"
HEADER = (
    "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,"
    "framework,data,seq_len,accumulation,tp,pp,url,date,notes"
).split(",")
CNN_NETS = {"alexnet", "resnet50", "inception_v3", "vgg16", "densenet121", "nin", "overfeat"}
PENDING_NETS = {
    "resnet101",
    "resnet152",
    "googlenet",
    "vgg_a",
    "bert-large",
    "bert-base",
    "gpt2-xl",
    "gpt3-175b",
    "llama3-8b",
    "llama3-70b",
    "mixtral-8x7b",
}
# Catalog keys plus the keys the catalog is to gain (one GK210 die of a K80 board; other GPUs).
DEVICES = {
    "TITAN_X", "K20", "K20X", "K40", "K80", "K80_DIE", "P100", "V100_16GB", "V100_32GB", "T4", "A10G", "L4",
    "A100_40GB", "A100_80GB", "H100_SXM", "H100_PCIE", "H200", "B200", "MI250X", "MI300X",
}  # fmt: skip
EXTRA_DEVICE = re.compile(r"^[A-Z][A-Z0-9_]+$")
NETWORKS = {
    "",
    "ethernet",
    "ethernet20",
    "infiniband",
    "eth25",
    "eth100",
    "eth200",
    "eth400",
    "ib_edr",
    "ib_hdr",
    "ib_ndr",
}
PRECISIONS = {"fp32", "tf32", "fp16", "bf16"}
METRICS = {"samples_per_s", "iteration_ms", "tokens_per_s", "tflops_per_gpu"}
SCHEMES = {"", "ring", "ps"}
DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


def _read(name: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(MEAS / name, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [dict(zip(header, r, strict=True)) for r in reader]
    return header, rows


@pytest.mark.parametrize("name", ["cnn.csv", "pending.csv"])
def test_header_exact(name: str) -> None:
    header, rows = _read(name)
    assert header == HEADER
    assert rows


@pytest.mark.parametrize("name,nets", [("cnn.csv", CNN_NETS), ("pending.csv", PENDING_NETS)])
def test_rows_valid(name: str, nets: set[str]) -> None:
    _, rows = _read(name)
    for i, r in enumerate(rows, start=2):
        where = f"{name}:{i}"
        net_ok = r["net"] in nets or (name == "pending.csv" and r["net"].startswith("megatron-"))
        assert net_ok, f"{where} net {r['net']}"
        dev = r["device"]
        assert dev in DEVICES or EXTRA_DEVICE.match(dev), f"{where} device {dev}"
        if dev not in DEVICES:
            # a GPU the catalog does not hold yet must be explained in the notes
            assert r["notes"], f"{where} device {dev} without a note"
        assert r["precision"] in PRECISIONS, where
        assert r["metric"] in METRICS, where
        assert r["scheme"] in SCHEMES, where
        assert r["network"] in NETWORKS, where
        assert r["data"] in {"synthetic", "real"}, where
        assert r["url"].startswith("https://"), where
        assert DATE.match(r["date"]), where
        assert r["source"] and r["framework"], where
        value = float(r["value"])
        assert math.isfinite(value) and value > 0, where
        gpus, gpn = int(r["gpus"]), int(r["gpus_per_node"])
        assert 1 <= gpn <= gpus and gpus % gpn == 0, where
        # one node needs no network; more than one does
        assert (gpus > gpn) == (r["network"] != ""), where
        # a single GPU has no gradient exchange scheme (model-parallel runs aside)
        if gpus == 1:
            assert r["scheme"] == "", where
        assert float(r["batch_per_gpu"]) > 0, where
        assert int(r["accumulation"]) >= 1, where
        tp = int(r["tp"]) if r["tp"] else 1
        pp = int(r["pp"]) if r["pp"] else 1
        assert gpus % (tp * pp) == 0, where
        if r["net"].startswith(("bert", "gpt", "llama", "mixtral", "megatron")):
            assert int(r["seq_len"]) > 0, where


@pytest.mark.parametrize("name", ["cnn.csv", "pending.csv"])
def test_no_duplicate_runs(name: str) -> None:
    _, rows = _read(name)
    keys = [
        tuple(r[c] for c in HEADER if c not in {"value", "notes", "url", "date", "framework"}) for r in rows
    ]
    dup = {k for k in keys if keys.count(k) > 1}
    assert not dup, dup


def test_cnn_coverage() -> None:
    """Issue 9: >= 60 runs, >= 4 GPU generations, fp32 and mixed precision, 1 to >= 64 GPUs."""
    _, rows = _read("cnn.csv")
    assert len(rows) >= 60
    gen = {
        "K80": "kepler", "K80_DIE": "kepler", "K40": "kepler", "P100": "pascal", "V100_16GB": "volta",
        "V100_32GB": "volta", "T4": "turing", "A100_40GB": "ampere", "A100_80GB": "ampere", "A10G": "ampere",
        "H100_SXM": "hopper", "H100_PCIE": "hopper", "H200": "hopper",
    }  # fmt: skip
    assert len({gen.get(r["device"], r["device"]) for r in rows}) >= 4
    precisions = {r["precision"] for r in rows}
    assert "fp32" in precisions and precisions & {"fp16", "bf16"}
    gpus = {int(r["gpus"]) for r in rows}
    assert 1 in gpus and max(gpus) >= 64


def test_known_values() -> None:
    """Spot checks against the sources (TF benchmarks 2017 DGX-1 table; DLE PyTorch RN50 DGX A100 table)."""
    _, rows = _read("cnn.csv")

    def value(**kw: str) -> float:
        hits = [r for r in rows if all(r[k] == v for k, v in kw.items())]
        assert len(hits) == 1, kw
        return float(hits[0]["value"])

    assert (
        value(
            source="tf-benchmarks-2017-dgx1-p100",
            net="resnet50",
            gpus="8",
            data="synthetic",
            batch_per_gpu="64",
        )
        == 1734
    )
    assert value(source="nvidia-dle-rn50-pyt-a100", precision="fp16", gpus="1") == 2470
    assert (
        value(source="tf-benchmarks-2017-aws-k80-dist", net="resnet50", gpus="64", batch_per_gpu="64") == 2744
    )
