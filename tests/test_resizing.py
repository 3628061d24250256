"""Progressive resizing (planner/resizing.py): ``--image-size SIZE:FRACTION,...``.

The published schedule checked here is FFCV's ResNet-50 recipe ``rn50_configs/rn50_88_epochs.yaml``
(https://github.com/libffcv/ffcv-imagenet @5bab20e, read 2026-11-25): 88 epochs, ``min_res`` 160,
``max_res`` 192, ``start_ramp`` 65, ``end_ramp`` 76, and ``train_imagenet.py`` (@606c584) sets each
epoch's resolution to ``min_res`` up to ``start_ramp``, ``max_res`` from ``end_ramp``, and between
them the linear interpolation rounded to a multiple of 32 px: 71 epochs at 160 px, 17 at 192 px.
The zoo's ResNet-50 is a fixed-size spec, so the schedule is applied to ConvNeXt-T here.

Time to train under a schedule = epochs x steps per epoch x sum over phases of fraction x step
time at that size; memory is the largest size's.
"""

from __future__ import annotations

import json
import math
import shlex
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_image_size import _run, refused  # noqa: E402  (this folder is on sys.path)

from planner import catalog
from planner.cli import main
from planner.errors import BadInput
from planner.resizing import MAX_PHASES, Schedule, parse

FFCV = "160:71/88,192:17/88"
NET = "convnext_tiny"
PLAN = ["--device", "H100_SXM", "--workers", "8", "--gpus-per-node", "8", "--precision", "bf16"]


def _ffcv_epochs(epochs=88, lo=160, hi=192, start=65, end=76) -> dict[int, int]:
    """Epochs per resolution under the published ramp rule (see the module docstring)."""
    out: dict[int, int] = {}
    for e in range(epochs):
        if e <= start:
            res = lo
        elif e >= end:
            res = hi
        else:
            res = 32 * round((lo + (hi - lo) * (e - start) / (end - start)) / 32)
        out[res] = out.get(res, 0) + 1
    return out


def _estimate(capsys, size: str, *extra: str) -> dict:
    (row,) = _run(capsys, ["estimate", NET, *PLAN, "--image-size", size, *extra, "--format", "json"])
    return row


def test_ffcv_recipe_is_71_epochs_at_160_and_17_at_192():
    assert _ffcv_epochs() == {160: 71, 192: 17}
    s = parse(FFCV)
    assert [(p.size, p.fraction) for p in s.phases] == [(160, Fraction(71, 88)), (192, Fraction(17, 88))]
    assert s.largest == 192 and s.text == FFCV
    np.testing.assert_allclose(s.weights, [71 / 88, 17 / 88])


def test_fastai_diu_eight_machine_schedule():
    """cybertronai/imagenet18 @218ef7e train.py ``eight_machines``: 128 px from epoch 0, 224 px
    from 14, 288 px from 29 to the end at 35 (train_imagenet_nv.py: the largest phase epoch)."""
    starts, end = {128: 0, 224: 14, 288: 29}, 35
    bounds = [*starts.values(), end]
    epochs = {size: bounds[i + 1] - bounds[i] for i, size in enumerate(starts)}
    assert epochs == {128: 14, 224: 15, 288: 6}
    s = parse("128:2/5,224:3/7,288:6/35")
    assert {p.size: p.fraction * end for p in s.phases} == epochs and s.largest == 288


def test_canonical_text():
    assert parse("128:0.4, 192:0.40,224:1/5").text == "128:0.4,192:0.4,224:0.2"
    assert parse("224:1").text == "224:1" and parse("224") == 224 and parse(" 288 ") == 288
    assert parse(None) is None and parse(160) == 160


@pytest.mark.parametrize("loader", ["none", "cpu"])
def test_step_time_is_the_phases_mean_and_memory_the_largest(capsys, loader):
    """Hand-computed: 71/88 x (step at 160 px) + 17/88 x (step at 192 px)."""
    extra = ("--batch", "256", "--data-loader", loader)
    small, big = _estimate(capsys, "160", *extra), _estimate(capsys, "192", *extra)
    mixed = _estimate(capsys, FFCV, *extra)
    assert big["total_ms"] > small["total_ms"]
    assert mixed["total_ms"] == pytest.approx(
        71 / 88 * small["total_ms"] + 17 / 88 * big["total_ms"], rel=1e-12
    )
    assert mixed["forward_ms"] == pytest.approx(71 / 88 * small["forward_ms"] + 17 / 88 * big["forward_ms"])
    assert mixed["memory_gb"] == big["memory_gb"] > small["memory_gb"]
    assert mixed["image_size"] == FFCV
    assert [(p["image_size"], p["total_ms"]) for p in mixed["image_phases"]] == [
        (160, small["total_ms"]),
        (192, big["total_ms"]),
    ]
    if (
        loader == "cpu"
    ):  # the loader's seconds per image follow the mean pixels: (71 x 160^2 + 17 x 192^2) / 88
        mean_px = (71 * 160**2 + 17 * 192**2) / 88
        assert mixed["loader_samples_s_per_gpu"] == pytest.approx(
            small["loader_samples_s_per_gpu"] * 160**2 / mean_px, rel=1e-12
        )


