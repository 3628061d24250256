"""Calibration profiles of the modern rule set: file round trip, how a profile scales the cited
efficiencies, bad files, and recovery of known parameters from runs the model itself generated.
"""

from __future__ import annotations

import dataclasses
import tomllib

import numpy as np
import pytest

from planner import catalog
from planner.calibrate import fitting, profile
from planner.calibrate.measurements import Run
from planner.calibrate.predict import RunTable
from planner.errors import BadInput


def _runs():
    """A grid of plausible runs: 3 nets x 2 devices x their precisions x batches x GPU counts
    (batch 4: launch-bound, so the host dispatch time is identifiable)."""
    out, i = [], 0
    for net in ("resnet50", "vgg16", "alexnet"):
        for device, precisions in (("V100_16GB", ("fp32", "fp16")), ("A100_80GB", ("tf32", "bf16"))):
            for precision in precisions:
                for batch in (4, 16, 64, 256):
                    for gpus, per_node, network in ((1, 1, "nvlink2"), (8, 8, "nvlink2"), (32, 8, "ib_hdr")):
                        i += 1
                        link = network if gpus > per_node else catalog.device(device).device.intra_link
                        out.append(
                            Run(
                                i,
                                f"src{i}",  # iid noise per run: each run its own source
                                net,
                                device,
                                precision,
                                gpus,
                                per_node,
                                link,
                                batch,
                                "ring",
                                "samples_per_s",
                                1.0,
                            )
                        )
    return out


TRUE_SCALES = {
    "gemm.Volta.fp32": 0.8,
    "gemm.Volta.16bit": 0.55,
    "gemm.Ampere.tf32": 0.45,
    "gemm.Ampere.16bit": 0.7,
    "memory.Volta": 0.9,
    "memory.Ampere": 1.05,
    "link.inter_node": 0.8,
}
TRUE_OVER = {"host_per_kernel_us": 9.0, "kernel_min_us": 3.0, "iteration_us": 400.0}


@pytest.mark.slow
@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_fit_recovers_parameters_of_synthetic_runs(noise):
    runs = _runs()
    truth = profile.Profile(TRUE_SCALES, TRUE_OVER, {})
    table = RunTable(runs, "modern")
    measured = fitting.predict(table, truth) * np.exp(np.random.default_rng(3).normal(0, noise, len(runs)))
    runs = [dataclasses.replace(r, value=float(v)) for r, v in zip(runs, measured)]
    c = fitting.calibrate(runs, ["synthetic"], loso=False)
    got = {**c.profile.scales, **c.profile.overheads_us}
    spread = dict(
        zip(
            c.fit.names,
            c.fit.shrinkage
            * np.array(
                [
                    profile.OVERHEAD_SPREAD if n in profile.OVERHEADS else profile.SCALE_SPREAD
                    for n in c.fit.names
                ]
            ),
        )
    )
    for name, want in {**TRUE_SCALES, **TRUE_OVER}.items():
        i = c.fit.names.index(name)
        if c.fit.shrinkage[i] < 0.25:  # pinned down by the data: recovered closely
            assert got[name] == pytest.approx(want, rel=0.05 + 2 * noise), name
        elif c.fit.identified[i]:  # narrowed: within two posterior standard deviations
            assert abs(np.log(got[name] / want)) <= 2 * spread[name], name
    pinned = {n for n, s in zip(c.fit.names, c.fit.shrinkage) if s < 0.25}
    assert {
        "gemm.Volta.fp32",
        "gemm.Volta.16bit",
        "gemm.Ampere.tf32",
        "gemm.Ampere.16bit",
        "host_per_kernel_us",
    } <= pinned
    # tile quantization leaves most of this grid's GEMM time compute-bound: the memory scales
    # are narrowed by the data (and recovered above), not pinned
    identified = {n for n, ok in zip(c.fit.names, c.fit.identified) if ok}
    assert {"memory.Volta", "memory.Ampere"} <= identified
    # the fitted profile predicts the synthetic runs about as well as the noise allows
    assert c.profile.meta["median_ape"] <= 100 * noise + 1.0


def test_round_trip_and_apply():
    p = profile.Profile(
        {"gemm.Hopper.16bit": 0.5, "memory.Hopper": 2.0, "link.inter_node": 0.9},
        {"host_per_kernel_us": 12.0},
        {"rules": "modern", "interval": [0.8, 1.2]},
    )
    q = profile.from_dict(tomllib.loads(profile.to_toml(p)), "x")
    assert q.scales == pytest.approx(p.scales) and q.overheads_us == pytest.approx(p.overheads_us)
    assert q.meta["interval"] == [0.8, 1.2]
    base = catalog.efficiency(["H100_SXM", "H200", "V100_16GB"], ["ib_ndr", "nvlink4"])
    eff = p.apply(base)
    bf16 = 3  # index of bf16 in costs.hardware.PRECISIONS
    # both Hopper devices scaled, the Volta one untouched; fractions capped at 1
    np.testing.assert_allclose(eff.gemm[:2, bf16], base.gemm[:2, bf16] * 0.5)
    fp16 = 2  # fp16 shares the 16bit group: the same tensor cores at the same peak
    np.testing.assert_allclose(eff.gemm[:2, fp16], base.gemm[:2, fp16] * 0.5)
    np.testing.assert_allclose(eff.gemm[:2, 0], base.gemm[:2, 0])  # fp32 untouched
    assert eff.gemm[2, bf16] == base.gemm[2, bf16] or np.isnan(base.gemm[2, bf16])
    np.testing.assert_allclose(eff.memory[:2], np.minimum(base.memory[:2] * 2.0, 1.0))
    assert eff.memory[2] == base.memory[2]
    assert eff.link[0] == pytest.approx(base.link[0] * 0.9) and eff.link[1] == base.link[1]
    assert eff.host_per_kernel_s == pytest.approx(12e-6)
    assert eff.iteration_s == base.iteration_s


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('[scale]\n"gemm.Hopper.16bit" = -1\n', "not a positive number"),
        ('[scale]\n"gpu.Hopper" = 1\n', "unknown [scale] key gpu.Hopper"),
        ("[overhead]\nlaunch_us = 3\n", "unknown [overhead] key launch_us"),
        ('[overhead]\nhost_per_kernel_us = "fast"\n', "not a positive number"),
    ],
)
def test_bad_profiles(tmp_path, text, says):
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(BadInput, match=says.replace("[", r"\[").replace("]", r"\]")):
        profile.load(f)
    with pytest.raises(BadInput, match="No such file"):
        profile.load(tmp_path / "none.toml")
    f.write_text("[scale\n")
    with pytest.raises(BadInput, match="malformed TOML"):
        profile.load(f)
