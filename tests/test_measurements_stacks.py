"""Per-stack measurement sets: eager PyTorch runs (pytorch.csv) and runs on the newest GPUs (new-gpus.csv)."""

from __future__ import annotations

import csv
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from costs.specs import layers, transformer
from planner import catalog
from planner.calibrate import measurements
from planner.calibrate.fitting import predict
from planner.calibrate.predict import RunTable

ROOT = Path(__file__).resolve().parent.parent
MEAS = ROOT / "configs" / "measurements"
FILES = ("pytorch.csv", "new-gpus.csv", "scale.csv")
# the header of llm.csv without its attention column: both files use it, CNN rows leave the LLM
# columns empty
LLM_HEADER = (
    "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,framework,"
    "data,seq_len,accumulation,tp,pp,recompute,tp_overlap,zero,sp,ep,interleave,cp,cp_comm,pp_schedule,flops_counting,url,date,notes"
).split(",")
# scale.csv adds rank_order after pp_schedule: its runs at thousands of GPUs state how their ranks lay
SCALE_HEADER = [*LLM_HEADER[:26], "rank_order", *LLM_HEADER[26:]]
DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
# a repository file is cited at a commit: github.com/<owner>/<repo>/blob/<40 hex>/...
PINNED = re.compile(r"^https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/")
# ... or a paper at one arXiv version
PINNED_PAPER = re.compile(r"^https://arxiv\.org/abs/\d{4}\.\d{4,5}v\d+$")
DEVICES = tomllib.loads((ROOT / "configs" / "devices.toml").read_text())


