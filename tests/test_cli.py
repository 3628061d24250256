"""The `planner` command line, through planner.cli.main(argv) (which returns the exit code).

Bad input must give exit code 2 and exactly one stderr line "error: ..." naming the problem
(and the valid choices where there are some), never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
from itertools import product
from pathlib import Path

import pytest

from costs.comm import schemes as comm
from planner import catalog
from planner.cli import main

ESTIMATE_KEYS = {
    "net",
    "device",
    "network",
    "scaling",
    "workers",
    "batch_per_worker",
    "effective_batch",
    "scheme",
    "forward_ms",
    "backward_ms",
    "update_ms",
    "compute_ms",
    "comm_ms",
    "total_ms",
    "speedup",
    "throughput_samples_s",
}
ALEXNET_PARAMS = 50_303_912
ALEXNET_FWD_FLOPS_B128 = 188_737_454_080  # paleo-model.md §D.5, sum of the fwd column
ALEXNET_FWD_FLOPS_B1 = 1_474_511_360  # paleo-model.md §E.2


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ok_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--format", "json")
    assert code == 0, err
    assert "Traceback" not in err
    return json.loads(out)


# ---- estimate ----------------------------------------------------------------------------------

# PALEO's own setting (its CLI defaults: TITAN_X, 10 Gbit/s Ethernet, PPP 1.0, fp32), for tests
# of PALEO's formulas; planner's defaults are the modern rules (planner.request.defaults).
PALEO = [
    "--device",
    "TITAN_X",
    "--network",
    "ethernet",
    "--rules",
    "paleo-2018",
    "--precision",
    "fp32",
    "--ppp-comp",
    "1",
    "--ppp-comm",
    "1",
]


def test_estimate_json_records(capsys):
    recs = ok_json(capsys, "estimate", "alexnet", "--workers", "1,2,4")
    assert isinstance(recs, list)
    for r in recs:
        assert ESTIMATE_KEYS <= set(r), ESTIMATE_KEYS - set(r)
        assert r["net"] == "alexnet"
        # the shared defaults: modern rules on an H100 over 100 Gbit/s Ethernet, in the
        # H100's training precision (bf16), with the calibration's interval
        assert r["device"] == "H100_SXM" and r["network"] == "eth100" and r["rules"] == "modern"
        assert r["precision"] == "bf16" and r["scaling"] == "weak"
        lo, hi = r["total_ms_range"]
        assert lo < r["total_ms"] < hi
    # One record per worker count: the modern rules default to the scheme a plan uses (ring).
    pairs = [(r["workers"], r["scheme"]) for r in recs]
    assert pairs == [(1, "ring"), (2, "ring"), (4, "ring")]
    # --scheme all: one record per (workers, scheme), all four schemes
    recs = ok_json(capsys, "estimate", "alexnet", "--workers", "1,2,4", "--scheme", "all")
    pairs = [(r["workers"], r["scheme"]) for r in recs]
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == set(product([1, 2, 4], comm.SCHEME_NAMES))


def test_estimate_record_arithmetic(capsys):
    recs = ok_json(capsys, "estimate", "alexnet", "--workers", "1,2,4,8")
    for r in recs:
        assert r["compute_ms"] == pytest.approx(
            r["forward_ms"] + r["backward_ms"] + r["update_ms"], rel=1e-12
        )
        # the modern rules add host-bound and framework time (overhead_ms) to compute and comm
        assert r["total_ms"] == pytest.approx(r["compute_ms"] + r["comm_ms"] + r["overhead_ms"], rel=1e-12)
        assert r["batch_per_worker"] == 128  # weak scaling keeps the spec's batch per worker
        assert r["effective_batch"] == 128 * r["workers"]
        assert r["throughput_samples_s"] == pytest.approx(
            r["effective_batch"] / (r["total_ms"] / 1e3), rel=1e-9
        )
        for k in ("forward_ms", "backward_ms", "update_ms", "comm_ms"):
            assert r[k] >= 0 and math.isfinite(r[k])
        if r["workers"] == 1:
            assert r["comm_ms"] == 0
            assert r["speedup"] == pytest.approx(1.0)
    t1 = {r["scheme"]: r["total_ms"] for r in recs if r["workers"] == 1}
    for r in recs:  # weak scaling: K T(1) / T(K)
        assert r["speedup"] == pytest.approx(r["workers"] * t1[r["scheme"]] / r["total_ms"], rel=1e-9)


def test_estimate_scheme_tree(capsys):
    recs = ok_json(capsys, "estimate", "alexnet", "--scheme", "tree", "--workers", "1,2,4", *PALEO)
    assert [(r["workers"], r["scheme"]) for r in recs] == [(1, "tree"), (2, "tree"), (4, "tree")]
    # Tree over 10 Gbit/s Ethernet: 2 ceil(log2 K) x (4 bytes x params) / 1.25e9 B/s.
    t_link_ms = 4 * ALEXNET_PARAMS / 1.25e9 * 1e3
    assert recs[1]["comm_ms"] == pytest.approx(2 * 1 * t_link_ms, rel=1e-9)
    assert recs[2]["comm_ms"] == pytest.approx(2 * 2 * t_link_ms, rel=1e-9)
    assert recs[1]["comm_ms"] == pytest.approx(321.9450368, rel=1e-9)
    # Compute does not depend on K in weak scaling.
    assert len({round(r["compute_ms"], 9) for r in recs}) == 1


@pytest.mark.parametrize("batch", [100, 128, 7])
def test_estimate_strong_scaling_ceil(capsys, batch):
    workers = [1, 2, 3, 8, 64, 128]
    recs = ok_json(
        capsys,
        "estimate",
        "alexnet",
        "--scaling",
        "strong",
        "--batch",
        str(batch),
        "--workers",
        ",".join(map(str, workers)),
        "--scheme",
        "tree",
    )
    assert [r["workers"] for r in recs] == workers
    for r in recs:
        assert r["scaling"] == "strong"
        assert r["batch_per_worker"] == math.ceil(batch / r["workers"])
    t1 = recs[0]["total_ms"]
    for r in recs:  # strong scaling: T(1) / T(K)
        assert r["speedup"] == pytest.approx(t1 / r["total_ms"], rel=1e-9)


def test_estimate_weak_scaling_explicit_batch(capsys):
    recs = ok_json(capsys, "estimate", "alexnet", "--batch", "64", "--workers", "1,16", "--scheme", "ring")
    assert [(r["batch_per_worker"], r["effective_batch"]) for r in recs] == [(64, 64), (64, 1024)]


def test_estimate_workers_range(capsys):
    recs = ok_json(capsys, "estimate", "alexnet", "--workers", "1-32", "--scheme", "butterfly")
    assert [r["workers"] for r in recs] == [1, 2, 4, 8, 16, 32]


def test_estimate_other_device_network_rules(capsys):
    recs = ok_json(
        capsys,
        "estimate",
        "nin",
        "--device",
        "K80",
        "--network",
        "infiniband",
        "--rules",
        "paleo-2016",
        "--ppp-comp",
        "0.21",
        "--ppp-comm",
        "0.56",
        "--workers",
        "32",
        "--scheme",
        "tree",
    )
    (r,) = recs
    assert (r["device"], r["network"]) == ("K80", "infiniband")
    assert r["comm_ms"] == pytest.approx(62.0014, abs=5e-5)  # paleo-model.md §B.2 worked check


def test_estimate_csv(capsys):
    code, out, err = run(
        capsys, "estimate", "alexnet", "--workers", "1,2", "--scheme", "all", "--format", "csv"
    )
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 * len(comm.SCHEME_NAMES)
    assert ESTIMATE_KEYS <= set(rows[0])
    assert {(int(r["workers"]), r["scheme"]) for r in rows} == set(product([1, 2], comm.SCHEME_NAMES))
    assert all(float(r["total_ms"]) > 0 for r in rows)


def test_estimate_csv_equals_json(capsys):
    recs = ok_json(capsys, "estimate", "alexnet", "--workers", "1,4")
    code, out, _ = run(capsys, "estimate", "alexnet", "--workers", "1,4", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    for r, row in zip(recs, rows, strict=True):
        assert float(row["total_ms"]) == pytest.approx(r["total_ms"], rel=1e-12)
        assert row["scheme"] == r["scheme"]


def test_estimate_table(capsys):
    code, out, err = run(capsys, "estimate", "alexnet", "--workers", "1,2,4", "--scheme", "tree")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("alexnet on H100_SXM over eth100")
    assert "weak" in lines[0] and "bf16" in lines[0] and "rules modern" in lines[0]
    assert lines[-4].startswith("80% interval")
    assert lines[-3].startswith("Stack optimized-cnn: ")  # every answer names its stack
    assert lines[-2].startswith("Fabric: nonblocking")  # the network between its nodes
    assert lines[-1].startswith("Host: assumed, a DGX H100")  # and the host its data loader runs on
    header = lines[1]
    for col in ("workers", "scheme", "total ms", "comm ms", "speedup", "samples/s"):
        assert col in header
    assert set(lines[2]) <= {"-", " "}
    body = lines[3:-4]
    assert len(body) == 3
    assert [line.split()[0] for line in body] == ["1", "2", "4"]
    assert all(line.split()[1] == "tree" for line in body)


# ---- summary -----------------------------------------------------------------------------------


def test_summary_table_totals(capsys):
    code, out, err = run(capsys, "summary", "alexnet", "--rules", "paleo-2018")
    assert code == 0, err
    assert out.splitlines()[0].startswith("AlexNet v2 at batch 128")
    total = [line for line in out.splitlines() if line.startswith("total")]
    assert len(total) == 1
    assert f"{ALEXNET_PARAMS:,}" in total[0]
    assert f"{ALEXNET_FWD_FLOPS_B128:,}" in total[0]
    for layer in ("conv1", "pool1", "fc6", "fc8", "softmax"):
        assert any(line.startswith(layer) for line in out.splitlines())


def test_summary_json(capsys):
    data = ok_json(capsys, "summary", "alexnet", "--rules", "paleo-2018")
    totals, rows = data["totals"], data["layers"]
    assert totals["params"] == ALEXNET_PARAMS
    assert totals["forward_flops"] == ALEXNET_FWD_FLOPS_B128
    assert totals["batch"] == 128
    assert totals["params_bytes"] == 4 * ALEXNET_PARAMS
    assert totals["activation_bytes"] == 363_569_152  # paleo-model.md §E.2
    assert sum(r["params"] for r in rows) == ALEXNET_PARAMS
    assert sum(r["forward_flops"] for r in rows) == ALEXNET_FWD_FLOPS_B128
    fc6 = next(r for r in rows if r["layer"] == "fc6")
    assert fc6["forward_flops"] == 6_710_886_400
    assert fc6["backward_flops"] == 167_772_160_000 + 6_710_886_400  # the 25x of §D.5


def test_summary_batch_one(capsys):
    data = ok_json(capsys, "summary", "alexnet", "--batch", "1", "--rules", "paleo-2018")
    assert data["totals"]["forward_flops"] == ALEXNET_FWD_FLOPS_B1
    assert data["totals"]["batch"] == 1


def test_summary_csv(capsys):
    code, out, _ = run(capsys, "summary", "alexnet", "--format", "csv", "--rules", "paleo-2018")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["layer"] == "data"
    assert int(rows[-1]["params"]) == ALEXNET_PARAMS  # the totals record comes last


# ---- list --------------------------------------------------------------------------------------


def test_list_nets(capsys):
    code, out, err = run(capsys, "list", "nets")
    assert code == 0, err
    for name in catalog.zoo():
        assert name in out
    recs = ok_json(capsys, "list", "nets")
    assert {r["net"] for r in recs} == set(catalog.zoo())
    assert next(r for r in recs if r["net"] == "alexnet")["default_batch"] == 128


def test_list_devices(capsys):
    code, out, err = run(capsys, "list", "devices")
    assert code == 0, err
    header = out.splitlines()[0]
    for unit_col in ("fp32 TFLOP/s", "mem GB", "mem GB/s", "$/GPU-h"):
        assert unit_col in header
    for key in catalog.devices():
        assert key in out
    recs = ok_json(capsys, "list", "devices")
    assert {r["device"] for r in recs} == set(catalog.devices())
    assert {"fp32_tflops", "memory_gb", "mem_bandwidth_gbs", "usd_per_gpu_hour"} <= set(recs[0])
    titan = next(r for r in recs if r["device"] == "TITAN_X")
    assert titan["fp32_tflops"] == pytest.approx(6.144)
    assert titan["mem_bandwidth_gbs"] == pytest.approx(336.5)


def test_list_networks(capsys):
    code, out, err = run(capsys, "list", "networks")
    assert code == 0, err
    header = out.splitlines()[0]
    assert "Gbit/s" in header and "latency us" in header
    for key in catalog.networks():
        assert key in out
    recs = ok_json(capsys, "list", "networks")
    assert {r["network"] for r in recs} == set(catalog.networks())
    ib = next(r for r in recs if r["network"] == "infiniband")
    assert ib["bandwidth_gbit_s"] == pytest.approx(70.0)
    assert "latency_us" in ib


# ---- usage -------------------------------------------------------------------------------------


def test_no_arguments_shows_usage_once(capsys):
    code, out, err = run(capsys)
    assert code == 0
    assert "Traceback" not in out + err
    text = out + err
    assert "Usage" in text or "usage" in text
    for command in ("estimate", "summary", "list"):
        assert command in text
    assert text.count("Usage:") == 1, text


def test_help(capsys):
    code, out, _ = run(capsys, "estimate", "--help")
    assert code == 0
    for option in ("--device", "--network", "--workers", "--scheme", "--format"):
        assert option in out


# ---- bad input ---------------------------------------------------------------------------------


def assert_one_line_error(code, out, err, *fragments):
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert err.endswith("\n")
    assert lines[0].startswith("error:"), err
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    assert out == ""
    return lines[0]


BAD_INPUTS = {
    "unknown-net": (["estimate", "nosuch"], ["unknown net", "'nosuch'", "alexnet", "vgg16", "inception_v3"]),
    "unknown-net-summary": (["summary", "nosuch"], ["unknown net", "alexnet"]),
    "unknown-device": (
        ["estimate", "alexnet", "--device", "nosuch"],
        ["unknown device", "'nosuch'", "TITAN_X", "K80", "H100_SXM"],
    ),
    "close-device": (
        ["estimate", "alexnet", "--device", "TITANX"],
        ["unknown device", "did you mean TITAN_X"],
    ),
    "unknown-network": (
        ["estimate", "alexnet", "--network", "nosuch"],
        ["unknown network", "'nosuch'", "ethernet", "infiniband"],
    ),
    "bogus-scheme": (
        ["estimate", "alexnet", "--scheme", "bogus"],
        ["--scheme", "bogus", "onetoall", "tree", "butterfly", "ring"],
    ),
    "bogus-rules": (
        ["estimate", "alexnet", "--rules", "bogus"],
        ["--rules", "bogus", "paleo-2018", "paleo-2016"],
    ),
    "bogus-rules-summary": (["summary", "alexnet", "--rules", "bogus"], ["--rules", "paleo-2016"]),
    "bogus-format": (["estimate", "alexnet", "--format", "xml"], ["--format", "table", "csv", "json"]),
    "bogus-scaling": (["estimate", "alexnet", "--scaling", "medium"], ["--scaling", "strong", "weak"]),
    "list-bogus": (["list", "bogus"], ["bogus", "nets", "devices", "networks"]),
    "batch-0": (["estimate", "alexnet", "--batch", "0"], ["--batch", "0"]),
    "batch-negative": (["estimate", "alexnet", "--batch", "-3"], ["--batch", "-3"]),
    "batch-text": (["estimate", "alexnet", "--batch", "many"], ["--batch", "many"]),
    "summary-batch-0": (["summary", "alexnet", "--batch", "0"], ["--batch", "0"]),
    "summary-batch-negative": (["summary", "alexnet", "--batch", "-3"], ["--batch", "-3"]),
    "workers-0": (["estimate", "alexnet", "--workers", "0"], ["--workers", "0"]),
    "workers-1-x": (["estimate", "alexnet", "--workers", "1,x"], ["--workers", "1,x"]),
    "workers-empty": (["estimate", "alexnet", "--workers", ""], ["--workers"]),
    "ppp-comp-0": (["estimate", "alexnet", "--ppp-comp", "0"], ["--ppp-comp", "(0, 1]"]),
    "ppp-comm-2": (["estimate", "alexnet", "--ppp-comm", "2"], ["--ppp-comm", "(0, 1]"]),
    "missing-net": (["estimate"], ["NET"]),
    "unknown-command": (["frobnicate"], ["frobnicate"]),
    "missing-spec-file": (["estimate", "nope/missing.json"], ["missing.json", "not found"]),
}


@pytest.mark.parametrize("argv,fragments", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_one_line_error(capsys, argv, fragments):
    assert_one_line_error(*run(capsys, *argv), *fragments)


# Spec files with errors: (file text, fragments of the message).
DATA = {"type": "Input", "parents": [], "tensor": [4, 8, 8, 3]}


def _spec(layers: dict) -> str:
    return json.dumps({"name": "bad", "layers": {"data": DATA, **layers}}, indent=2)


BAD_SPECS = {
    "malformed": (
        '{"name": "x", "layers": {\n  "data": {"type": "Input",,}\n}}\n',
        ["malformed JSON", "line 2", "column"],
    ),
    "missing-parent": (
        _spec(
            {
                "conv1": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 3, 4]},
                "pool": {"type": "Pooling", "parents": ["conv"], "ksize": [1, 2, 2, 1]},
            }
        ),
        ["layer 'pool'", "unknown parent 'conv'", "did you mean conv1"],
    ),
    "cycle": (
        _spec(
            {
                "a": {"type": "ReLU", "parents": ["data", "b"]},
                "b": {"type": "ReLU", "parents": ["a"]},
            }
        ),
        ["cycle", "a, b"],
    ),
    "concat-mismatch": (
        _spec(
            {
                "a": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 3, 4]},
                "b": {"type": "Pooling", "parents": ["data"], "ksize": [1, 2, 2, 1]},
                "cat": {"type": "Concatenate", "parents": ["a", "b"], "dim": 3},
            }
        ),
        ["layer 'cat'", "concatenate"],
    ),
    "unknown-type": (
        _spec({"x": {"type": "Frobnicate", "parents": ["data"]}}),
        ["layer 'x'", "Frobnicate", "Convolution", "Softmax"],
    ),
    "no-data": (json.dumps({"name": "x", "layers": {"input": DATA}}), ["Input layer named 'data'"]),
}


@pytest.mark.parametrize("command", ["estimate", "summary"])
@pytest.mark.parametrize("text,fragments", BAD_SPECS.values(), ids=BAD_SPECS.keys())
def test_bad_spec_file_is_one_line_error(capsys, tmp_path, command, text, fragments):
    path = tmp_path / "my_net.json"
    path.write_text(text)
    line = assert_one_line_error(*run(capsys, command, str(path)), *fragments)
    assert "my_net.json" in line  # the message names the file


def test_inner_product_under_paleo_2016(capsys, tmp_path):
    path = tmp_path / "ip.json"
    path.write_text(_spec({"fc": {"type": "InnerProduct", "parents": ["data"], "num_outputs": 10}}))
    assert_one_line_error(
        *run(capsys, "estimate", str(path), "--rules", "paleo-2016"),
        "ip.json",
        "layer 'fc'",
        "InnerProduct",
        "paleo-2016",
    )
    recs = ok_json(capsys, "estimate", str(path), "--workers", "1,2", "--scheme", "tree")
    assert len(recs) == 2


def test_spec_file_estimate_and_summary(capsys, tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(
        _spec(
            {
                "conv": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 3, 8]},
                "out": {"type": "Softmax", "parents": ["conv"]},
            }
        )
    )
    recs = ok_json(capsys, "estimate", str(path), "--workers", "1,2")
    assert {r["batch_per_worker"] for r in recs} == {4}  # the spec's default batch
    data = ok_json(capsys, "summary", str(path))
    assert data["totals"]["params"] == 3 * 3 * 3 * 8 + 8
    assert data["totals"]["forward_flops"] == 2 * 3 * 3 * 3 * 8 * 8 * 8 * 4


# ---- the real console script -------------------------------------------------------------------


def _console_script() -> str:
    here = Path(sys.executable).parent / ("planner.exe" if os.name == "nt" else "planner")
    found = str(here) if here.exists() else shutil.which("planner")
    assert found, "the `planner` console script is not installed (pip install -e .)"
    return found


def test_console_script_json():
    proc = subprocess.run(
        [_console_script(), "estimate", "alexnet", "--workers", "1,2", "--scheme", "all", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    recs = json.loads(proc.stdout)
    assert len(recs) == 2 * len(comm.SCHEME_NAMES)
    assert ESTIMATE_KEYS <= set(recs[0])
    assert {r["workers"] for r in recs} == {1, 2}


def test_console_script_error_exit_code():
    proc = subprocess.run(
        [_console_script(), "estimate", "alexnet", "--device", "nosuch"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: unknown device 'nosuch'")
    assert proc.stderr.count("\n") == 1


def test_installed_package_finds_its_data(tmp_path):
    """Run from outside the checkout: the package (installed non-editable in CI) carries
    configs/ as package data and finds it wherever it is installed."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PLANNER_CONFIGS")}
    code = (
        "import planner, planner.catalog as c; print(planner.__file__); "
        "print(c.configs_dir()); print(len(c.zoo()), len(c.devices()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    pkg, cfg, counts = proc.stdout.splitlines()
    repo_configs = Path(__file__).resolve().parents[1] / "configs"
    assert Path(cfg, "devices.toml").is_file()
    assert counts == f"{len(list((repo_configs / 'nets').glob('*.json')))} {len(catalog.devices())}"
    if "site-packages" in pkg:  # a real install: the data must come from the install, not the clone
        assert "site-packages" in cfg
    run = subprocess.run(
        [_console_script(), "estimate", "vgg16", "--workers", "1", "--format", "csv"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("net,device,network")
