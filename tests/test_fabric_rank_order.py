"""The rank order (costs/comm/ranks.py, --rank-order): where each parallel group lies.

* The spans and members per node of costs.comm.ranks against a rank grid built here the way
  Megatron-Core's RankGenerator lays out its ``order`` (megatron/core/parallel_state.py: the
  first name varies fastest), for Megatron-Core's default ``tp-cp-ep-dp-pp`` and Llama 3's
  [TP, CP, PP, DP] (arXiv:2407.21783 §3.3.2; Megatron-LM's ``--use-tp-pp-dp-mapping``,
  ``tp-cp-ep-pp-dp``).
* On a small fabric the placement follows the order: a ring or chain of ``n`` over ``span`` GPUs
  keeps min(1, max(m, 1) / o) of the NIC per crossed tier, ``m = n D / span`` (costs/comm/fabric.py),
  computed here by hand, and the evaluator's pipeline sends and gradient all-reduce with it.
* Through the command line: the default changes nothing; a named order reaches the answer (text
  and JSON), its Reproduce line, plan files and sweep specs and comes back exactly; bad values are
  one line with exit 2.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import numpy as np
import pytest
from llm_toy import NET_BW, NET_LAT, NO_BUCKETS, evaluate, model
from test_fabric_cli import LAYOUT, LLM, _json
from test_fabric_cli import _run as _cli

from costs.comm import fabric as fab
from costs.comm import ranks
from costs.comm.fabric import Fabric, Tier
from costs.comm.ranks import MEGATRON, ORDERS, PP_INSIDE_DP
from costs.modern.evaluator import Options


def test_the_orders_are_megatron_cores_spellings_and_the_default_is_its_own():
    assert ORDERS == ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp")
    assert Options().rank_order == MEGATRON == "tp-cp-ep-dp-pp"


def _grid(order: str, t: int, c: int, p: int, d: int) -> np.ndarray:
    """Global ranks indexed [tp, cp, pp, dp]: the order's first name varies fastest."""
    sizes = {"tp": t, "cp": c, "pp": p, "dp": d}
    names = [n for n in order.split("-") if n != "ep"]  # expert parallelism 1
    rank = np.arange(t * c * p * d).reshape([sizes[n] for n in reversed(names)])
    return np.transpose(rank, [list(reversed(names)).index(n) for n in ("tp", "cp", "pp", "dp")])


