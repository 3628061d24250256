"""Instances through the CLI: the main job names the instance it prices and the host it assumes,
its answer moves with --cpu-cores-per-gpu and --instance, the Reproduce line carries the host,
DALI never puts an AMD GPU first, and bad host options are refused in one line."""

from __future__ import annotations

import json
import shlex

import pytest

from planner import catalog, hosts
from planner.cli import main


def _run(capsys, tmp_path, *args) -> tuple[int, str, str]:
    code = main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _best(capsys, tmp_path, *args) -> dict:
    code, out, _ = _run(capsys, tmp_path, "optimize", *args, "--format", "json", "--out", str(tmp_path / "r"))
    assert code == 0
    return json.loads(out)["best"]


def test_main_job_names_its_instance_host_and_loader(capsys, tmp_path):
    code, out, _ = _run(
        capsys, tmp_path, "optimize", "alexnet", "--budget", "16gpus", "--out", str(tmp_path / "r")
    )
    assert code == 0
    assert "  price $" in out and "  host: " in out and "  data loader: " in out
    best = _best(capsys, tmp_path, "alexnet", "--budget", "16gpus")
    # the host a plan sits on sets its loader: cores per GPU x the cited 182 images/s per core
    assert best["loader_samples_s_per_gpu"] == pytest.approx(182.0 * best["cpu_cores_per_gpu"])
    if best["instance"]:
        inst = hosts.instances()[best["instance"]]
        assert inst.device == best["gpu"] and inst.gpus == best["gpus_per_node"]
        assert best["cpu_cores_per_gpu"] == pytest.approx(inst.cores / inst.gpus)


def test_fewer_host_cores_make_the_loader_bound_plan_slower(capsys, tmp_path):
    wide = _best(capsys, tmp_path, "alexnet", "--budget", "16gpus")
    narrow = _best(capsys, tmp_path, "alexnet", "--budget", "16gpus", "--cpu-cores-per-gpu", "2")
    assert narrow["cpu_cores_per_gpu"] == 2.0 and narrow["loader_samples_s_per_gpu"] == 364.0
    # AlexNet is decode-bound: 2 cores per GPU feed 364 images/s, so each GPU runs at most that fast
    assert narrow["throughput_samples_s"] <= 364.0 * narrow["gpus"] * 1.0001
    assert narrow["time_to_train_s"] > 2 * wide["time_to_train_s"]
    assert "--cpu-cores-per-gpu 2" in narrow["estimate_command"]


def test_instance_pins_device_node_price_and_host(capsys, tmp_path):
    best = _best(capsys, tmp_path, "resnet50", "--budget", "16gpus", "--instance", "aws/p4d.24xlarge")
    inst = hosts.instances()["aws/p4d.24xlarge"]
    assert (best["gpu"], best["gpus_per_node"], best["instance"]) == ("A100_40GB", 8, "aws/p4d.24xlarge")
    assert best["cpu_cores_per_gpu"] == inst.cpu_cores / 8 == 6.0  # AWS: 48 physical cores
    assert best["nics_per_node"] == 4.0  # 4 x 100 Gb/s EFA as eth100 links
    row = [r for r in catalog.price_rows() if r.host == "aws/p4d.24xlarge" and r.pricing == "on-demand"]
    assert best["usd_per_gpu_hour"] == pytest.approx(min(r.usd_per_gpu_hour for r in row))
    assert "--instance aws/p4d.24xlarge" in best["estimate_command"]


def test_reproduce_line_with_an_instance_round_trips(capsys, tmp_path):
    best = _best(capsys, tmp_path, "resnet50", "--budget", "16gpus", "--instance", "aws/p4d.24xlarge")
    argv = shlex.split(best["estimate_command"])[1:]
    code, out, _ = _run(capsys, tmp_path, *argv, "--format", "json")
    assert code == 0
    rec = json.loads(out)[0]
    assert rec["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-9)
    assert rec["instance"] == "aws/p4d.24xlarge"


def test_dali_never_recommends_an_amd_gpu(capsys, tmp_path):
    best = _best(capsys, tmp_path, "resnet50", "--budget", "64gpus", "--data-loader", "dali")
    assert catalog.device(best["gpu"]).vendor.lower() == "nvidia"
    # an AMD GPU asked for explicitly reads its data through the host's cores, and says so
    amd = _best(
        capsys, tmp_path, "resnet50", "--budget", "64gpus", "--data-loader", "dali", "--gpu", "MI300X"
    )
    assert "CUDA-only" in amd["loader"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--instance", "aws/p9.huge"], "--instance 'aws/p9.huge' names no known instance"),
        (
            ["--cpu-cores-per-gpu", "0"],
            "--cpu-cores-per-gpu must be a positive finite number up to 1024, got 0.0",
        ),
        (
            ["--cpu-cores-per-gpu", "-1"],
            "--cpu-cores-per-gpu must be a positive finite number up to 1024, got -1.0",
        ),
        (["--nics", "0"], "--nics"),
        (["--instance", "aws/p4d.24xlarge", "--gpu", "H100_SXM"], "no device has a on-demand price"),
    ],
)
def test_bad_host_options_exit_2_in_one_line(capsys, tmp_path, args, message):
    code, out, err = _run(capsys, tmp_path, "optimize", "resnet50", "--budget", "16gpus", *args)
    assert code == 2 and message in err and err.strip().count("\n") == 0 and "Traceback" not in err


def test_estimate_instance_must_match_device_and_node(capsys, tmp_path):
    code, _, err = _run(
        capsys, tmp_path, "estimate", "resnet50", "--device", "T4", "--instance", "aws/p4d.24xlarge"
    )
    assert code == 2 and "--instance aws/p4d.24xlarge holds 8 x A100_40GB" in err


def test_list_instances_cites_every_row(capsys, tmp_path):
    code, out, _ = _run(capsys, tmp_path, "list", "instances", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert {r["id"] for r in rows} == set(hosts.instances())
    assert all("http" in r["source"] and r["date"] for r in rows)


def test_sweep_spec_takes_host_options(tmp_path):
    from planner.request.optimize import validate
    from planner.sweep.spec import SweepSpecError, load

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  cpu_cores_per_gpu: [4, 12]\noptions:\n  net: resnet50\n"
        "  budget: 16gpus\n  instance: aws/p4d.24xlarge\n  nics: 2\n"
    )
    cells = load(path, tmp_path / "r").cells()
    assert sorted(c.request.cpu_cores_per_gpu for c in cells) == [4, 12]
    prob = validate(cells[0].request)
    assert prob.gpus == ("A100_40GB",) and prob.hosts.at(0, 8).id == "aws/p4d.24xlarge"
    assert prob.hosts.at(0, 8).nics == 2.0
    path.write_text("name: s\ntrials: 8\ngrid:\n  net: [resnet50]\noptions:\n  budget: 8gpus\n  nics: two\n")
    with pytest.raises(SweepSpecError, match="nics"):
        load(path, tmp_path / "r")
