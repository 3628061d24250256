"""`planner profile --attention` on the CPU: the kernel reaches the PyTorch module that is timed,
the cost model's prediction beside it, the text and the rows' ``attention`` column, which
`planner calibrate` reads back; a bad kernel or a CNN is estimate's one-line error, exit 2."""

from __future__ import annotations

import csv
import json

import pytest

torch = pytest.importorskip("torch", reason="planner profile needs PyTorch: pip install '.[profile]'")

from planner.calibrate import measurements  # noqa: E402
from planner.cli import main  # noqa: E402
from planner.profile import nets, rows  # noqa: E402
from planner.profile.builder import SpecModel  # noqa: E402

FAST = ["--steps", "2", "--warmup", "1", "--no-peaks"]
# a narrow causal decoder whose spec names the standard kernel
MODEL = {
    "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "vocab": 300, "seq_len": 64,
    "activation": "gelu", "norm": "layernorm", "positional": "learned", "attention": "standard",
}  # fmt: skip


@pytest.fixture
def tiny_lm(tmp_path) -> str:
    path = tmp_path / "tiny-lm.json"
    path.write_text(json.dumps({"name": "tiny-lm", "model": MODEL}))
    return str(path)


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _flash_modules(net) -> list[bool]:
    from planner.profile.transformer import Attention

    return [m.flash for m in SpecModel(net).modules() if isinstance(m, Attention)]


def test_the_kernel_reaches_the_timed_module(tiny_lm):
    assert _flash_modules(nets.load(tiny_lm)) == [False, False]  # the spec's standard
    assert _flash_modules(nets.load(tiny_lm, nets.Overrides(attention="flash"))) == [True, True]
    assert _flash_modules(nets.load(tiny_lm, nets.Overrides(attention="standard"))) == [False, False]


def test_the_kernel_reaches_the_prediction(tiny_lm):
    """On H100 the flash kernel keeps no s^2 scores and skips the causal mask's tiles: the
    predicted attention layers are faster, every other layer is the same."""
    from planner.profile.predict import predict

    def layers(kernel):
        net = nets.load(tiny_lm, nets.Overrides(attention=kernel))
        p = predict(net, "H100_SXM", "bf16", 4, "adam", None)
        kinds = [s.layer.type for s in net.layers]
        return kinds, p.forward + p.backward

    kinds, standard = layers(None)
    assert layers("standard")[1] == pytest.approx(standard, rel=1e-12)  # the spec's own
    _, flash = layers("flash")
    attention = [i for i, k in enumerate(kinds) if k == "Attention"]
    assert len(attention) == 2
    assert all(flash[i] < standard[i] for i in attention)
    others = [i for i in range(len(kinds)) if i not in attention]
    assert flash[others] == pytest.approx(standard[others], rel=1e-12)


def test_rows_and_text_carry_the_kernel(capsys, tmp_path, tiny_lm):
    for kernel, words in [
        (None, ", standard attention (the net spec's)"),
        ("flash", ", flash attention (--attention; not the net spec's)"),
    ]:
        out_csv = tmp_path / f"{kernel}.csv"
        argv = ["profile", tiny_lm, "--batch", "2", *FAST, "-o", str(out_csv)]
        code, out, err = _run(capsys, *argv, *(["--attention", kernel] if kernel else []))
        assert code == 0, err
        assert words in out.splitlines()[0]
        with open(out_csv, newline="") as fh:
            (row,) = list(csv.DictReader(fh))
        assert row["attention"] == (kernel or "standard") and row["metric"] == "samples_per_s"
        gpu = tmp_path / f"{kernel}-gpu.csv"  # the loader's view of the same row on a GPU
        with open(gpu, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=rows.COLUMNS)
            w.writeheader()
            w.writerow(row | {"device": "H100_SXM"})
        (run,) = measurements.load(gpu)
        assert run.attention == (kernel or "standard")
        assert measurements.kernel(run.net, run.attention) == (kernel or "standard")


def test_a_cnn_row_has_no_kernel(capsys, tmp_path):
    from tests.test_profile_builder import EVERY_CNN_TYPE

    spec, out_csv = tmp_path / "cnn.json", tmp_path / "cnn.csv"
    spec.write_text(json.dumps(EVERY_CNN_TYPE))
    code, out, err = _run(capsys, "profile", str(spec), "--batch", "2", *FAST, "-o", str(out_csv))
    assert code == 0, err
    assert "attention" not in out
    with open(out_csv, newline="") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["attention"] == ""


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--attention", "fused"], "--attention 'fused' (valid: standard, flash)"),
        (["--attention", "Flash"], "--attention 'Flash' (valid: standard, flash)"),
    ],
)
def test_a_bad_kernel_is_one_line(capsys, tiny_lm, argv, message):
    code, _, err = _run(capsys, "profile", tiny_lm, *argv, *FAST)
    assert code == 2 and err == f"error: {message}\n"


def test_a_cnn_with_a_kernel_is_one_line(capsys):
    code, _, err = _run(capsys, "profile", "alexnet", "--attention", "flash", *FAST)
    message = (
        "--attention flash applies to transformer nets (a 'model' description); 'alexnet.json' is not one"
    )
    assert code == 2 and err == f"error: {message}\n"
    # the same line as planner estimate's
    code, _, est = _run(capsys, "estimate", "alexnet", "--attention", "flash")
    assert code == 2 and est == err