def _groups(grid: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Every group varying ``axes`` of the grid, one row each."""
    rest = [a for a in range(4) if a not in axes]
    return np.transpose(grid, rest + list(axes)).reshape(-1, int(np.prod([grid.shape[a] for a in axes])))


def _block(groups: np.ndarray, workers: int) -> int:
    """The smallest aligned block of GPUs that holds each group whole."""
    return min(
        b for b in range(1, workers + 1) if workers % b == 0 and (groups // b == groups[:, :1] // b).all()
    )


LAYOUTS = [  # t, c, p, d, GPUs a node
    (2, 2, 4, 4, 8),
    (1, 1, 2, 8, 8),
    (8, 1, 4, 8, 8),
    (2, 1, 2, 8, 8),
    (1, 2, 2, 4, 4),
    (4, 2, 2, 2, 4),
    (1, 1, 4, 1, 2),
]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("t, c, p, d, g", LAYOUTS)
def test_spans_and_members_per_node_match_the_rank_grid(order, t, c, p, d, g):
    grid = _grid(order, t, c, p, d)
    n = t * c * p * d
    pipes, data = _groups(grid, (2,)), _groups(grid, (1, 3))  # PP; the d c ranks holding the same weights
    assert float(ranks.pipeline_span(order, t, c, p, n)) == _block(pipes, n)
    assert float(ranks.data_span(order, t, c, p, c * d)) == _block(data, n)
    per_node = max(int(np.sum(row // g == node)) for row in data for node in range(n // g))
    assert float(ranks.data_per_node(order, t, c, p, c * d, g)) == max(per_node, 1)


def test_llama3s_figure_5_example():
    """§3.3.2's 16 GPUs, |TP| = |CP| = |PP| = |DP| = 2: GPU0 and GPU1 share a TP group, GPU0 and
    GPU2 a CP group, GPU0 and GPU4 a PP group, GPU0 and GPU8 a DP group."""
    grid = _grid(PP_INSIDE_DP, 2, 2, 2, 2)
    assert int(grid[1, 0, 0, 0]) == 1 and int(grid[0, 1, 0, 0]) == 2
    assert int(grid[0, 0, 1, 0]) == 4 and int(grid[0, 0, 0, 1]) == 8


def _toy(o: float) -> Fabric:
    return Fabric("toy", (Tier(64, o),))  # domains of 64 GPUs at 1:o, no hop latency


def test_the_placement_on_a_small_fabric_follows_the_order():
    """256 GPUs, TP 8 (a node), PP 4, DP 8, domains of 64 GPUs at 1:4. Megatron-Core's order: a
    pipeline spans all 256, m = 4 x 64 / 256 = 1 stage a domain, a send keeps 1/4 of the NIC; the
    DP group spans t d = 64, inside a domain. Llama 3's: a pipeline spans t p = 32, inside a domain;
    the DP group spans 256 with m = 8 x 64 / 256 = 2 ranks a domain: 2/4 of the NIC."""
    t, c, p, d, n = 8, 1, 4, 8, 256
    toy = _toy(4.0)
    share = {
        order: (
            float(fab.ring_share(toy, p, ranks.pipeline_span(order, t, c, p, n))),
            float(fab.ring_share(toy, d, ranks.data_span(order, t, c, p, c * d))),
        )
        for order in ORDERS
    }
    assert share == {MEGATRON: (1 / 4, 1.0), PP_INSIDE_DP: (1.0, 2 / 4)}


def _run(order: str, o: float | None):
    options = replace(NO_BUCKETS, rank_order=order, fabric=None if o is None else _toy(o))
    cols = dict(batch=1, workers=256, gpus_per_node=8, tp=8, pp=4, accumulation=8, zero=0)
    return evaluate(model(), options, **cols)[1]


def test_pipeline_sends_and_gradients_through_the_evaluator():
    """The toy evaluator on that plan: a pipeline send moves b s h / t bytes (Narayanan et al.
    2021 §4.1), so at 1/4 of the NIC its bandwidth term is 4x, at 1/2 (o = 2) 2x: the extra
    seconds over the flat network are in ratio 3 : 1. The gradient all-reduce crosses 8 nodes one
    GPU a node (TP 8): a ring of 2 x 7/8 of the 4-byte gradients at the NIC's share, 14 latencies."""
    flat, m4, m2 = _run(MEGATRON, None), _run(MEGATRON, 4.0), _run(MEGATRON, 2.0)
    assert (m4.pp_comm[0] - flat.pp_comm[0]) == pytest.approx(3 * (m2.pp_comm[0] - flat.pp_comm[0]), rel=1e-9)
    assert m4.pp_comm[0] > flat.pp_comm[0] and m4.sync_total[0] == flat.sync_total[0]
    inside = _run(PP_INSIDE_DP, 4.0)
    assert inside.pp_comm[0] == pytest.approx(_run(PP_INSIDE_DP, None).pp_comm[0], rel=1e-12)
    params = inside.sync_params[0]
    assert flat.sync_params[0] == params
    assert flat.sync_total[0] == pytest.approx(14 * NET_LAT + 2 * 7 / 8 * 4.0 * params / NET_BW, rel=1e-9)
    assert inside.sync_total[0] == pytest.approx(
        14 * NET_LAT + 2 * 7 / 8 * 4.0 * params / (NET_BW / 2), rel=1e-9
    )


def test_on_the_flat_fabric_the_order_matters_only_below_a_node():
    """TP 8 fills a node: both orders send the same traffic across nodes. TP 2, PP 4 on nodes of
    8: Megatron-Core's order keeps 4 DP ranks in a node and sends every pipeline hop across nodes;
    Llama 3's keeps each pipeline in a node and spreads the DP ranks one a node."""
    assert _run(PP_INSIDE_DP, None).total[0] == pytest.approx(_run(MEGATRON, None).total[0], rel=1e-12)
    cols = dict(batch=1, workers=64, gpus_per_node=8, tp=2, pp=4, accumulation=8, zero=0)
    mega = evaluate(model(), NO_BUCKETS, **cols)[1]
    meta = evaluate(model(), replace(NO_BUCKETS, rank_order=PP_INSIDE_DP), **cols)[1]
    assert meta.pp_comm[0] < mega.pp_comm[0] and meta.sync_total[0] > mega.sync_total[0]


def test_the_default_order_changes_no_number(capsys):
    plain = _json(capsys, "estimate", *LLM, *LAYOUT, "--fabric", "meta-llama3-roce")
    named = _json(capsys, "estimate", *LLM, *LAYOUT, "--fabric", "meta-llama3-roce", "--rank-order", MEGATRON)
    assert plain == named and "rank_order" not in plain[0]


def test_llama3s_order_keeps_the_pipeline_in_a_pod(capsys):
    """TP 2, PP 4 over 4,096 GPUs on Meta's fabric: Megatron-Core's order puts 3 stages a pod (a
    send keeps 3/7 of the NIC); Llama 3's keeps each pipeline on 8 consecutive GPUs (one node)."""
    args = ["estimate", *LLM, *LAYOUT, "--fabric", "meta-llama3-roce"]
    mega = _json(capsys, *args)
    meta = _json(capsys, *args, "--rank-order", PP_INSIDE_DP)
    assert [r["rank_order"] for r in meta] == [PP_INSIDE_DP] * 2
    assert meta[1]["pp_comm_ms"] < mega[1]["pp_comm_ms"] / 10
    code, out, _ = _cli(capsys, *args, "--rank-order", PP_INSIDE_DP)
    assert code == 0 and "Fabric: meta-llama3-roce (" in out
    assert "Rank order: tp-cp-ep-pp-dp (pipeline inside data parallelism, Llama 3's)." in out


def test_optimize_answer_reproduce_line_plan_files_and_sweep_carry_the_order(capsys, tmp_path):
    args = ["llama3-8b", "--budget", "64gpus", "--gpu", "H100_SXM", "--trials", "20"]
    order = ["--fabric", "meta-llama3-roce", "--rank-order", PP_INSIDE_DP]
    data = _json(capsys, "optimize", *args, *order, "--out", str(tmp_path / "o"))
    best = data["best"]
    assert best["rank_order"] == PP_INSIDE_DP and data["request"]["rank_order"] == PP_INSIDE_DP
    assert f"--rank-order {PP_INSIDE_DP}" in best["estimate_command"]
    again = _json(capsys, *shlex.split(best["estimate_command"])[1:])
    assert again[0]["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-9)
    assert again[0]["rank_order"] == PP_INSIDE_DP
    code, out, _ = _cli(capsys, "optimize", *args, *order, "--out", str(tmp_path / "t"))
    assert code == 0 and "Rank order: tp-cp-ep-pp-dp (" in out
    code, _, err = _cli(capsys, "pareto", *args, *order, "--out", str(tmp_path / "p"))
    assert code == 0, err
    files = sorted((tmp_path / "p").glob("plan_*.json"))
    assert files
    for path in files:
        plan = json.loads(path.read_text())
        assert plan["rank_order"] == PP_INSIDE_DP
        row = _json(capsys, "estimate", "--plan", str(path))[0]
        assert row["total_ms"] == pytest.approx(plan["expected"]["iteration_ms"], rel=1e-9)
        assert row["rank_order"] == PP_INSIDE_DP
    plain = _json(capsys, "optimize", *args, "--out", str(tmp_path / "d"))
    assert "rank_order" not in plain["best"] and "rank_order" not in plain["request"]
    assert "--rank-order" not in plain["best"]["estimate_command"]


def test_sweep_spec_takes_a_rank_order(tmp_path):
    from planner.sweep.spec import SweepSpecError, load

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  rank_order: [tp-cp-ep-dp-pp, tp-cp-ep-pp-dp]\n"
        "options:\n  net: llama3-8b\n  budget: 64gpus\n  gpu: H100_SXM\n"
    )
    assert sorted(c.request.rank_order for c in load(path, tmp_path / "r").cells()) == list(ORDERS)
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  net: [llama3-8b]\noptions:\n  budget: 8gpus\n  rank_order: 3\n"
    )
    with pytest.raises(SweepSpecError, match="rank_order"):
        load(path, tmp_path / "r")
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  net: [llama3-8b]\noptions:\n  budget: 8gpus\n  rank_order: dp-pp\n"
    )
    with pytest.raises(Exception, match=r"--rank-order 'dp-pp' \(valid: tp-cp-ep-dp-pp, tp-cp-ep-pp-dp\)"):
        load(path, tmp_path / "r")


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["estimate", *LLM, *LAYOUT, "--rank-order", "tp-dp-pp"],
            "--rank-order 'tp-dp-pp' (valid: tp-cp-ep-dp-pp, tp-cp-ep-pp-dp)",
        ),
        (
            ["optimize", "llama3-8b", "--budget", "64gpus", "--rank-order", "meta"],
            "--rank-order 'meta' (valid: tp-cp-ep-dp-pp, tp-cp-ep-pp-dp)",
        ),
        (
            ["validate", "configs/measurements/scale.csv", "--rank-order", "dp-pp"],
            "--rank-order 'dp-pp' (valid: tp-cp-ep-dp-pp, tp-cp-ep-pp-dp)",
        ),
        (
            ["estimate", "alexnet", "--rules", "paleo-2018", "--rank-order", "tp-cp-ep-pp-dp"],
            "--rank-order applies to the modern rule set, not paleo-2018 (valid: tp-cp-ep-dp-pp)",
        ),
    ],
)
def test_a_bad_rank_order_is_one_line(capsys, args, message):
    code, _, err = _cli(capsys, *args)
    assert code == 2 and err.strip() == f"error: {message}"


