"""`planner profile` on the CPU: the rows `planner calibrate` reads, the out-of-memory path,
the peaks, the per-layer comparison against the cost model, and bad input (one line, exit 2)."""

from __future__ import annotations

import csv
import json

import pytest

torch = pytest.importorskip("torch", reason="planner profile needs PyTorch: pip install '.[profile]'")

from planner.calibrate import measurements  # noqa: E402
from planner.cli import main  # noqa: E402
from planner.errors import BadInput  # noqa: E402
from planner.profile import rows  # noqa: E402
from tests.test_profile_builder import EVERY_CNN_TYPE  # noqa: E402

FAST = ["--steps", "2", "--warmup", "1", "--no-peaks"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(EVERY_CNN_TYPE))
    return str(path)


def _read(path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _as_gpu(src, dst) -> None:
    """The same rows as if measured on an H100 (the loader's view of a GPU profile)."""
    data = _read(src)
    with open(dst, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=rows.COLUMNS)
        w.writeheader()
        w.writerows([r | {"device": "H100_SXM"} for r in data])


def test_rows_load_with_the_calibrate_loader(capsys, tmp_path, tiny):
    out_csv = tmp_path / "p.csv"
    code, out, err = run(capsys, "profile", tiny, "--batch", "2,4", *FAST, "-o", str(out_csv))
    assert code == 0, err
    assert "measured on the CPU" in out
    data = _read(out_csv)
    assert list(data[0]) == rows.COLUMNS  # calibrate's columns, in its order
    assert [r["batch_per_gpu"] for r in data] == ["2", "4"]
    assert {r["device"] for r in data} == {"cpu"} and {r["metric"] for r in data} == {"samples_per_s"}
    assert data[0]["source"].startswith("profile-") and f"torch-{torch.__version__}" in data[0]["source"]
    for r in data:  # samples/s is the batch over the median step, whose phases the notes give
        step_ms = float(r["notes"].split("step ")[1].split(" ms")[0])
        assert float(r["value"]) == pytest.approx(int(r["batch_per_gpu"]) / step_ms * 1e3, rel=1e-3)
    # CPU rows: calibrate refuses them in one line
    code, out, err = run(capsys, "calibrate", str(out_csv))
    assert code == 2 and err.count("\n") == 1 and "measured on the CPU" in err
    gpu = tmp_path / "gpu.csv"
    _as_gpu(out_csv, gpu)
    runs = measurements.load(gpu)
    assert [(r.device, r.batch_per_gpu, r.gpus) for r in runs] == [("H100_SXM", 2, 1), ("H100_SXM", 4, 1)]
    assert runs[0].samples_per_s == pytest.approx(float(data[0]["value"]))


def test_out_of_memory_is_a_row_not_a_crash(capsys, tmp_path, tiny):
    """A 1 MB limit: batch 1 fits (about 0.1 MB of tensors saved for the backward), 64 does not."""
    out_csv = tmp_path / "p.csv"
    code, out, err = run(
        capsys, "profile", tiny, "--batch", "1,64", "--max-memory-gb", "0.001", *FAST, "-o", str(out_csv)
    )
    assert code == 0, err
    assert "out of memory" in out and "Traceback" not in err
    data = _read(out_csv)
    assert [(r["batch_per_gpu"], r["metric"], r["value"]) for r in data][1] == ("64", "out_of_memory", "")
    assert data[0]["metric"] == "samples_per_s"
    gpu = tmp_path / "gpu.csv"
    _as_gpu(out_csv, gpu)
    assert [r.batch_per_gpu for r in measurements.load(gpu)] == [1]  # the loader skips the OOM row


def test_peaks_side_file(capsys, tmp_path, tiny):
    out_csv = tmp_path / "p.csv"
    code, out, err = run(
        capsys, "profile", tiny, "--batch", "2", "--steps", "1", "--warmup", "0", "-o", str(out_csv)
    )
    assert code == 0, err
    peaks = _read(tmp_path / "p.peaks.csv")
    assert [(p["kind"], p["precision"]) for p in peaks] == [
        ("matmul_tflops", "fp32"),
        ("matmul_tflops", "tf32"),
        ("matmul_tflops", "bf16"),
        ("matmul_tflops", "fp16"),
        ("copy_gbs", ""),
    ]
    assert all(float(p["value"]) > 0 for p in peaks)


def test_layers_account_for_the_step_and_match_the_estimate(capsys):
    """--layers on the CPU with H100 predictions: every layer, the optimizer and 'other' sum to
    the measured step; the predictions are `planner estimate`'s forward, backward and update."""
    code, out, err = run(
        capsys,
        "profile",
        "alexnet",
        "--batch",
        "2",
        *FAST,
        "--layers",
        "--device-key",
        "H100_SXM",
        "--format",
        "json",
    )
    assert code == 0, err
    t = json.loads(out)["batches"]["2"]
    names = [r["layer"] for r in t["rows"]]
    assert len(names) == 15 + 2 and {"optimizer step", "other (unattributed)"} <= set(names)
    assert sum(r["measured_ms"] for r in t["rows"]) == pytest.approx(t["measured_step_ms"], rel=1e-6)
    assert t["layers_cover"] >= 0.9
    assert t["plain_step_ms"] > 0  # the same step without the per-layer marks
    errors = [abs(r["error_ms"]) for r in t["rows"]]
    assert errors == sorted(errors, reverse=True)
    assert [s["category"] for s in t["shares"]][-2:] == ["optimizer", "other"]
    assert sum(s["measured_share"] for s in t["shares"]) == pytest.approx(1.0)
    est = [
        "estimate", "alexnet", "--device", "H100_SXM", "--batch", "2", "--workers", "1", "--scheme", "ring",
        "--precision", "fp32", "--data-loader", "none", "--format", "json",
    ]  # fmt: skip
    code, eout, err = run(capsys, *est)
    e = json.loads(eout)[0]
    fwd = sum(r["predicted_fwd_ms"] for r in t["rows"] if r["type"])  # layers only
    upd = next(r["predicted_ms"] for r in t["rows"] if r["layer"] == "optimizer step")
    assert fwd == pytest.approx(e["forward_ms"], rel=1e-6)
    assert upd == pytest.approx(e["update_ms"], rel=1e-6)
    bwd = sum(r["predicted_bwd_ms"] for r in t["rows"] if r["type"])
    assert bwd == pytest.approx(e["backward_ms"], rel=1e-6)


def test_hugging_face_config(capsys, tmp_path):
    """A Llama-family config.json (a narrow one) profiles as the zoo's transformers do."""
    cfg = {
        "model_type": "llama", "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 96,
        "max_position_embeddings": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
        "num_key_value_heads": 2, "tie_word_embeddings": True, "vocab_size": 300,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run(capsys, "profile", str(path), "--seq-len", "16", "--batch", "2", *FAST)
    assert code == 0, err
    assert "config.json on" in out and " ok " in out


@pytest.mark.parametrize("precision, optimizer", [("bf16", "adam"), ("fp16", "sgd")])
def test_transformer_in_mixed_precision(capsys, tmp_path, precision, optimizer):
    """A small GQA + MoE decoder from a model description; --seq-len sets the rows' seq_len."""
    model = {
        "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "d_ff": 96, "vocab": 300, "seq_len": 32,
        "activation": "swiglu", "norm": "rmsnorm", "positional": "rope", "attention": "flash",
        "moe": {"n_experts": 4, "top_k": 2},
    }  # fmt: skip
    spec = tmp_path / "tiny-moe.json"
    spec.write_text(json.dumps({"name": "tiny-moe", "model": model}))
    out_csv = tmp_path / "p.csv"
    argv = ["profile", str(spec), "--seq-len", "16", "--batch", "2", "--precision", precision]
    code, out, err = run(capsys, *argv, "--optimizer", optimizer, *FAST, "-o", str(out_csv))
    assert code == 0, err
    (r,) = _read(out_csv)
    assert (r["net"], r["precision"], r["seq_len"], r["metric"]) == (
        "tiny-moe.json",
        precision,
        "16",
        "samples_per_s",
    )
    assert f"optimizer {optimizer}" in r["notes"] and float(r["value"]) > 0


def test_layers_text_csv_and_html(capsys, tmp_path, tiny):
    html = tmp_path / "layers.html"
    code, out, err = run(capsys, "profile", tiny, "--batch", "2", *FAST, "--layers", "--html", str(html))
    assert code == 0, err
    assert "no prediction: give --device-key" in out and "other (unattributed)" in out
    page = html.read_text()
    assert page.count("<svg") == 2 and "convolution" in page
    code, out, err = run(capsys, "profile", tiny, "--batch", "2", *FAST, "--layers", "--format", "csv")
    assert code == 0, err
    recs = list(csv.DictReader(out.splitlines()))
    assert len(recs) == len(EVERY_CNN_TYPE["layers"]) + 2 and recs[0]["batch"] == "2"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["nosuchnet"], "unknown net 'nosuchnet'"),
        (["alexnet", "--device-key", "H999"], "--device-key 'H999' is not in the catalog"),
        (["alexnet", "--batch", "0"], "--batch takes positive integers"),
        (["alexnet", "--optimizer", "lion"], "--optimizer 'lion' (valid: sgd, momentum, adam)"),
        (["alexnet", "--seq-len", "128"], "not a transformer"),
        (["gpt2-xl", "--seq-len", "4096"], "exceeds the 1024 learned positions"),
        (["alexnet", "--steps", "0"], "--steps must be >= 1"),
    ],
)
def test_bad_input_is_one_line(capsys, argv, message):
    code, out, err = run(capsys, "profile", *argv, "--no-peaks")
    assert code == 2
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_one_line(capsys):
    code, out, err = run(capsys, "profile", "alexnet", "--device", "cuda", "--no-peaks")
    assert code == 2 and err.count("\n") == 1 and "sees no CUDA GPU; use --device cpu" in err


def test_gpu_names_map_to_catalog_keys():
    from planner import catalog

    assert set(rows.GPU_NAMES.values()) <= set(catalog.devices())
    assert rows.device_key("NVIDIA H100 80GB HBM3", None) == "H100_SXM"
    assert rows.device_key("NVIDIA H100 80GB HBM3", "H100_PCIE") == "H100_PCIE"  # given wins
    assert rows.device_key(None, None) == rows.CPU
    with pytest.raises(BadInput, match="give --device-key"):
        rows.device_key("NVIDIA Future GPU", None)