def test_optimize_time_to_train_sums_the_phases_and_reproduces(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        "optimize",
        NET,
        "--budget",
        "8gpus",
        "--gpu",
        "H100_SXM",
        "--image-size",
        FFCV,
        "--goodput",
        "off",
    ]
    data = _run(capsys, [*args, "--format", "json"])
    for rec in [data["best"], *data["alternatives"]]:
        assert rec["image_size"] == FFCV
        words = shlex.split(rec["estimate_command"])
        assert words[words.index("--image-size") + 1] == FFCV
        (row,) = _run(capsys, [*words[1:], "--format", "json"])  # the Reproduce line
        assert row["total_ms"] == pytest.approx(rec["iteration_ms"], rel=1e-9)
        assert row["memory_gb"] == pytest.approx(rec["memory_gb"], rel=1e-9)
        at = {}
        for size in ("160", "192"):  # the same plan at one size
            one = list(words[1:])
            one[one.index("--image-size") + 1] = size
            (at[size],) = _run(capsys, [*one, "--format", "json"])
        steps = rec["epochs"] * math.ceil(1_281_167 / rec["global_batch"])
        by_hand = steps * (71 / 88 * at["160"]["total_ms"] + 17 / 88 * at["192"]["total_ms"]) / 1e3
        assert rec["time_to_train_s"] == pytest.approx(by_hand, rel=1e-9)
        assert [p["iteration_ms"] for p in rec["image_phases"]] == pytest.approx(
            [at["160"]["total_ms"], at["192"]["total_ms"]], rel=1e-9
        )
        assert rec["memory_gb"] == pytest.approx(at["192"]["memory_gb"], rel=1e-9)


def test_text_answer_names_the_phases(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["optimize", NET, "--budget", "8gpus", "--gpu", "H100_SXM", "--image-size", FFCV]) == 0
    out = capsys.readouterr().out
    assert f"progressive resizing {FFCV}: 160 px for 80.7% of the epochs" in out
    assert f"--image-size {FFCV}" in out
    run = json.loads(next((tmp_path / "results").glob("*/run.json")).read_text())
    assert run["request"]["image_size"] == FFCV


