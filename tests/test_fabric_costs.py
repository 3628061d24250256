"""Multi-tier fabrics in the cost model (costs/comm/fabric.py), each term against its formula
computed by hand here:

* a ring (or a pipeline's chain) of ``n`` members over ``span`` GPUs keeps min(1, max(m, 1) / o)
  of the NIC rate per crossed tier, ``m = n D / span`` members in a domain of ``D`` GPUs: demand
  ``b D / m`` against the domain's uplink capacity ``b D / o``;
* an all-to-all keeps min(1, 1 / (o f)), ``f = (span - D) / (span - g)`` of its bytes leaving the
  domain;
* a butterfly's and a tree's crossing steps run one after the other (Thakur et al. 2005's
  recursive doubling and binomial tree);
* each crossed tier adds two switch hops; in-network reduction (SHARP) sends the shard once.

The Meta figures (racks of 16 GPUs, pods of 3,072 at full bisection, 1:7 between pods) are the
Llama 3 paper's (arXiv:2407.21783, §3.3.1), read from configs/fabrics.toml.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_toy import NET_BW, NET_LAT, NO_BUCKETS, evaluate, model

from costs.comm import collectives
from costs.comm import fabric as fab
from costs.comm.fabric import Fabric, Tier
from costs.llm import experts
from planner import fabrics

RING, TREE, FLY, PS = 3, 1, 2, 0  # costs.comm.schemes.SCHEME_NAMES
META = fabrics.get("meta-llama3-roce").fabric


def test_meta_catalog_row_is_the_papers_cluster():
    """§3.3.1: 16 GPUs a rack, 192 racks = 3,072 GPUs a pod at full bisection, 8 pods at 1:7."""
    assert [(t.gpus, t.oversubscription) for t in META.tiers] == [(16, 1.0), (192 * 16, 7.0)]
    assert META.max_gpus == 8 * 3072 and not META.in_network_reduction
    sp = fabrics.get("dgx-superpod-h100").fabric
    # NVIDIA's RA Table 4: 4 SUs, 127 nodes, 1,016 GPUs; a rail is one leaf hop across a 32-node SU
    assert sp.max_gpus == 1016 and [(t.gpus, t.oversubscription) for t in sp.tiers] == [(32 * 8, 1.0)]
    assert fabrics.get("dgx-superpod-h100-sharp").fabric.in_network_reduction
    assert fabrics.get(None).key == "nonblocking" and fabrics.get(None).fabric.flat


@pytest.mark.parametrize(
    "members, span, want",
    [
        (16, 8192, 6 / 7),  # a pipeline of 16 stages over 8,192 GPUs: 6 stages a pod
        (16, 16384, 3 / 7),  # over 16,384: 3 a pod
        (64, 8192, 1.0),  # 64 DP ranks over 8,192: 24 a pod, more than 7: not slowed at all
        (64, 512, 1.0),  # inside one pod
        (2, 6144, 1 / 7),  # two members, one a pod: every stream leaves its pod
    ],
)
def test_ring_share_on_metas_fabric(members, span, want):
    assert float(fab.ring_share(META, members, span)) == pytest.approx(want, rel=1e-12)


def test_spread_share_is_one_over_o_f():
    """An all-to-all over 2 pods of 3,072 from nodes of 8: f = 3,072 / 6,136 of a GPU's
    inter-node bytes leave its pod; inside a rack (1:1) nothing binds."""
    f = (6144 - 3072) / (6144 - 8)
    assert float(fab.spread_share(META, 6144, 8)) == pytest.approx(1 / (7 * f), rel=1e-12)
    assert float(fab.spread_share(META, 3072, 8)) == 1.0
    # across all 8 pods: f -> 1 - 1/8 of the bytes leave (the brief's (1 - 1/P) share)
    f8 = (24576 - 3072) / (24576 - 8)
    assert f8 == pytest.approx(1 - 1 / 8, rel=1e-3)
    assert float(fab.spread_share(META, 24576, 8)) == pytest.approx(1 / (7 * f8), rel=1e-12)


def test_butterfly_and_tree_crossing_steps():
    """8 members one a pod: every step of 3 crosses. Butterfly: all members send, each step at
    1/7; tree: 1/2, 1/4, 1/8 of them send, steps at 2/7, 4/7 and 1 (capped)."""
    span = 8 * 3072
    assert float(fab.slowdown(META, FLY, 8, span)) == pytest.approx(7.0, rel=1e-12)
    assert float(fab.slowdown(META, TREE, 8, span)) == pytest.approx((3.5 + 1.75 + 1.0) / 3, rel=1e-12)
    assert float(fab.slowdown(META, PS, 8, span)) == 1.0  # the server's NIC serialises: not slowed
    assert float(fab.slowdown(META, RING, 8, span)) == 7.0  # one a pod: m = 1


def _toy(hop_s=1e-6, o=4.0, sharp=False):
    return Fabric("toy", (Tier(16, 1.0), Tier(64, o)), hop_s, sharp)


def test_hierarchical_allreduce_on_a_fabric():
    """128 GPUs, 8 a node (16 nodes), spread over a block of 1,024 GPUs: in a 64-GPU domain the
    node ring has m = 16 x 64 / 1024 = 1 member, so each of its 15 x 2 steps runs at 1/4 of the
    NIC and waits 2 more switch hops per crossed tier (both: 1,024 > 16, 64)."""
    net_bw, net_lat, intra_bw, intra_lat, S = 50e9, 5e-6, 300e9, 1e-6, 1e9
    got = collectives.allreduce(RING, S, 128, 8, intra_bw, intra_lat, net_bw, net_lat, None, _toy())
    a, b = collectives.affine(RING, 128, 8, intra_bw, intra_lat, net_bw, net_lat, None, _toy(), 1024)
    inner = 2 * 7 * intra_lat + 2 * 7 / 8 * S / intra_bw  # reduce-scatter + all-gather in the node
    across = 2 * 15 * (net_lat + 2 * 2 * 1e-6) + 2 * 15 / 16 * (S / 8) / (net_bw * 0.25)
    assert float(a + b * S) == pytest.approx(inner + across, rel=1e-12)
    # span = the 128 workers themselves: m = 16 x 64 / 128 = 8 >= 4, not slowed; 2 tiers of hops
    plain = 2 * 15 * (net_lat + 4e-6) + 2 * 15 / 16 * (S / 8) / net_bw
    assert float(got) == pytest.approx(inner + plain, rel=1e-12)


def test_in_network_reduction_sends_the_shard_once():
    """SHARP: after the node's reduce-scatter each GPU sends its S/8 once and receives it once,
    one climb and return (net latency + 2 hops per crossed tier), instead of the ring's
    2 (n-1)/n S/8 each way."""
    net_bw, net_lat, intra_bw, intra_lat, S = 50e9, 5e-6, 300e9, 1e-6, 1e9
    a, b = collectives.affine(RING, 128, 8, intra_bw, intra_lat, net_bw, net_lat, None, _toy(sharp=True))
    inner = 2 * 7 * intra_lat + 2 * 7 / 8 * S / intra_bw
    assert float(a + b * S) == pytest.approx(inner + net_lat + 4e-6 + (S / 8) / net_bw, rel=1e-12)
    ring = collectives.allreduce(RING, S, 128, 8, intra_bw, intra_lat, net_bw, net_lat)
    assert float(a + b * S) < float(ring)
    # ZeRO's reduce-scatters and all-gathers (reduce False) stay rings, with the fabric's hops
    a, b = collectives.affine(
        RING, 128, 8, intra_bw, intra_lat, net_bw, net_lat, None, _toy(sharp=True), None, False
    )
    hops = 2 * 15 * 4e-6
    assert float(a + b * S) == pytest.approx(float(ring) + hops, rel=1e-12)


def test_pipeline_sends_cross_pods_on_the_toy_evaluator():
    """Narayanan et al. 2021 §4.1's b s h / t per send, on a fabric: 16 GPUs, 4 a node, TP 2,
    PP 4 (Megatron's order: a stage's 4 GPUs in a block, the 4 stages across all 16): domains
    of 8 GPUs at 1:4 hold m = 4 x 8 / 16 = 2 stages, so a send runs at 2/4 of the NIC and climbs
    one tier (2 hops of 1 us)."""
    m, b, t, p, mb = model(), 2, 2, 4, 6
    toy = Fabric("toy", (Tier(8, 4.0),), 1e-6)
    cols = dict(batch=b, workers=16, gpus_per_node=4, tp=t, pp=p, accumulation=mb)
    _, r = evaluate(m, replace(NO_BUCKETS, fabric=toy), **cols)
    _, flat = evaluate(m, NO_BUCKETS, **cols)
    hidden = b * m["seq_len"] * m["d_model"] * 2.0  # bf16
    assert r.pp_comm[0] == pytest.approx(mb * 2 * (hidden / t / (NET_BW * 0.5) + NET_LAT + 2e-6), rel=1e-12)
    assert flat.pp_comm[0] == pytest.approx(mb * 2 * (hidden / t / NET_BW + NET_LAT), rel=1e-12)
    assert r.tp_comm[0] == flat.tp_comm[0]  # inside a node: no fabric


def test_expert_all_to_all_on_a_fabric():
    """EP 16 over two nodes of 8 on domains of 8 GPUs at 1:2: all of a GPU's network bytes leave
    its domain (f = 8 / 8), so the port runs at 1/2, plus two hops."""
    S, H, K, IB, IB_LAT, NV = 4096, 2048, 8, 50e9, 5e-6, 150e9
    one = lambda v, dt=float: np.array([v], dtype=dt)  # noqa: E731
    c = SimpleNamespace(
        e=one(16), t=one(1), per_node=one(8), hidden=one(S * H * 2.0), elem=one(2.0), intra_bw=one(NV),
        intra_lat=one(1e-6), net_bw=one(IB), net_lat=one(IB_LAT), ep_overlap=one(False, bool),
        fp8=one(False, bool), fabric=Fabric("toy", (Tier(8, 2.0),), 1e-6),
    )  # fmt: skip
    got = float(experts.all_to_all_s(c, {"n_experts": 128, "top_k": K}, np.array([False]), 0.0, None)[0])
    net = S * H * 2.0 * K * (1 / 2) / (IB / 2) + 8 * (IB_LAT + 2e-6)
    assert got == pytest.approx(4 * net, rel=1e-12)


# every catalog fabric, and each with its oversubscription raised: shares never exceed the NIC
# rate and never grow with the oversubscription
_members = st.integers(1, 4096)
_spans = st.integers(1, 1 << 15)


def _steeper(f: Fabric, k: float) -> Fabric:
    return replace(f, tiers=tuple(replace(t, oversubscription=t.oversubscription * k) for t in f.tiers))


@settings(max_examples=200, deadline=None)
@given(_members, _spans, st.sampled_from(sorted(fabrics.fabrics())), st.floats(1.0, 16.0))
def test_every_fabric_keeps_at_most_the_nic_rate_and_is_monotone(members, span, name, k):
    f = fabrics.get(name).fabric
    span = max(span, members)
    for share in (fab.ring_share, lambda f_, n, s: fab.spread_share(f_, s, 8)):
        base, steep = float(share(f, members, span)), float(share(_steeper(f, k), members, span))
        assert 0.0 < steep <= base <= 1.0
    for scheme in (RING, TREE, FLY, PS):
        slow = float(fab.slowdown(f, scheme, members, span))
        assert 1.0 <= slow <= float(fab.slowdown(_steeper(f, k), scheme, members, span)) + 1e-12
    bw, lat = fab.path(f, 50e9, 5e-6, members, span)
    assert bw <= 50e9 and lat >= 5e-6


@pytest.mark.parametrize("name", sorted(fabrics.fabrics()))
def test_every_fabric_prices_a_dense_plan_no_faster_unless_it_reduces_in_network(name):
    """The toy model at 16 GPUs over nodes of 4 with every parallelism crossing nodes: a fabric
    without in-network reduction never makes a plan faster than one non-blocking network."""
    f = fabrics.get(name).fabric
    cols = dict(batch=2, workers=[16, 64], gpus_per_node=4, tp=2, pp=4, accumulation=4)
    _, flat = evaluate(model(), NO_BUCKETS, **cols)
    _, r = evaluate(model(), replace(NO_BUCKETS, fabric=None if f.flat else f), **cols)
    if f.flat:
        assert np.array_equal(r.total, flat.total)
    elif not f.in_network_reduction:
        assert np.all(r.total >= flat.total)


def test_a_cnns_data_parallel_allreduce_on_a_fabric():
    """The modern rules' data parallelism (costs/modern/evaluator.py): resnet50 on 64 nodes of
    one GPU over domains of 16 GPUs at 1:8. The ring has 16 members in each domain, m = 16 >= 8:
    not slowed, but each of its 2 x 63 steps climbs two more switches (hop 1 us); on domains of 4
    at 1:8 (m = 4) its bandwidth term doubles."""
    from costs.model import evaluate, plans
    from planner import catalog

    costs = catalog.net_costs("resnet50", "modern")
    devices, links = catalog.device_table(["A100_80GB"]), catalog.link_table(["ib_hdr", "nvlink3"])
    p = plans(
        costs.n_layers,
        device=0,
        batch=32,
        workers=64,
        gpus_per_node=1,
        network=0,
        intra_link=1,
        precision=3,
        scheme=RING,
    )
    eff = catalog.efficiency(["A100_80GB"], ["ib_hdr", "nvlink3"])

    def sync(f):
        return float(
            evaluate(
                costs, p, devices, links, efficiency=eff, options=replace(NO_BUCKETS, fabric=f)
            ).sync_total[0]
        )

    flat = sync(None)
    wide = sync(Fabric("wide", (Tier(16, 8.0),), 1e-6))
    narrow = sync(Fabric("narrow", (Tier(4, 8.0),), 0.0))
    assert wide == pytest.approx(flat + 2 * 63 * 2e-6, rel=1e-12)
    lat = 2 * 63 * float(links.latency[0])
    assert narrow - lat == pytest.approx(2 * (flat - lat), rel=1e-12)


def test_sharp_speeds_up_the_data_parallel_allreduce_only():
    """On the SuperPOD with SHARP (toy model, 32 GPUs in nodes of 4, TP 2: DP 16, 2 a node, 8 nodes):
    ZeRO 0's all-reduce sends the shard once instead of 2 x 7/8 of it; ZeRO 1's reduce-scatter
    and all-gather stay rings, exactly as on one non-blocking network."""
    sharp = fabrics.get("dgx-superpod-h100-sharp").fabric
    cols = dict(batch=2, workers=32, gpus_per_node=4, tp=2, zero=[0, 1], accumulation=2)
    _, flat = evaluate(model(), NO_BUCKETS, **cols)
    _, r = evaluate(model(), replace(NO_BUCKETS, fabric=sharp), **cols)
    assert r.sync_total[0] < flat.sync_total[0] and r.sync_total[1] == flat.sync_total[1]
    # the part across the 8 nodes: ring 2 x 7/8 x S/2 at 25 GB/s + 14 latencies -> S/2 once + 1 latency
    params = r.sync_params[0]
    ring = 2 * 7 / 8 * 4.0 * params / 2 / NET_BW + 14 * NET_LAT
    once = 4.0 * params / 2 / NET_BW + NET_LAT
    assert flat.sync_total[0] - r.sync_total[0] == pytest.approx(ring - once, rel=1e-9)