def test_a_measurement_row_with_a_bad_rank_order_is_refused(tmp_path):
    from planner.calibrate import measurements
    from planner.errors import BadInput

    head = "source,net,device,precision,gpus,gpus_per_node,network,batch_per_gpu,scheme,metric,value,tp,pp,rank_order"
    path = tmp_path / "runs.csv"
    path.write_text(head + "\nx,llama3-8b,H100_SXM,bf16,16,8,ib_ndr,1,ring,samples_per_s,10,2,2,dp-pp\n")
    with pytest.raises(BadInput, match=r"row 1, column 'rank_order': unknown rank order 'dp-pp'"):
        measurements.load(path)
    path.write_text(head + "\nx,llama3-8b,H100_SXM,bf16,16,8,ib_ndr,1,ring,samples_per_s,10,2,2,\n")
    assert measurements.load(path)[0].rank_order == MEGATRON


def _launch_plan(**kw):
    from planner import catalog
    from planner.launch.plan import LaunchPlan

    fields = dict(net="llama3-70b", device="H100_SXM", network="ib_ndr", gpus=512, gpus_per_node=8)
    fields |= dict(precision="bf16", scheme="ring", microbatch=1, accumulation=8, tp=8, pp=4, sp=True, zero=1)
    fields |= dict(seq_len=8192, model=catalog.net_spec("llama3-70b")["model"], **kw)
    fields["global_batch"] = (
        fields["accumulation"] * fields["gpus"] // (fields["tp"] * fields["pp"] * fields.get("cp", 1))
    )
    return LaunchPlan(**fields)


