"""NVLink domains wider than a server (GB200 NVL72: 72 GPUs, configs/devices.toml) searched as GPUs
per node: tried only for devices whose catalog node holds that many, priced and hosted like any
node size, scored by the evaluator with the domain's NVLink inside it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from planner import catalog
from planner.cli import main
from planner.energy import servers
from planner.hosts import DOMAIN_SIZES, NODE_SIZES, node_sizes
from planner.pipeline import build
from planner.request.optimize import OptimizeRequest, validate

# llama3-70b on 144 GB200 (two NVL72 racks, owned), 576 sequences per step: 144 GPUs at TP 8 leave
# 18 data-parallel replicas, which divide 576.
GB200_144 = dict(budget=("144gpus",), gpu="GB200", owned=("GB200:144",), network="ib_xdr", global_batch=576)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _values(space, cols: dict, axis: str) -> np.ndarray:
    return np.asarray(space.choices(axis))[cols[axis]]


def test_node_sizes_add_a_domain_only_where_a_device_reaches_it():
    assert DOMAIN_SIZES == (72,) and NODE_SIZES == (1, 2, 4, 8)
    assert node_sizes([8, 4]) == NODE_SIZES
    assert node_sizes([16]) == NODE_SIZES  # DGX-2's 16 V100 are no rack-scale domain searched
    assert node_sizes([8, 72]) == (1, 2, 4, 8, 72)
    assert node_sizes([]) == NODE_SIZES
    for key, info in catalog.devices().items():  # every catalog device: 72 iff its node holds 72
        assert (72 in node_sizes([info.device.max_per_node])) == (info.device.max_per_node >= 72), key
    assert [k for k, i in catalog.devices().items() if i.device.max_per_node >= 72] == ["GB200"]


def test_h100_searches_never_try_72_gpu_nodes():
    h100 = validate(OptimizeRequest("llama3-8b", budget=("144gpus",), gpu="H100_SXM"))
    assert h100.hosts.sizes == NODE_SIZES
    scorer, _ = build(OptimizeRequest("llama3-8b", budget=("144gpus",), gpu="H100_SXM"))
    assert scorer.space.choices("per_node") == NODE_SIZES
    # beside a GB200 the axis has 72, but no H100 plan takes it: not offered, and not valid
    both = dict(gpu="H100_SXM,GB200", prices=("GB200=6.0",), global_batch=576)
    req = OptimizeRequest("llama3-8b", budget=("144gpus",), **both)
    scorer, _ = build(req)
    sp = scorer.space
    assert sp.choices("per_node") == (1, 2, 4, 8, 72)
    h, b = sp.choices("gpu").index("H100_SXM"), sp.choices("gpu").index("GB200")
    assert not sp.node_offered[h][-1] and sp.node_offered[b][-1]
    cols = sp.grid()
    gpu, per_node = _values(sp, cols, "gpu"), _values(sp, cols, "per_node")
    assert not ((gpu == "H100_SXM") & (per_node == 72)).any()
    assert ((gpu == "H100_SXM") & (per_node == 8)).any() and ((gpu == "GB200") & (per_node == 72)).any()


def test_price_of_a_gb200_domain_is_the_given_price():
    """GB200 has no price row: --price (a per-GPU quote) and --owned price every node size up
    to its 72-GPU domain, on the assumed host."""
    prob = validate(OptimizeRequest("llama3-70b", budget=("144gpus",), gpu="GB200", prices=("GB200=6.0",)))
    assert prob.hosts.sizes == (1, 2, 4, 8, 72)
    assert prob.prices.tolist() == [[6.0] * 5] and prob.price_sources == (("your --price",) * 5,)
    assert prob.hosts.at(0, 72).instance is None  # no instance described: the assumed host
    owned = validate(OptimizeRequest("llama3-70b", **GB200_144))
    assert owned.hosts.offered().tolist() == [[True] * 5] and owned.prices.tolist() == [[0.0] * 5]


def test_gb200_search_scores_72_gpu_domains_faster_than_8_gpu_nodes():
    """ZeRO-3 at TP 8 on 144 GB200: in 8-GPU nodes each node holds one data-parallel rank and all
    gradient and parameter traffic crosses ib_xdr; in 72-GPU domains 9 ranks share NVLink
    (costs/llm/evaluator.py: _sync's hierarchical collective), so the same plan is faster."""
    scorer, _ = build(OptimizeRequest("llama3-70b", **GB200_144, axes=(("tp", "8"), ("zero", "3"))))
    sp = scorer.space
    assert sp.choices("per_node") == (1, 2, 4, 8, 72)
    cols = sp.grid()
    per_node, gpus = _values(sp, cols, "per_node"), _values(sp, cols, "gpus")
    wide = per_node == 72
    assert wide.any() and set(gpus[wide]) == {72, 144}  # whole domains only
    m = scorer.metrics(cols)
    assert np.isfinite(m["iteration_s"][wide]).all() and (m["per_node"][wide] == 72).all()
    # the same plans (every other axis equal) at 144 GPUs in nodes of 8 and domains of 72
    others = [a for a in sp.names if a != "per_node"]
    key = {tuple(cols[a][i] for a in others): i for i in np.flatnonzero((gpus == 144) & (per_node == 8))}
    pairs = [
        (key[k], i)
        for i in np.flatnonzero((gpus == 144) & wide)
        if (k := tuple(cols[a][i] for a in others)) in key
    ]
    assert pairs
    eight, seventy_two = (np.array(x) for x in zip(*pairs, strict=True))
    assert (m["iteration_s"][seventy_two] < m["iteration_s"][eight]).all()
    assert (m["sync_s"][seventy_two] < m["sync_s"][eight]).all()
    assert (m["nodes"][seventy_two] == 2).all() and (m["nodes"][eight] == 18).all()


def _best_at(scorer, cols, m, gpus: int, per_node: int) -> float:
    """The shortest iteration (s) of the plans of ``gpus`` GPUs in nodes of ``per_node`` that fit."""
    sp = scorer.space
    fits = m["memory_bytes"] <= m["device_memory_bytes"] * scorer.limits.memory_fraction
    sel = (_values(sp, cols, "gpus") == gpus) & (_values(sp, cols, "per_node") == per_node) & fits
    return float(m["iteration_s"][sel].min())


def test_gb200_optimize_picks_two_nvl72_racks_for_mixtral(capsys):
    """Mixtral 8x7B on 144 GB200: the best plan (ZeRO-3, DP 72 x CP 2) gathers and reduces over
    144 GPUs, 72 of them in each rack on NVLink, and beats every 144-GPU plan in 8-GPU nodes.
    With tensor-parallel communication exposed (--tp-overlap off) by 2.8%; with it overlapped,
    as the megatron stack runs it and the search then includes, the best 8-GPU-node plan comes
    within 0.2%, inside the 0.5% within which the search calls plans tied."""
    req = dict(GB200_144)
    scorer, _ = build(OptimizeRequest("mixtral-8x7b", **req))
    cols = scorer.space.grid()
    m = scorer.metrics(cols)
    wide, narrow = _best_at(scorer, cols, m, 144, 72), _best_at(scorer, cols, m, 144, 8)
    assert 0.995 * narrow < wide < narrow
    exposed, _ = build(OptimizeRequest("mixtral-8x7b", **req, axes=(("tp_overlap", "off"),)))
    cols = exposed.space.grid()
    m = exposed.metrics(cols)
    assert _best_at(exposed, cols, m, 144, 72) == pytest.approx(wide, rel=1e-12)
    assert _best_at(exposed, cols, m, 144, 72) < 0.98 * _best_at(exposed, cols, m, 144, 8)
    args = ["optimize", "mixtral-8x7b", "--gpu", "GB200", "--owned", "GB200:144", "--budget", "144gpus"]
    code, out, err = _run(capsys, *args, "--network", "ib_xdr", "--global-batch", "576", "--format", "json")
    assert code == 0, err
    best = json.loads(out)["best"]
    assert (best["gpu"], best["gpus"], best["gpus_per_node"], best["nodes"]) == ("GB200", 144, 72, 2)
    assert best["iteration_ms"] == pytest.approx(wide * 1e3, rel=1e-9)
    assert "--gpus-per-node 72" in best["estimate_command"]


def test_estimate_refuses_a_node_wider_than_the_device(capsys):
    args = ["estimate", "llama3-70b", "--workers", "144", "--gpus-per-node", "72", "--tp", "8", "--pp", "2"]
    code, out, err = _run(capsys, *args, "--device", "H100_SXM")
    assert code == 2 and not out
    assert err.strip() == (
        "error: --gpus-per-node 72: H100_SXM comes at most 8 to a node (devices.toml max_gpus_per_node; valid: 1-8)"
    )
    code, out, err = _run(capsys, *args, "--device", "GB200", "--network", "ib_xdr", "--format", "json")
    assert code == 0, err
    assert json.loads(out)[0]["gpus_per_node"] == 72


@pytest.mark.parametrize("per_node", [16, 9])
def test_estimate_refuses_any_size_over_the_catalog_node(capsys, per_node):
    code, _, err = _run(
        capsys, "estimate", "alexnet", "--device", "A100_80GB", "--gpus-per-node", str(per_node)
    )
    assert code == 2 and "A100_80GB comes at most 8 to a node" in err and len(err.strip().splitlines()) == 1


def test_a_wide_domain_draws_host_power_per_8_gpus():
    """configs/energy.toml [node]: the power besides the GPUs of one 8-GPU server; a 72-GPU
    NVLink domain is charged it per 8 of its GPUs, a node of up to 8 GPUs once."""
    workers = np.array([144, 72, 144, 16, 3, 1])
    per_node = np.array([72, 72, 8, 8, 8, 1])
    assert servers(workers, per_node).tolist() == [18, 9, 18, 2, 1, 1]
    for n in NODE_SIZES:  # a node of a server's size or less: one server per node, as before
        w = np.arange(1, 9) * n
        assert (servers(w, n) == w // n).all()


GB200_ROWS = """
[[price]]
device = "GB200"
provider = "pergpu"
instance = "1x GB200"
gpus_per_instance = 1
usd_per_hour = 7.0
pricing = "on-demand"
region = "test-1"
source = "https://example.org/pergpu"
date = "2026-01-15"

[[price]]
device = "GB200"
provider = "tray"
instance = "4x GB200"
gpus_per_instance = 4
usd_per_hour = 20.0
pricing = "on-demand"
region = "test-1"
source = "https://example.org/tray"
date = "2026-01-15"
"""


@pytest.fixture
def gb200_priced(tmp_path, monkeypatch):
    """A copy of configs/ whose only price rows are a per-GPU GB200 quote and a 4-GPU one."""
    dst = tmp_path / "configs"
    shutil.copytree(catalog.configs_dir(), dst)
    (dst / "prices.toml").write_text(GB200_ROWS)
    monkeypatch.setenv("PLANNER_CONFIGS", str(dst))
    caches = (catalog.devices, catalog.networks, catalog.prices, catalog.price_rows)
    for f in caches:
        f.cache_clear()
    yield dst
    for f in caches:
        f.cache_clear()


def test_a_per_gpu_quote_offers_every_size_up_to_the_domain(gb200_priced):
    """planner/host_table.py: a per-GPU quote is an offer of any node size up to the device's
    node (72 for GB200); a 4-GPU instance's row offers nodes of 4 only."""
    prob = validate(OptimizeRequest("llama3-70b", budget=("144gpus",), gpu="GB200", objective="cost"))
    assert prob.hosts.sizes == (1, 2, 4, 8, 72)
    assert prob.hosts.offered().tolist() == [[True] * 5]
    # nodes of 4: the lower middle of the two providers' offers (5.00 and 7.00); others: per-GPU
    assert prob.prices.tolist() == [[7.0, 7.0, 5.0, 7.0, 7.0]]
    assert prob.price_sources[0][4] == "pergpu 1x GB200 on-demand; host not described: assumed"


def test_tensor_parallel_groups_wider_than_8_fill_part_of_a_domain(capsys):
    """GPT-3 175B (96 heads): TP 12 and 24 divide the heads and an NVL72's 72 GPUs, so a GB200
    search takes them (in 72-GPU domains only); TP 16 divides no node of GB200, and no H100 node
    holds 12."""
    req = OptimizeRequest("gpt3-175b", **GB200_144, axes=(("tp", "12,24"),))
    scorer, _ = build(req)
    sp = scorer.space
    assert sp.choices("tp") == (12, 24)
    cols = sp.grid()
    assert set(_values(sp, cols, "per_node")) == {72} and set(_values(sp, cols, "tp")) == {12, 24}
    assert np.isfinite(scorer.metrics(cols)["iteration_s"]).all()
    code, _, err = _run(
        capsys, "optimize", "llama3-70b", "--gpu", "GB200", "--owned", "GB200:144", "--tp", "16"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--tp 16 divides no node of these GPUs (GPUs per node: 1, 2, 4, 8, 72)" in err
    code, _, err = _run(
        capsys, "optimize", "gpt3-175b", "--gpu", "H100_SXM", "--budget", "144gpus", "--tp", "12"
    )
    assert code == 2 and "--tp 12 is wider than a node (8 GPUs per node at most for these GPUs)" in err


def test_launch_files_count_hosts_not_nvlink_domains():
    """A plan on 2 GB200 NVL72 domains runs on 36 hosts of 4 GPUs (one compute tray each:
    MLCommons Inference v6.1, Crusoe's GB200-NVL72 system description, accelerators_per_node 4):
    Slurm nodes, --gres and torchrun's processes per node count the hosts, the degrees stay."""
    from planner.launch.plan import plan_from_record
    from planner.launch.slurm import Slurm
    from planner.launch.target import LaunchOptions

    rec = dict(
        net="llama3-70b", gpu="GB200", network="ib_xdr", gpus=144, gpus_per_node=72, precision="bf16",
        scheme="ring", microbatch=1, accumulation=4, tp=8, zero=1, parallel="data",
    )  # fmt: skip
    plan = plan_from_record(rec, "plan.json")
    assert (plan.gpus_per_node, plan.nodes, plan.nvlink_domain, plan.tp, plan.dp) == (4, 36, 72, 8, 18)
    files = Slurm().files(plan, LaunchOptions(), "train")
    text = next(iter(files.values()))
    assert "#SBATCH --nodes=36" in text and "#SBATCH --gres=gpu:4" in text
    assert "# NVLink domain: 72 GPUs = 18 hosts of 4" in text
    h100 = plan_from_record({**rec, "gpu": "H100_SXM", "gpus_per_node": 8, "network": "ib_ndr"}, "plan.json")
    assert (h100.gpus_per_node, h100.nodes, h100.nvlink_domain) == (8, 18, 8)
