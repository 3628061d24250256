"""The modern rule set's communication, overlap, optimizer step, input bound and parameters.

Reference measurement: https://github.com/NVIDIA/nccl-tests/issues/119 (2022-11-17): 3 nodes
x 8 A100-SXM4-40GB, NVLink inside, 4 HDR NICs per node; all_reduce_perf up to 128 MB gave an
average bus bandwidth of 84.8 GB/s (peak 96).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from costs.comm import collectives, overlap
from costs.comm import schemes as comm
from costs.model import evaluate, plans
from costs.modern.evaluator import Options
from planner import catalog

DEVICES = ["V100_16GB", "A100_80GB", "H100_SXM"]
LINKS = ["eth25", "ib_hdr", "nvlink2", "nvlink3", "nvlink4"]
NETS = sorted(catalog.zoo())


@pytest.fixture(scope="module")
def tables():
    return catalog.device_table(DEVICES), catalog.link_table(LINKS), catalog.efficiency(DEVICES, LINKS)


def _dp_grid(c, net_link=0):
    d, s, k = np.meshgrid(np.arange(3), np.arange(len(comm.SCHEME_NAMES)), [1, 2, 8, 16, 64], indexing="ij")
    return plans(
        c.n_layers,
        device=d,
        batch=64,
        workers=k,
        gpus_per_node=8,
        scheme=s,
        network=net_link,
        intra_link=2 + d,
        precision=3 * (d > 0) + 2 * (d == 0),
    )


@pytest.mark.parametrize("net", NETS)
def test_overlap_never_slower_nor_faster_than_the_bound(net, tables):
    devices, links, eff = tables
    c = catalog.net_costs(net, "modern")
    p = _dp_grid(c)
    r = evaluate(c, p, devices, links, efficiency=eff)
    no = evaluate(
        c,
        p,
        devices,
        links,
        efficiency=eff,
        options=Options(bucket_bytes=0),
    )
    np.testing.assert_allclose(no.sync, no.sync_total)
    assert np.all(r.total <= no.total * (1 + 1e-12))
    compute = r.total - r.sync
    assert np.all(r.total >= np.maximum(compute, r.sync_total) * (1 - 1e-12))
    assert np.all((r.sync >= 0) & (r.sync <= r.sync_total * (1 + 1e-12)))


def test_exposed_closed_form():
    # 4 buckets, comm 8 s, backward 10 s: buckets ready every 2.5 s, each takes 2 s;
    # the last ends at max(2.5 + 8, 10 + 2) = 12 -> 2 s exposed
    assert overlap.exposed(8.0, 10.0, 100.0, 25.0) == pytest.approx(2.0)
    # comm longer than backward: 2.5 + 20 - 10 = 12.5 exposed
    assert overlap.exposed(20.0, 10.0, 100.0, 25.0) == pytest.approx(12.5)
    # one bucket: nothing hides
    assert overlap.exposed(8.0, 10.0, 10.0, 25.0) == pytest.approx(8.0)


def test_optimizer_step_traffic_by_hand():
    n = 1000.0
    assert overlap.step_bytes(n, "sgd", 0) == 12 * n  # read w, g; write w (fp32)
    assert overlap.step_bytes(n, "momentum", 3) == 20 * n  # + read and write the buffer
    assert overlap.step_bytes(n, "adam", 3) == 28 * n  # + two moments read and written
    assert overlap.step_bytes(n, "sgd", 2) == 20 * n  # fp16: GradScaler unscale reads and writes g
    with pytest.raises(Exception, match="unknown optimizer 'lamb'"):
        overlap.step_bytes(n, "lamb", 0)


def test_optimizer_option_changes_only_the_update(tables):
    devices, links, eff = tables
    c = catalog.net_costs("resnet50", "modern")
    p = _dp_grid(c)
    sgd = evaluate(c, p, devices, links, efficiency=eff, options=Options(optimizer="sgd"))
    adam = evaluate(c, p, devices, links, efficiency=eff, options=Options(optimizer="adam"))
    np.testing.assert_array_equal(sgd.forward, adam.forward)
    assert np.all(adam.update > sgd.update)


def test_hierarchical_allreduce_matches_nccl_tests_bus_bandwidth():
    links = catalog.link_table(["ib_hdr", "nvlink3"])
    eff = catalog.efficiency(["A100_40GB"], ["ib_hdr", "nvlink3"])
    bw = links.bandwidth * eff.link
    size, k = 128 * 2**20, 24
    t = collectives.allreduce(
        3, size, k, 8, bw[1], links.latency[1], bw[0], links.latency[0], nics_per_node=4
    )
    busbw = size / t * 2 * (k - 1) / k / 1e9
    assert busbw == pytest.approx(84.8, rel=0.15)


def test_alpha_beta_terms():
    # ring over 4 peers: 6 latencies + 1.5 x S/B
    assert collectives.flat(3, 1e6, 4, 1e9, 1e-6) == pytest.approx(6e-6 + 1.5e-3)
    # binomial tree: 2 log2(4) (a + S/B)
    assert collectives.flat(1, 1e6, 4, 1e9, 1e-6) == pytest.approx(4 * (1e-6 + 1e-3))
    # a shared NIC halves each GPU's inter-node share
    one = collectives.allreduce(3, 1e8, 16, 8, 1e11, 0.0, 1e10, 0.0)
    half = collectives.allreduce(3, 1e8, 16, 8, 1e11, 0.0, 1e10, 0.0, nics_per_node=4)
    assert half > one


@pytest.mark.parametrize("net", ["alexnet", "resnet50", "inception_v3"])
def test_accumulation_with_cited_efficiencies(net, tables):
    devices, links, eff = tables
    c = catalog.net_costs(net, "modern")
    p = _dp_grid(c)
    a = 4
    base = evaluate(c, p, devices, links, efficiency=eff)
    acc = evaluate(c, replace(p, accumulation=np.full(len(p), a)), devices, links, efficiency=eff)
    np.testing.assert_allclose(acc.forward, a * base.forward)
    np.testing.assert_allclose(acc.backward, a * base.backward)
    np.testing.assert_array_equal(acc.update, base.update)
    np.testing.assert_array_equal(acc.sync, base.sync)  # overlap with the last microbatch only
    assert np.all(acc.throughput >= base.throughput * (1 - 1e-12))


def test_input_pipeline_bound(tables):
    devices, links, eff = tables
    c = catalog.net_costs("alexnet", "modern")
    p = _dp_grid(c)
    rate = 5000.0
    r = evaluate(c, p, devices, links, efficiency=eff, loader_rate=rate)
    per_node = p.batch * np.minimum(p.gpus_per_node, p.workers)
    assert np.all(r.total >= per_node / rate * (1 - 1e-12))
    free = evaluate(c, p, devices, links, efficiency=eff, loader_rate=np.inf)
    assert np.all(free.input_stall == 0) and np.any(r.input_stall > 0)


def test_efficiency_vector_round_trip_and_multiplier(tables):
    devices, links, eff = tables
    values, names, bounds = eff.to_vector()
    assert len(values) == len(names) == len(bounds)
    assert "gemm[H100_SXM,bf16]" in names and "host_per_kernel_s" in names
    assert np.all((values >= bounds[:, 0]) & (values <= bounds[:, 1]) | np.isnan(values))
    back = eff.from_vector(values)
    np.testing.assert_array_equal(back.gemm, eff.gemm)
    assert back.host_per_kernel_s == eff.host_per_kernel_s
    c = catalog.net_costs("resnet50", "modern")
    p = plans(c.n_layers, device=2, batch=256, precision=3, workers=1, network=0, intra_link=4)
    t0 = evaluate(c, p, devices, links, efficiency=eff)
    t1 = evaluate(c, p, devices, links, efficiency=eff.with_multiplier(2, 3, 2.0))
    np.testing.assert_allclose(
        t1.forward + t1.backward + t1.update, 2 * (t0.forward + t0.backward + t0.update)
    )


def test_ddp_buckets_fill_from_the_last_layer():
    # layers 0..4 with gradient bytes; bucket 10: reverse order 4 (6), 3 (6) -> closes at 12;
    # 2 (0, no gradient) skipped; 1 (5), 0 (5) -> second bucket
    first, share = overlap.buckets(np.array([5.0, 5.0, 0.0, 6.0, 6.0]), 10.0)
    assert list(first) == [3, 0]
    np.testing.assert_allclose(share, [1.0, 10 / 22])
    # ready at 2 s and 5 s (end of backward), comm 4 s: max(2 + 4, 5 + 4 x 10/22)
    end = overlap.exposed_layerwise(np.array([4.0]), np.array([[2.0], [5.0]]), share)
    assert end[0] == pytest.approx(max(6.0, 5 + 40 / 22))


@pytest.mark.parametrize("net", ["alexnet", "vgg16"])
def test_hybrid_plans_are_costed(net, tables):
    devices, links, eff = tables
    c = catalog.net_costs(net, "modern")
    split = c.default_split()
    p = plans(
        c.n_layers, device=1, batch=64, workers=[1, 8], gpus_per_node=8, network=0, intra_link=3, precision=3
    )
    dp = evaluate(c, p, devices, links, efficiency=eff)
    hy = evaluate(c, replace(p, split=np.full(2, split)), devices, links, efficiency=eff)
    assert np.all(np.isfinite(hy.total)) and np.all(hy.total > 0)
    assert hy.act_comm[0] == 0 and hy.act_comm[1] > 0
    assert hy.sync_params[1] < dp.sync_params[1]  # the model-parallel layers are not AllReduced
    np.testing.assert_allclose(hy.total[0], dp.total[0])  # one worker: the same plan


def test_paleo_rules_reject_modern_options(tables):
    devices, links, eff = tables
    c = catalog.net_costs("alexnet", "paleo-2018")
    p = plans(c.n_layers, device=0, batch=32, workers=1, network=0)
    with pytest.raises(TypeError, match="takes no efficiency"):
        evaluate(c, p, devices, links, efficiency=eff)