def _rows(name: str) -> tuple[list[str], list[dict[str, str]]]:
    with open(MEAS / name, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, [dict(zip(header, r, strict=True)) for r in reader]


def _one(rows: list[dict[str, str]], **kw: str) -> dict[str, str]:
    hits = [r for r in rows if all(r[k] == v for k, v in kw.items())]
    assert len(hits) == 1, kw
    return hits[0]


@pytest.mark.parametrize("name", FILES)
def test_header_and_citations(name: str) -> None:
    header, rows = _rows(name)
    assert header == (SCALE_HEADER if name == "scale.csv" else LLM_HEADER)
    assert SCALE_HEADER[25:27] == ["pp_schedule", "rank_order"]
    assert rows
    for i, r in enumerate(rows, start=2):
        where = f"{name}:{i}"
        pinned = PINNED.match(r["url"]) or PINNED_PAPER.match(r["url"])
        assert pinned, f"{where} url not pinned to a commit or a paper version: {r['url']}"
        assert DATE.match(r["date"]), where
        assert r["source"] and r["framework"] and r["notes"], where
        # every device is a catalog key: these files calibrate the catalog's GPUs, none to come
        assert r["device"] in DEVICES, f"{where} device {r['device']}"


@pytest.mark.parametrize("name", FILES)
def test_rows_load_and_predict(name: str) -> None:
    """Every row loads (net, device, parallel layout) and gets a finite, positive prediction."""
    runs = measurements.load(MEAS / name)
    assert len(runs) == len(_rows(name)[1])
    pred = predict(RunTable(runs, "modern"))
    assert np.all(np.isfinite(pred)) and np.all(pred > 0)


def test_pytorch_generations_and_stack() -> None:
    """Eager PyTorch on at least three GPU generations, CNN nets only, no model parallelism."""
    _, rows = _rows("pytorch.csv")
    generations = {DEVICES[r["device"]]["generation"] for r in rows}
    assert {"Volta", "Ampere", "Ada Lovelace", "Hopper", "Blackwell"} <= generations
    assert all(not r["tp"] and not r["pp"] and not r["zero"] for r in rows)
    assert {r["precision"] for r in rows} == {"fp32", "tf32", "fp16"}
    # fp32 only where the GPU has no TF32 (Volta); Ampere and later run cuDNN convolutions in TF32
    assert {r["device"] for r in rows if r["precision"] == "fp32"} == {"V100_16GB"}
    # eager mode is stated on every row: timm's benchmark.py without torchscript, DLE's main.py with jit no
    assert all("eager" in r["notes"] for r in rows)
    assert {r["data"] for r in rows} == {"synthetic"}
    # one node per run: multi-GPU rows are DDP all-reduce inside one machine
    for r in rows:
        assert r["gpus"] == r["gpus_per_node"] and r["network"] == ""
        assert r["scheme"] == ("ring" if int(r["gpus"]) > 1 else "")


def test_pytorch_known_values() -> None:
    """Values as printed in the sources."""
    _, rows = _rows("pytorch.csv")
    # timm results/benchmark-train-amp-nhwc-pt112-cu113-rtx3090.csv at c865028: resnet50 1218.01
    # samples/s at batch 512; the NCHW file: 826.06
    r = _one(rows, source="timm-0.6.6-rtx3090-amp-nhwc", net="resnet50")
    assert (r["value"], r["batch_per_gpu"], r["device"]) == ("1218.01", "512", "RTX_3090")
    assert _one(rows, source="timm-0.6.6-rtx3090-amp-nchw", net="resnet50")["value"] == "826.06"
    assert _one(rows, source="timm-0.6.6-rtx3090-amp-nchw", net="inception_v3")["value"] == "602.27"
    # lambdal/deeplearning-benchmark pytorch/pytorch-train-throughput-fp16.csv: 'LambdaCloud V100 16GB'
    # resnet50 833 (log: 833.42 images/s at batch 256); 8x H100 SXM5 20728 (log 20728.88, batch 1280/GPU)
    v100 = _one(rows, source="lambda-dlbench-2022-v100", precision="fp16", gpus="1")
    assert (v100["value"], v100["batch_per_gpu"]) == ("833.42", "256")
    h100 = _one(rows, source="lambda-dlbench-2022-h100-sxm", precision="fp16", gpus="8")
    assert (h100["value"], h100["batch_per_gpu"], h100["scheme"]) == ("20728.88", "1280", "ring")
    # results_v2/LambdaOD_test_1xB200_192GB_.../PyTorch_resnet50_AMP log (2025-12-10): 3076.81 at batch 3328
    b200 = _one(rows, source="lambda-dlbench-2024-b200", precision="fp16", gpus="1")
    assert (b200["value"], b200["batch_per_gpu"], b200["date"]) == ("3076.81", "3328", "2025-12-10")


def test_new_gpus_rows() -> None:
    """B200 runs of the Megatron-Bridge performance summary, settings from the release's recipe."""
    _, rows = _rows("new-gpus.csv")
    assert {r["device"] for r in rows} == {"B200"}
    assert all(r["metric"] == "tokens_per_s_per_gpu" and r["precision"] == "fp8" for r in rows)
    # 25.11 NeMo container, DGX-B200 table, LLAMA3_8B: 8 GPUs, GBS 128, MBS 2, GA 8, 30624 tokens/s/GPU
    llama = _one(rows, source="megatron-bridge-25.11-b200-fp8", net="llama3-8b")
    cols = ("value", "gpus", "batch_per_gpu", "accumulation", "seq_len", "tp", "pp", "zero", "recompute")
    assert tuple(llama[c] for c in cols) == ("30624", "8", "2", "8", "8192", "1", "1", "1", "none")
    # 26.04.01, Qwen3_30B_a3B table, DGX-B200: MXFP8, GBS 512, MBS 4, EP 8, 27136 tokens/s/GPU
    qwen = _one(rows, source="megatron-bridge-26.04.01-b200-fp8", net="qwen3-30b-a3b")
    assert (qwen["value"], qwen["batch_per_gpu"], qwen["accumulation"], qwen["ep"]) == (
        "27136",
        "4",
        "16",
        "8",
    )
    # 26.04.01, Qwen3_235B_a22B table, DGX-B200: 256 GPUs, GBS 8192, MBS 1, PP 8, EP 8, 3776 tokens/s/GPU
    big = _one(rows, source="megatron-bridge-26.04.01-b200-fp8", net="qwen3-235b-a22b")
    assert (big["value"], big["gpus"], big["pp"], big["ep"], big["network"]) == (
        "3776",
        "256",
        "8",
        "8",
        "ib_ndr",
    )
    # the accumulation is the printed global batch over data-parallel size x micro-batch
    for r in rows:
        gbs = int(re.search(r"GBS (\d+)", r["notes"]).group(1))
        dp = int(r["gpus"]) // (int(r["tp"]) * int(r["pp"]))
        assert int(r["accumulation"]) * dp * int(r["batch_per_gpu"]) == gbs, r["source"]


def test_qwen3_235b_net_matches_its_name() -> None:
    """Qwen3-235B-A22B (NeMo's Qwen3Config235B_A22B): 235B parameters in total, 22B activated per token."""
    net = catalog.load_net("qwen3-235b-a22b", "planner")
    total = sum(layers.params(s) for s in net.layers)
    idle = sum(layers.params(s) - transformer.moe_active_params(s) for s in net.layers if s.type == "MoE")
    assert abs(total - 235e9) <= 0.5e9
    assert abs(total - idle - 22e9) <= 0.5e9
