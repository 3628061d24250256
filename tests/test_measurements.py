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
# llm.csv adds how the run recomputed activations, overlapped and sharded (ZeRO stage, sequence and
# expert parallelism), interleaved its pipeline, which attention kernel it ran and how its source
# counts FLOPs
LLM_HEADER = (
    HEADER[:17]
    + [
        "recompute",
        "tp_overlap",
        "zero",
        "sp",
        "ep",
        "interleave",
        "cp",
        "cp_comm",
        "pp_schedule",
        "attention",  # the run's attention kernel where it is not the net spec's
        "flops_counting",
    ]
    + HEADER[17:]
)
HEADERS = {"cnn.csv": HEADER, "transformer.csv": HEADER, "llm.csv": LLM_HEADER, "pending.csv": HEADER}
CNN_NETS = {"alexnet", "resnet50", "resnet152", "inception_v3", "vgg16", "densenet121", "nin", "overfeat"}
MEGATRON = {
    *(f"megatron-gpt-{s}" for s in ("1.7b", "3.6b", "7.5b", "18b", "39b", "76b", "145b", "310b", "530b")),
    "megatron-1t",
    *(
        f"megatron-core-gpt-{s}"
        for s in ("1.7b", "7.1b", "16b", "32b", "70b", "119b", "177b", "314b", "462b")
    ),
}
MPT = {f"mpt-{s}" for s in ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b")}
FILE_NETS = {
    "cnn.csv": CNN_NETS,
    "transformer.csv": {"bert-large"},
    "llm.csv": MEGATRON
    | MPT
    | {"gpt3-175b", "llama3-8b", "llama3-70b", "llama2-13b", "llama2-70b", "qwen3-30b-a3b", "deepseek-v3"},
}
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
    "gpt-oss-20b",
    "gpt-oss-120b",
    "qwen3-30b-a3b",
    "llama2-13b",
    "llama2-70b",
    *MPT,
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
# Transformer Engine FP8 (costs/hardware.py) is modelled for transformers only: LLM runs may use it
LLM_PRECISIONS = PRECISIONS | {"fp8"}
FILE_PRECISIONS = {"llm.csv": LLM_PRECISIONS, "pending.csv": LLM_PRECISIONS}
METRICS = {"samples_per_s", "iteration_ms", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu"}
SCHEMES = {"", "ring", "ps"}
DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


def _read(name: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(MEAS / name, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [dict(zip(header, r, strict=True)) for r in reader]
    return header, rows


@pytest.mark.parametrize("name", list(HEADERS))
def test_header_exact(name: str) -> None:
    header, rows = _read(name)
    assert header == HEADERS[name]
    assert rows


@pytest.mark.parametrize("name,nets", [*FILE_NETS.items(), ("pending.csv", PENDING_NETS)])
def test_rows_valid(name: str, nets: set[str]) -> None:
    _, rows = _read(name)
    for i, r in enumerate(rows, start=2):
        where = f"{name}:{i}"
        assert r["net"] in nets, f"{where} net {r['net']}"
        dev = r["device"]
        assert dev in DEVICES or EXTRA_DEVICE.match(dev), f"{where} device {dev}"
        if dev not in DEVICES:
            # a GPU the catalog does not hold yet must be explained in the notes
            assert r["notes"], f"{where} device {dev} without a note"
        assert r["precision"] in FILE_PRECISIONS.get(name, PRECISIONS), where
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
        if r["net"].startswith(("bert", "gpt", "llama", "mixtral", "megatron", "qwen", "mpt")):
            assert int(r["seq_len"]) > 0, where


@pytest.mark.parametrize("name", list(HEADERS))
def test_no_duplicate_runs(name: str) -> None:
    header, rows = _read(name)
    keys = [
        tuple(r[c] for c in header if c not in {"value", "notes", "url", "date", "framework"}) for r in rows
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
    # the same TF benchmarks page: ResNet-152, 8 P100, synthetic data, batch 64 -> 716 images/s
    assert (
        value(
            source="tf-benchmarks-2017-dgx1-p100",
            net="resnet152",
            gpus="8",
            batch_per_gpu="64",
            data="synthetic",
        )
        == 716
    )


def test_known_transformer_values() -> None:
    """Spot checks: DLE BERT PyTorch DGX A100 pre-training table (8 GPUs, seq 128, mixed precision:
    4591 sequences/s); Megatron-LM README 2021 (1T on 3072 A100: 163 teraFLOP/s per GPU) and its
    GPT-3 175B example (138 teraFLOP/s per GPU on 1024 A100)."""
    _, bert = _read("transformer.csv")
    _, llm = _read("llm.csv")

    def one(rows, **kw: str) -> dict:
        hits = [r for r in rows if all(r[k] == v for k, v in kw.items())]
        assert len(hits) == 1, kw
        return hits[0]

    assert (
        one(bert, source="nvidia-dle-bert-pyt-a100", precision="fp16", gpus="8", seq_len="128")["value"]
        == "4591"
    )
    t1 = one(llm, net="megatron-1t")
    assert (t1["value"], t1["gpus"], t1["tp"], t1["pp"], t1["recompute"]) == (
        "163",
        "3072",
        "8",
        "64",
        "full",
    )
    g3 = one(llm, source="megatron-lm-readme-gpt3-175b")
    assert (g3["value"], g3["gpus"], g3["tp"], g3["pp"], g3["batch_per_gpu"]) == (
        "138",
        "1024",
        "8",
        "16",
        "1",
    )


def test_known_fsdp_values() -> None:
    """Spot checks of the FSDP (ZeRO-3, no TP) rows: torchtitan docs/performance.md at 157a12c (Llama 3
    70B, 64 A100 80GB, local batch 1, full AC: 331 tokens/s per GPU; the selective op AC rows wait
    in pending.csv) and llm-foundry's MPT
    benchmark README at b2a43a1 (MPT-7B, seq 2048, 8 A100 80GB, micro-batch 6, GradAccum 2, no
    activation checkpointing: 4641 tokens/s per GPU; MPT-3B on 512 H100 with SHARD_GRAD_OP at 5e85bd6:
    21664)."""
    _, llm = _read("llm.csv")

    def one(**kw: str) -> dict:
        hits = [r for r in llm if all(r[k] == v for k, v in kw.items())]
        assert len(hits) == 1, kw
        return hits[0]

    cols = ("value", "gpus", "batch_per_gpu", "accumulation", "zero", "recompute", "seq_len", "tp", "pp")
    tt = one(source="torchtitan-a100-llama3", net="llama3-70b")
    assert tuple(tt[c] for c in cols) == ("331", "64", "1", "1", "3", "full", "8192", "", "")
    mpt = one(source="llm-foundry-mpt-a100-80gb", net="mpt-7b", seq_len="2048")
    assert tuple(mpt[c] for c in cols) == ("4641", "8", "6", "2", "3", "none", "2048", "", "")
    big = one(source="llm-foundry-mpt-h100-large", net="mpt-3b", gpus="512")
    assert (big["value"], big["zero"], big["network"]) == ("21664", "2", "ib_ndr")
    # every FSDP row is data parallel only, with a ZeRO stage and the per-GPU token metric
    fsdp = [r for r in llm if r["source"].startswith(("torchtitan-", "llm-foundry-"))]
    assert len(fsdp) == 212
    assert all(r["zero"] in {"2", "3"} and not r["tp"] and not r["pp"] for r in fsdp)
    assert all(r["metric"] == "tokens_per_s_per_gpu" and r["recompute"] for r in fsdp)
