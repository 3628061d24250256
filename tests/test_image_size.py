"""`--image-size` on `planner estimate`, `optimize`, `pareto` and the sweep spec: the vision nets
are rebuilt at the asked size, the answer and plan files carry it, the Reproduce line and
`estimate --plan` reproduce it, and a size a net cannot take is refused in one line (exit 2)."""

from __future__ import annotations

import json
import shlex

import pytest

from planner import catalog
from planner.cli import main
from planner.metrics.model import CostModel
from planner.sweep.spec import SweepSpecError, load

TOL = 5e-3  # tests/test_round_trip.py's bound


def _run(capsys, args: list[str]):
    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def _estimate(capsys, net: str, *extra: str) -> dict:
    args = ["estimate", net, "--device", "H100_SXM", "--workers", "1", "--precision", "bf16", *extra]
    (row,) = _run(capsys, [*args, "--format", "json"])
    return row


def test_optimize_answer_carries_the_size_and_its_reproduce_line_reproduces(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["optimize", "vit_b_16", "--budget", "8gpus", "--gpu", "H100_SXM", "--image-size", "384"]
    data = _run(capsys, [*args, "--format", "json"])
    for rec in [data["best"], *data["alternatives"]]:
        assert rec["image_size"] == 384
        words = shlex.split(rec["estimate_command"])
        assert words[words.index("--image-size") + 1] == "384"
        (row,) = _run(capsys, [*words[1:], "--format", "json"])
        assert row["total_ms"] == pytest.approx(rec["iteration_ms"], rel=TOL)
        assert row["memory_gb"] == pytest.approx(rec["memory_gb"], rel=TOL)


def test_a_vision_net_at_its_own_size_names_it_and_old_specs_do_not(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    best = _run(
        capsys, ["optimize", "efficientnet_b4", "--budget", "8gpus", "--gpu", "H100_SXM", "--format", "json"]
    )
    assert best["best"]["image_size"] == 380 and "--image-size 380" in best["best"]["estimate_command"]
    best = _run(
        capsys, ["optimize", "resnet50", "--budget", "8gpus", "--gpu", "H100_SXM", "--format", "json"]
    )
    assert "image_size" not in best["best"] and "--image-size" not in best["best"]["estimate_command"]


def test_pareto_plan_files_carry_the_size_and_rescore_exactly(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["pareto", "convnext_tiny", "--budget", "8gpus", "--gpu", "H100_SXM", "--image-size", "288"]
    assert main([*args, "--out", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    files = sorted((tmp_path / "p").glob("plan_*.json"))
    assert files
    for f in files:
        plan = json.loads(f.read_text())
        assert plan["image_size"] == 288
        (row,) = _run(capsys, ["estimate", "--plan", str(f), "--format", "json"])
        assert row["total_ms"] == pytest.approx(plan["expected"]["iteration_ms"], rel=TOL), f.name


def test_compute_grows_with_the_pixels(capsys):
    """ConvNeXt-T at 448 px does 4x the convolution work of 224 px: its compute time grows
    about 4x (a little less: the fixed per-kernel and optimizer costs do not grow)."""
    small = _estimate(capsys, "convnext_tiny", "--data-loader", "none")
    big = _estimate(capsys, "convnext_tiny", "--data-loader", "none", "--image-size", "448")
    assert (small["image_size"], big["image_size"]) == (224, 448)
    ratio = (big["forward_ms"] + big["backward_ms"]) / (small["forward_ms"] + small["backward_ms"])
    assert 3.0 < ratio <= 4.0 and big["memory_gb"] > small["memory_gb"]


def test_the_loader_rate_scales_with_the_pixels():
    """Assumption (planner/metrics/model.py): per-image loader work grows with output pixels."""
    base = CostModel.of("modern", loader="cpu").for_net(catalog.net_costs("convnext_tiny", "modern").net.meta)
    big = CostModel.of("modern", loader="cpu").for_net(
        catalog.net_costs("convnext_tiny", "modern", image_size=448).net.meta
    )
    assert big.image_scale == 4.0 and base.image_scale == 1.0
    assert big.loader_per_gpu == pytest.approx(base.loader_per_gpu / 4)


@pytest.mark.parametrize(
    ("net", "size", "message"),
    [
        (
            "efficientnet_b0",
            "0",
            "--image-size for 'efficientnet_b0' must be an integer from 32 to 4096, got 0",
        ),
        ("efficientnet_b0", "-224", "must be an integer from 32 to 4096, got -224"),
        ("convnext_tiny", "8192", "must be an integer from 32 to 4096, got 8192"),
        ("swin_t", "256", "--image-size 256 does not suit 'swin_t': it must be a multiple of 224 px"),
        (
            "vit_l_16",
            "250",
            "--image-size 250 does not suit 'vit_l_16': it must be a multiple of the 16 px patch",
        ),
        ("resnet50", "448", "'resnet50' is a fixed-size spec"),
        ("llama3-8b", "224", "--image-size is for vision nets; 'llama3-8b' is a transformer"),
        ("efficientnet_b0", "22.5", "--image-size '22.5': not an integer (a size in px, or a schedule"),
    ],
)
@pytest.mark.parametrize("command", ["estimate", "optimize"])
def test_bad_sizes_exit_2_in_one_line(capsys, command, net, size, message):
    refused(capsys, command, net, size, message)


def refused(capsys, command: str, net: str, size: str, message: str) -> None:
    """``planner COMMAND NET --image-size SIZE`` exits 2 with one line holding ``message``."""
    args = [command, net, "--image-size", size]
    args += ["--budget", "8gpus", "--gpu", "H100_SXM"] if command == "optimize" else ["--workers", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err
    assert len(err.splitlines()) == 1, err


def test_sweep_spec_takes_an_image_size(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  image_size: [224, 288]\noptions:\n  net: convnext_tiny\n  budget: 8gpus\n"
    )
    spec = load(path, tmp_path / "r")
    assert sorted(cell.request.image_size for cell in spec.cells()) == [224, 288]
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  net: [convnext_tiny]\noptions:\n  budget: 8gpus\n  image_size: 224.5\n"
    )
    with pytest.raises(SweepSpecError, match="options.image_size value 224.5 is not int or str"):
        load(path, tmp_path / "r")