def test_megatron_launches_llama3s_order_and_other_engines_refuse_its_pipelines():
    """Megatron-LM's --use-tp-pp-dp-mapping switches Megatron-Core's order to tp-cp-ep-pp-dp
    (megatron/training/initialize.py); planner writes no other engine's rank order, so a pipeline
    in it is refused there, and without a pipeline both orders are one."""
    from planner.launch.registry import TARGETS
    from planner.launch.target import LaunchOptions, Refused

    meta, plain = _launch_plan(rank_order=PP_INSIDE_DP), _launch_plan()
    megatron = TARGETS["megatron"]
    megatron.check(meta)
    assert "--use-tp-pp-dp-mapping" in megatron.files(meta, LaunchOptions())["megatron_args.txt"]
    assert "--use-tp-pp-dp-mapping" not in megatron.files(plain, LaunchOptions())["megatron_args.txt"]
    refused = 0
    for name, target in TARGETS.items():
        if target.scheduler or name == "megatron" or target.refusal(plain) or target.refusal(meta):
            continue
        with pytest.raises(Refused, match=f"planner writes its pipelines in rank order {MEGATRON} only"):
            target.check(meta)
        target.check(replace(meta, pp=1, accumulation=1, global_batch=64))
        refused += 1
    assert refused >= 2
    # parallel_state.py asserts equal attention and expert data-parallel sizes outside pp-last orders
    cp = _launch_plan(rank_order=PP_INSIDE_DP, cp=2)
    with pytest.raises(Refused, match="pp-last rank ordering"):
        megatron.check(cp)
    megatron.check(replace(cp, rank_order=MEGATRON))