def test_pareto_plan_files_carry_the_schedule_and_rescore_exactly(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["pareto", NET, "--budget", "8gpus", "--gpu", "H100_SXM", "--image-size", FFCV]
    assert main([*args, "--out", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    files = sorted((tmp_path / "p").glob("plan_*.json"))
    assert files
    for f in files:
        plan = json.loads(f.read_text())
        assert plan["image_size"] == FFCV
        (row,) = _run(capsys, ["estimate", "--plan", str(f), "--format", "json"])
        assert row["total_ms"] == pytest.approx(plan["expected"]["iteration_ms"], rel=1e-9), f.name
        assert row["image_size"] == FFCV


def test_sweep_spec_takes_a_schedule(tmp_path):
    from planner.sweep.spec import SweepSpecError, load

    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: s\ntrials: 8\ngrid:\n  image_size: ['{FFCV}', 224]\noptions:\n  net: {NET}\n  budget: 8gpus\n"
    )
    assert sorted(str(c.request.image_size) for c in load(path, tmp_path / "r").cells()) == [
        "160:71/88,192:17/88",
        "224",
    ]
    path.write_text(f"name: s\ntrials: 8\ngrid:\n  image_size: ['160:0.5,192:0.4']\noptions:\n  net: {NET}\n")
    with pytest.raises(SweepSpecError, match="fractions sum to 0.9, not 1"):
        load(path, tmp_path / "r")


def test_one_evaluator_call_per_phase_for_a_whole_batch(monkeypatch):
    """Vectorised: a batch of plans costs one evaluator call per phase, not one per plan."""
    from planner.metrics import scorer as scorer_module
    from planner.pipeline import build
    from planner.request.optimize import OptimizeRequest

    scorer, _ = build(OptimizeRequest(NET, budget=("64gpus",), gpu="H100_SXM", image_size=FFCV))
    calls = []
    real = scorer_module.evaluate

    def counting(costs, plans, *a, **k):
        calls.append(len(plans))
        return real(costs, plans, *a, **k)

    monkeypatch.setattr(scorer_module, "evaluate", counting)
    _, cols = next(scorer.space.chunks(4096))
    m = scorer.metrics(cols)
    n = len(m["gpus"])
    assert n > 100 and calls == [n, n]


@pytest.mark.parametrize(
    ("net", "value", "message"),
    [
        (NET, "160:0.5,192:0.4", "--image-size '160:0.5,192:0.4': fractions sum to 0.9, not 1"),
        (NET, "160:0.6,192:0.6", "fractions sum to 1.2, not 1"),
        (NET, "160:1/3,192:1/3", "fractions sum to 2/3, not 1"),
        (NET, "160:0,192:1", "fraction 0 must be in (0, 1]"),
        (NET, "160:0.5,160:0.5", "each size may appear once"),
        (NET, "160:0.5;192:0.5", "phase '160:0.5;192:0.5' is not SIZE:FRACTION"),
        (NET, "160:0.5,192", "phase '192' is not SIZE:FRACTION"),
        (NET, "160:-0.5,192:1.5", "phase '160:-0.5' is not SIZE:FRACTION"),
        (NET, "abc:1", "phase 'abc:1' is not SIZE:FRACTION"),
        (NET, ",".join(f"{32 * (i + 1)}:1/9" for i in range(9)), f"9 phases, at most {MAX_PHASES}"),
        (
            NET,
            "160:0.5,8192:0.5",
            "--image-size for 'convnext_tiny' must be an integer from 32 to 4096, got 8192",
        ),
        (NET, "16:0.5,224:0.5", "must be an integer from 32 to 4096, got 16"),
        (
            "swin_t",
            "224:0.5,256:0.5",
            "--image-size 256 does not suit 'swin_t': it must be a multiple of 224 px",
        ),
        ("resnet50", FFCV, "'resnet50' is a fixed-size spec"),
    ],
)
@pytest.mark.parametrize("command", ["estimate", "optimize"])
def test_bad_schedules_exit_2_in_one_line(capsys, command, net, value, message):
    refused(capsys, command, net, value, message)


_SIZES = st.lists(st.integers(32, 4096), min_size=1, max_size=MAX_PHASES, unique=True)


@st.composite
def _schedules(draw) -> str:
    """A valid schedule: distinct sizes, positive p/q or decimal fractions summing to 1."""
    sizes = draw(_SIZES)
    den = draw(st.sampled_from([4, 5, 8, 10, 88, 100, 1000]))
    if den < len(sizes):
        den *= len(sizes)
    cuts = sorted(
        draw(st.lists(st.integers(1, den - 1), min_size=len(sizes) - 1, max_size=len(sizes) - 1, unique=True))
    )
    nums = [b - a for a, b in zip([0, *cuts], [*cuts, den])]
    decimal = draw(st.booleans()) and 10**6 % den == 0
    parts = [
        f"{s}:{Fraction(n, den) if not decimal else format(n / den, '.6f')}" for s, n in zip(sizes, nums)
    ]
    return ",".join(parts)


@settings(max_examples=300, deadline=None)
@given(_schedules())
def test_fuzz_valid_schedules_round_trip_exactly(text):
    s = parse(text)
    assert isinstance(s, Schedule) and sum(p.fraction for p in s.phases) == 1
    again = parse(s.text)
    assert again == s and again.text == s.text
    assert s.largest == max(p.size for p in s.phases)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789:,./ -+e", max_size=60))
def test_fuzz_any_text_parses_or_is_refused_in_one_line(text):
    try:
        value = parse(text)
    except BadInput as exc:
        msg = str(exc)
        assert msg.startswith("--image-size '") and "\n" not in msg
        return
    assert isinstance(value, int | Schedule)
    if isinstance(value, Schedule):
        assert sum(p.fraction for p in value.phases) == 1 and len(value.phases) <= MAX_PHASES


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="0123456789:,/.", min_size=1, max_size=30))
def test_fuzz_cli_never_tracebacks(text):
    """Through `planner estimate` (sizes checked against the net too): exit 0 or 2, one line."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["estimate", NET, "--workers", "1", "--image-size", text, "--format", "json"])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        assert len(err.getvalue().strip().splitlines()) == 1 and "Traceback" not in err.getvalue()


def test_every_vision_net_takes_a_schedule_at_its_own_sizes(capsys):
    """A schedule of the net's published size alone equals that size."""
    for net in ("efficientnet_b0", "convnext_tiny", "vit_b_16", "swin_t"):
        size = catalog.net_spec(net)["vision"]["image_size"]
        (one,) = _run(
            capsys, ["estimate", net, "--workers", "1", "--image-size", str(size), "--format", "json"]
        )
        (sch,) = _run(
            capsys, ["estimate", net, "--workers", "1", "--image-size", f"{size}:1", "--format", "json"]
        )
        assert (
            sch["total_ms"] == pytest.approx(one["total_ms"], rel=1e-12) and sch["image_size"] == f"{size}:1"
        )
