"""The authors' published web-demo values: reference/paleo_demo_precompute.json in the shared folder.

paleo-model.md, "The demo reference file" and §D.4: keys are
``net,device,network,software,batch,scaling,use_cudnn``; each value holds the worker counts
(``labels``), T(K) in ms per scheme in the order [OneToAll, Tree, Butterfly] (``times``) and the
speedups (``series``: T(1)/T(K) strong, K T(1)/T(K) weak), all rounded to 3 decimals. Only the
864 ``use_cudnn=false`` entries (20,736 times) are reproducible without cuDNN; the paleo-2016
rules reproduce every one to the printed 3 decimals. paleo-2018 misses by up to 206 ms (0.36 %
of that entry), its forward+backward being 0.14-0.65 % higher (§0); it is checked here to 1 %. Each entry's 8 worker counts x 3 schemes are scored in one evaluate call.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from costs.comm import schemes as comm
from costs.model import evaluate, plans
from planner import catalog

# paleo-model.md, "The demo reference file": the grid and the PPP pair of each "software"
# (also §A.10: caffe 0.21/0.56, mxnet 0.49/0.72, tensorflow 0.62/0.72).
PPP = {"caffe": (0.21, 0.56), "mxnet": (0.49, 0.72), "tensorflow": (0.62, 0.72)}
NETS = ("alex_v2", "inception_v3", "nin")  # demo names; planner maps alex_v2 to alexnet
DEVICES = ("K20", "K40", "K80", "TITAN_X")
NETWORKS = ("ethernet", "ethernet20", "infiniband")
BATCHES = (128, 256, 512, 1024)
DEMO_SCHEMES = ("onetoall", "tree", "butterfly")  # the order of "times" and "series"
WORKERS = (1, 2, 4, 8, 16, 32, 64, 128)
# "Only the 864 entries with use_cudnn=false ... They hold 20,736 time values."
N_ENTRIES, N_TIMES = 864, 20_736

TIME_TOL = 0.0005 + 1e-6  # printed 3 decimals, plus float noise
SPEEDUP_TOL = 0.0005 + 1e-6
PALEO_2018_REL = 0.01

_DEVICE_TABLE = catalog.device_table(list(DEVICES))
_LINK_TABLE = catalog.link_table(list(NETWORKS))


def _load(shared_dir: Path) -> dict:
    with (shared_dir / "reference" / "paleo_demo_precompute.json").open() as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def gemm_entries(shared_dir) -> dict[tuple, dict]:
    """The use_cudnn=false entries, keyed (net, device, network, software, batch, scaling)."""
    out = {}
    for key, value in _load(shared_dir).items():
        net, device, network, software, batch, scaling, cudnn = key.split(",")
        if cudnn == "false":
            out[(net, device, network, software, int(batch), scaling)] = value
    return out


def test_grid_and_counts(shared_dir, gemm_entries):
    data = _load(shared_dir)
    assert len(data) == 2 * N_ENTRIES  # 1,728 keys: half with cuDNN on
    assert len(gemm_entries) == N_ENTRIES
    assert sum(len(series) for v in gemm_entries.values() for series in v["times"]) == N_TIMES
    grid = {
        (n, d, w, s, b, sc)
        for n in NETS
        for d in DEVICES
        for w in NETWORKS
        for s in PPP
        for b in BATCHES
        for sc in ("strong", "weak")
    }
    assert set(gemm_entries) == grid
    for value in gemm_entries.values():
        assert value["labels"] == [str(k) for k in WORKERS]
        assert len(value["times"]) == len(value["series"]) == len(DEMO_SCHEMES)


def _score(net: str, rules: str, device: int, network: int, software: str, batch: int, scaling: str):
    """(times ms, speedups), each (3 schemes, 8 worker counts), from ONE evaluate call."""
    costs = catalog.net_costs(net, rules, "gemm")
    k = np.array(WORKERS)
    # Strong scaling: ceil(B/K) per worker; weak: B per worker (§B.1).
    per_worker = -(-batch // k) if scaling == "strong" else np.full_like(k, batch)
    scheme = np.array([comm.SCHEME_NAMES.index(s) for s in DEMO_SCHEMES])
    kk, ss = np.meshgrid(k, scheme)  # (3, 8): scheme rows, worker columns
    nn, _ = np.meshgrid(per_worker, scheme)
    ppp_comp, ppp_comm = PPP[software]
    p = plans(
        costs.n_layers,
        device=device,
        batch=nn.ravel(),
        workers=kk.ravel(),
        scheme=ss.ravel(),
        network=network,
        intra_link=network,
        gpus_per_node=1,
        ppp_comp=ppp_comp,
        ppp_comm=ppp_comm,
    )
    r = evaluate(costs, p, _DEVICE_TABLE, _LINK_TABLE)
    times = (r.total * 1e3).reshape(kk.shape)
    t1 = times[:, :1]  # K=1 has the whole batch in both scalings
    speedup = t1 / times if scaling == "strong" else kk * t1 / times
    return times, speedup


@pytest.mark.parametrize("net", NETS)
def test_paleo_2016_reproduces_every_value(net, gemm_entries):
    """Every time to ±0.0005 ms and every speedup to ±0.0005 under paleo-2016."""
    bad = []
    n_times = 0
    worst = defaultdict(float)
    for (n, device, network, software, batch, scaling), value in gemm_entries.items():
        if n != net:
            continue
        times, speedup = _score(
            net, "paleo-2016", DEVICES.index(device), NETWORKS.index(network), software, batch, scaling
        )
        ref_t, ref_s = np.array(value["times"]), np.array(value["series"])
        dt, ds = np.abs(times - ref_t), np.abs(speedup - ref_s)
        n_times += ref_t.size
        worst["time"], worst["speedup"] = max(worst["time"], dt.max()), max(worst["speedup"], ds.max())
        key = ",".join(map(str, (n, device, network, software, batch, scaling)))
        for i, j in zip(*np.nonzero(dt > TIME_TOL)):
            bad.append(f"{key} {DEMO_SCHEMES[i]} K={WORKERS[j]}: {times[i, j]:.4f} ms vs {ref_t[i, j]}")
        for i, j in zip(*np.nonzero(ds > SPEEDUP_TOL)):
            bad.append(
                f"{key} {DEMO_SCHEMES[i]} K={WORKERS[j]}: speedup {speedup[i, j]:.4f} vs {ref_s[i, j]}"
            )
    assert n_times == N_TIMES // len(NETS)
    assert not bad, f"{len(bad)} mismatches (worst {dict(worst)}):\n" + "\n".join(bad[:40])


@pytest.mark.parametrize("net", NETS)
def test_paleo_2018_within_one_percent(net, gemm_entries):
    """paleo-2018 is 0.14-0.65 % above the demo (§0, "Which rule set to validate against");
    every time is checked to 1 % relative."""
    worst = 0.0
    where = ""
    for (n, device, network, software, batch, scaling), value in gemm_entries.items():
        if n != net:
            continue
        times, _ = _score(
            net, "paleo-2018", DEVICES.index(device), NETWORKS.index(network), software, batch, scaling
        )
        rel = np.abs(times / np.array(value["times"]) - 1.0)
        if rel.max() > worst:
            worst = float(rel.max())
            where = ",".join(map(str, (n, device, network, software, batch, scaling)))
    assert math.isfinite(worst)
    assert worst <= PALEO_2018_REL, f"worst relative error {worst:.4%} at {where}"
