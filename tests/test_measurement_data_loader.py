"""A measured run's data loader (``data_loader``, ``cpu_cores_per_gpu`` columns): read, refused
in one line when bad, and charged to the run's prediction as planner.loaders charges a plan."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from planner import catalog, loaders
from planner.calibrate import fitting
from planner.calibrate import measurements as m
from planner.calibrate.predict import RunTable
from planner.errors import BadInput

HEADER = "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,data_loader,cpu_cores_per_gpu"
# ResNet-50 on one node of 8 V100s in fp16, batch 256 (the DeepLearningExamples PyTorch recipe)
V100 = "a,resnet50,V100_16GB,fp16,8,8,,256,,samples_per_s,8000,{loader},{cores}"
A100 = "a,resnet50,A100_80GB,fp16,8,8,,256,,samples_per_s,16000,{loader},{cores}"


def write(tmp_path, lines, header=HEADER):
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([header, *lines]) + "\n")
    return p


def test_columns_are_read_and_default_to_no_input_bound(tmp_path):
    runs = m.load(
        write(
            tmp_path,
            [
                V100.format(loader="cpu", cores="5"),
                V100.format(loader="dali", cores=""),
                V100.format(loader="", cores=""),
            ],
        )
    )
    assert [(r.data_loader, r.cpu_cores_per_gpu) for r in runs] == [
        ("cpu", 5.0),
        ("dali", None),
        ("none", None),
    ]
    # a file without the columns reads as before: no input bound
    plain = m.load(
        write(tmp_path, ["a,resnet50,V100_16GB,fp16,8,8,,256,,samples_per_s,8000"], HEADER.rsplit(",", 2)[0])
    )
    assert (plain[0].data_loader, plain[0].cpu_cores_per_gpu) == ("none", None)


@pytest.mark.parametrize(
    ("loader", "cores", "column", "says"),
    [
        ("pil", "", "data_loader", "unknown data loader 'pil' (valid: cpu, dali, none)"),
        ("", "5", "cpu_cores_per_gpu", "host cores need data_loader cpu or dali"),
        ("none", "5", "cpu_cores_per_gpu", "host cores need data_loader cpu or dali"),
        ("cpu", "0", "cpu_cores_per_gpu", "not a positive finite number"),
        ("cpu", "-2", "cpu_cores_per_gpu", "not a positive finite number"),
        ("cpu", "many", "cpu_cores_per_gpu", "not a number"),
        ("cpu", "5000", "cpu_cores_per_gpu", "5000 is above 1024"),
    ],
)
def test_bad_loader_names_row_and_column(tmp_path, loader, cores, column, says):
    with pytest.raises(BadInput) as err:
        m.load(write(tmp_path, [V100.format(loader="", cores=""), V100.format(loader=loader, cores=cores)]))
    msg = str(err.value)
    assert f"row 2, column '{column}'" in msg and says in msg
    assert "\n" not in msg


def test_bad_loader_is_one_line_and_exit_2_from_validate_and_calibrate(tmp_path):
    path = write(tmp_path, [V100.format(loader="dali-gpu", cores="")])
    for args in (
        ["validate", str(path), "--out", str(tmp_path / "v")],
        ["calibrate", str(path), "--no-loso"],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "planner", *args], capture_output=True, text=True, check=False
        )
        assert out.returncode == 2, out.stderr
        err = out.stderr.strip()
        assert "column 'data_loader'" in err and "'dali-gpu'" in err and "valid: cpu, dali, none" in err
        assert len(err.splitlines()) == 1 and "Traceback" not in err


def _predict(tmp_path, lines) -> np.ndarray:
    return fitting.predict(RunTable(m.load(write(tmp_path, lines)), fitting.RULES))


def test_a_cpu_loader_bounds_the_run_at_its_cores(tmp_path):
    """5 host cores per GPU (a DGX-1: 40 cores for 8 GPUs) x the cited 182 images/s per core
    (configs/efficiencies.toml [loader.cpu_jpeg]) x 8 GPUs = 7,280 images/s, below what the
    V100s compute in fp16: the prediction is the loader's rate exactly."""
    per_core = catalog.loader_rates()["cpu_jpeg"]["samples_per_s_per_core"]
    assert per_core == 182.0
    free, bound, many = _predict(
        tmp_path,
        [
            V100.format(loader="none", cores=""),
            V100.format(loader="cpu", cores="5"),
            V100.format(loader="cpu", cores="64"),
        ],
    )
    assert free > 8 * 5 * per_core
    assert bound == pytest.approx(8 * 5 * per_core, rel=1e-9)
    assert many == pytest.approx(free, rel=1e-12)  # 64 cores per GPU: the GPUs bind, not the loader
    # no cores stated: the assumed host's ([host.default] cpu_cores_per_gpu = 14)
    (assumed,) = _predict(tmp_path, [V100.format(loader="cpu", cores="")])
    assert assumed == pytest.approx(min(free, 8 * 14 * per_core), rel=1e-9)


def test_dali_decodes_on_the_a100_decoder_and_on_the_v100_sms(tmp_path):
    """DALI on an A100 (a hardware JPEG decoder) is bounded at [loader.gpu_dali] 7,000 images/s per
    GPU and costs no GPU time; on a V100 (no decoder) it charges every image's decoding to the step."""
    hw = catalog.loader_rates()["gpu_dali"]["samples_per_s_per_gpu"]
    a_free, a_dali = _predict(
        tmp_path, [A100.format(loader="none", cores=""), A100.format(loader="dali", cores="")]
    )
    assert a_dali == pytest.approx(min(a_free, 8 * hw), rel=1e-9)
    v_free, v_dali = _predict(
        tmp_path, [V100.format(loader="none", cores=""), V100.format(loader="dali", cores="")]
    )
    # each step of 256 images per GPU gains 256 x the GPU's SM decoding time (the A100's 6,000
    # images/s all-CUDA rate scaled by the V100's FP32 peak; the straggler wait grows with it)
    decode = loaders.per_device("dali", "V100_16GB")[1]
    assert decode == pytest.approx(1 / (6000 * 15.7 / 19.5), rel=1e-3)
    assert 8 * 256 / v_dali - 8 * 256 / v_free == pytest.approx(256 * decode, rel=0.02)
