"""Explicit model parallelism: ModelParallel blocks scored on their own GPU placement.

The model is documented in costs/modelparallel.py (paleo-model.md §A.7, §A.8, §B.3, §E.1,
with the defects F.8, F.12-F.15 fixed). Reference values here are hand-derived from
:func:`costs.model.layer_times` and the fetch formula bytes / (bandwidth * PPP_comm) + latency.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from costs.hardware import ELEMENT_BYTES, PRECISIONS, Device, DeviceTable, Link, LinkTable
from costs.model import evaluate, layer_times, plans, update_time
from costs.modelparallel import evaluate_explicit, layer_devices, n_devices
from costs.rules import get_rules
from costs.specs import coefficients
from costs.specs.graph import build_net
from planner import catalog
from planner.cli import main

DATA = Path(__file__).parent / "data"
MP2 = str(DATA / "alexnet_mp2.json")
MP4 = str(DATA / "alexnet_mp4.json")
RULES = "paleo-2018"


def _tables(*link_keys: str):
    devices = catalog.device_table(["TITAN_X"])
    links = catalog.link_table(list(link_keys))
    return devices, links


def _names(costs, prefix: str) -> list[int]:
    return [i for i, s in enumerate(costs.net.layers) if s.name.startswith(prefix)]


# ---- the AlexNet specs ---------------------------------------------------------------------


@pytest.mark.parametrize("path, splits", [(MP2, 2), (MP4, 4)])
def test_specs_expand_to_the_split_count(path, splits):
    costs = catalog.net_costs(path, RULES)
    assert n_devices(costs) == splits
    devs = layer_devices(costs)
    assert sorted(set(devs.tolist())) == list(range(splits))
    # Same parameters as the unsplit cuda-convnet2 AlexNet (paleo-model.md §E.2: 49,566,504).
    assert costs.total_params == catalog.net_costs("alexnet_cc2", RULES).total_params == 49_566_504
    fc6 = [costs.net.layers[i] for i in _names(costs, "parallel_fc67/fc6@")]
    assert len(fc6) == splits and all(s.out_shape == (1, 1, 4096 // splits) for s in fc6)
    assert costs.net["fc8"].layer.parents == ("concat7",)
    assert costs.net["concat7"].layer.parents == tuple(f"parallel_fc67/dropout7@{i}" for i in range(splits))


def test_spec_files_are_valid_json_with_a_model_parallel_block():
    spec = json.loads(Path(MP2).read_text())
    block = spec["layers"]["parallel_fc67"]
    assert block["type"] == "ModelParallel" and block["splits"] == 2
    assert list(block["layers"]) == ["fc6", "dropout6", "concat6", "fc7", "dropout7"]


# ---- properties ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mp2():
    return catalog.net_costs(MP2, RULES)


def _plan(costs, **kw):
    base = dict(device=0, batch=128, workers=2, network=0, intra_link=1, gpus_per_node=1)
    return plans(costs.n_layers, **{**base, **kw})


def test_forward_between_single_gpu_and_single_gpu_minus_fc67(mp2):
    devices, links = _tables("ethernet", "pcie3")
    p = _plan(mp2)
    r = evaluate_explicit(mp2, p, devices, links)
    single = evaluate(mp2, _plan(mp2, workers=1), devices, links)
    t = layer_times(
        mp2, devices, np.array([0]), np.array([0]), np.array([1.0]), np.array([False]), np.array([128])
    )
    fc67 = sum(
        float(t[i, 0, 0]) for i in _names(mp2, "parallel_fc67/fc6@") + _names(mp2, "parallel_fc67/fc7@")
    )
    assert single.forward[0] - fc67 < r.forward[0] < single.forward[0]
    assert r.backward[0] < single.backward[0]
    assert r.sync[0] == 0 and r.sync_params[0] == 0 and r.samples[0] == 128
    assert r.act_comm[0] > 0
    assert r.local_params[0] < mp2.total_params
    assert r.update[0] < single.update[0]


def test_slower_link_means_more_activation_comm(mp2):
    devices, links = _tables("infiniband", "ethernet", "aws", "pcie3")
    p = _plan(mp2, network=[0, 1, 2], intra_link=3)
    r = evaluate_explicit(mp2, p, devices, links)
    assert r.act_comm[0] < r.act_comm[1] < r.act_comm[2]
    np.testing.assert_array_equal(r.forward, r.forward[0])  # compute does not depend on the link
    np.testing.assert_array_equal(r.backward, r.backward[0])
    # All splits in one node: the intra-node link, whatever the network.
    q = _plan(mp2, network=[0, 1, 2], intra_link=3, gpus_per_node=2)
    rq = evaluate_explicit(mp2, q, devices, links)
    np.testing.assert_allclose(rq.act_comm, rq.act_comm[0])
    assert rq.act_comm[0] < r.act_comm[0]


def test_independent_of_scheme_and_workers(mp2):
    devices, links = _tables("ethernet", "pcie3")
    p = _plan(mp2, scheme=[0, 1, 2, 3], workers=[1, 2, 8, 64])
    r = evaluate_explicit(mp2, p, devices, links)
    for f in (
        "forward",
        "backward",
        "update",
        "sync",
        "act_comm",
        "local_params",
        "activation_bytes",
        "samples",
    ):
        v = getattr(r, f)
        np.testing.assert_array_equal(v, v[0], err_msg=f)


def test_vectorised_matches_one_plan_at_a_time(mp2):
    devices, links = _tables("ethernet", "pcie3")
    p = _plan(
        mp2,
        batch=[32, 128, 32, 256],
        precision=[0, 0, 1, 0],
        ppp_comp=[1.0, 0.5, 1.0, 0.7],
        ppp_comm=[1.0, 0.9, 0.5, 1.0],
        pipeline=[False, True, False, True],
        gpus_per_node=[1, 2, 1, 2],
    )
    r = evaluate_explicit(mp2, p, devices, links)
    for i in range(len(p)):
        ri = evaluate_explicit(mp2, p.take([i]), devices, links)
        np.testing.assert_allclose(ri.total, r.total[i : i + 1], rtol=1e-12)
        np.testing.assert_allclose(ri.act_comm, r.act_comm[i : i + 1], rtol=1e-12)


def test_more_splits_cut_forward_compute():
    devices, links = _tables("ethernet", "pcie3")
    two, four = (catalog.net_costs(f, RULES) for f in (MP2, MP4))
    r2 = evaluate_explicit(two, _plan(two, gpus_per_node=4), devices, links)
    r4 = evaluate_explicit(four, _plan(four, gpus_per_node=4), devices, links)
    assert r4.forward[0] < r2.forward[0]
    assert r4.local_params[0] < r2.local_params[0]


# ---- a hand-computed case ------------------------------------------------------------------

TINY = {
    "name": "tiny model-parallel",
    "layers": {
        "data": {"type": "Input", "parents": [], "tensor": [4, 8, 8, 3]},
        "conv": {
            "type": "Convolution",
            "parents": ["data"],
            "filter": [3, 3, 3, 8],
            "strides": [1, 1, 1, 1],
            "padding": "SAME",
        },
        "mp": {
            "type": "ModelParallel",
            "parents": ["conv"],
            "splits": 2,
            "endpoint": "c",
            "layers": {
                "c": {
                    "type": "Convolution",
                    "parents": [],
                    "filter": [3, 3, 8, 16],
                    "strides": [1, 1, 1, 1],
                    "padding": "SAME",
                }
            },
        },
        "concat": {"type": "Concatenate", "parents": ["mp"], "dim": 3},
    },
}

DEVICE = Device("toy", {"fp32": 1e12, "fp16": 4e12}, 100e9, 1e9, 16e9)
LINKS = LinkTable.of([Link("net", 1e9, 5e-6), Link("intra", 20e9, 1e-6)])


@pytest.fixture(scope="module")
def tiny():
    net = build_net(TINY, "tiny", get_rules(RULES))
    return coefficients.build(net, get_rules(RULES))


@pytest.mark.parametrize("precision, gpn, ppp_comm", [("fp32", 1, 1.0), ("fp16", 2, 0.5)])
def test_tiny_critical_path_by_hand(tiny, precision, gpn, ppp_comm):
    names = [s.name for s in tiny.net.layers]
    assert names == ["data", "conv", "mp/c@0", "mp/c@1", "concat"]
    assert layer_devices(tiny).tolist() == [0, 0, 0, 1, 0]  # unsplit layers: GPU 0 (F.12)
    devices = DeviceTable.of([DEVICE])
    n, prec = 4, PRECISIONS.index(precision)
    p = plans(
        tiny.n_layers,
        device=0,
        batch=n,
        workers=2,
        network=0,
        intra_link=1,
        gpus_per_node=gpn,
        precision=prec,
        ppp_comm=ppp_comm,
    )
    r = evaluate_explicit(tiny, p, devices, LINKS)

    t = layer_times(
        tiny, devices, np.array([0]), np.array([prec]), np.array([1.0]), np.array([False]), np.array([n])
    )[..., 0]
    f = t[:, 0]
    b = t[:, 1] + t[:, 2]
    data, conv, c0, c1, concat = range(5)
    assert f[data] == 0 and f[concat] == 0 and f[c0] > 0

    link = 1 if gpn == 2 else 0  # GPUs 0 and 1 share a node only with 2 GPUs per node
    bw, lat = LINKS.bandwidth[link], LINKS.latency[link]
    e = ELEMENT_BYTES[precision]
    fetch_a = n * 8 * 8 * 8 * e / (bw * ppp_comm) + lat  # conv (8x8x8) -> mp/c@1
    fetch_b = n * 8 * 8 * 8 * e / (bw * ppp_comm) + lat  # mp/c@1 (8x8x8) -> concat

    fwd = f[data] + f[conv] + max(f[c0], f[c1]) + f[concat]
    fwd_c = f[data] + f[conv] + max(f[c0], fetch_a + f[c1] + fetch_b) + f[concat]
    bwd = b[concat] + max(b[c0], b[c1]) + b[conv] + b[data]
    bwd_c = b[concat] + max(b[c0], fetch_b + b[c1] + fetch_a) + b[conv] + b[data]
    assert r.forward[0] == pytest.approx(fwd, rel=1e-12)
    assert r.backward[0] == pytest.approx(bwd, rel=1e-12)
    assert r.act_comm[0] == pytest.approx((fwd_c - fwd) + (bwd_c - bwd), rel=1e-12)
    assert r.act_comm[0] == pytest.approx(2 * (fetch_a + fetch_b), rel=1e-12)  # equal splits

    # GPU 0 holds conv and mp/c@0; GPU 1 only mp/c@1.
    p0 = int(tiny.params[conv] + tiny.params[c0])
    assert r.local_params[0] == p0 == (3 * 3 * 3 * 8 + 8) + (3 * 3 * 8 * 8 + 8)
    peak = DEVICE.peak_flops[precision]
    upd = update_time(float(p0), peak, DEVICE.mem_bandwidth * 2**30 / 1e9, 1 / DEVICE.clock_hz, 1.0)
    assert r.update[0] == pytest.approx(upd, rel=1e-12)
    acts = n * e * (8 * 8 * 3 + 8 * 8 * 8 + 8 * 8 * 8 + 8 * 8 * 16)  # data, conv, c@0, concat
    assert r.activation_bytes[0] == pytest.approx(acts)
    assert r.sync[0] == 0 and r.samples[0] == n


def test_serialized_devices_sum_same_gpu_branches():
    spec = {
        "name": "two branches on GPU 0",
        "layers": {
            "data": {"type": "Input", "parents": [], "tensor": [2, 8, 8, 3]},
            "a": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 3, 8], "padding": "SAME"},
            "b": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 3, 8], "padding": "SAME"},
            "cat": {"type": "Concatenate", "parents": ["a", "b"], "dim": 3},
        },
    }
    costs = coefficients.build(build_net(spec, "branches", get_rules(RULES)), get_rules(RULES))
    devices = DeviceTable.of([DEVICE])
    p = plans(costs.n_layers, device=0, batch=2, workers=1, network=0, intra_link=1)
    lower = evaluate_explicit(costs, p, devices, LINKS)
    serial = evaluate_explicit(costs, p, devices, LINKS, serialize_devices=True)
    single = evaluate(costs, p, devices, LINKS)
    assert lower.forward[0] < serial.forward[0]
    assert serial.forward[0] == pytest.approx(single.forward[0], rel=1e-12)
    assert serial.backward[0] == pytest.approx(single.backward[0], rel=1e-12)
    assert lower.act_comm[0] == serial.act_comm[0] == 0


# ---- the CLI -------------------------------------------------------------------------------

# Explicit ModelParallel blocks are a PALEO feature: these runs name a PALEO rule set and fp32.
PALEO = ["--rules", "paleo-2018", "--precision", "fp32"]


def test_cli_model_parallel_needs_a_paleo_rule_set(capsys):
    assert main(["estimate", MP2, "--parallel", "model"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--rules paleo-2018" in err


def test_cli_model_parallel_json(capsys):
    assert main(["estimate", *PALEO, MP2, "--parallel", "model", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 1
    rec = records[0]
    assert rec["workers"] == 2 and rec["scheme"] == "none" and rec["parallel"] == "model"
    assert rec["batch_per_worker"] == rec["effective_batch"] == 128
    assert rec["total_ms"] == pytest.approx(rec["compute_ms"] + rec["comm_ms"])
    assert rec["throughput_samples_s"] == pytest.approx(128 / (rec["total_ms"] / 1e3))
    assert rec["speedup"] > 1


def test_record_keys_match_data_parallel_estimate(capsys):
    assert main(["estimate", *PALEO, MP2, "--parallel", "model", "--workers", "2", "--format", "json"]) == 0
    mp = json.loads(capsys.readouterr().out)
    assert main(["estimate", *PALEO, "alexnet_cc2", "--workers", "2", "--format", "json"]) == 0
    dp = json.loads(capsys.readouterr().out)
    assert list(mp[0]) == list(dp[0])


def test_cli_speedup_is_single_gpu_over_split_time(capsys):
    assert main(["estimate", *PALEO, MP2, "--parallel", "model", "--batch", "64", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert (
        main(
            [
                "estimate",
                *PALEO,
                MP2,
                "--parallel",
                "data",
                "--workers",
                "1",
                "--scheme",
                "ring",
                "--batch",
                "64",
                "--format",
                "json",
            ]
        )
        == 0
    )
    one = json.loads(capsys.readouterr().out)[0]
    assert rec["speedup"] == pytest.approx(one["total_ms"] / rec["total_ms"], rel=1e-9)


def test_cli_workers_conflicting_with_splits(capsys):
    assert main(["estimate", *PALEO, MP2, "--parallel", "model", "--workers", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:") and "2" in err
    assert (
        main(["estimate", *PALEO, MP2, "--parallel", "model", "--workers", "1,2,4", "--format", "json"]) == 0
    )
