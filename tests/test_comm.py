"""Contract tests for the AllReduce schemes of costs.comm.schemes (paleo-model.md §B.2).

Every property is checked for every entry of ``comm.SCHEMES``, so a newly registered scheme is
covered without touching this file. Closed forms come from the worked check of §B.2.
"""

from __future__ import annotations

import numpy as np
import pytest

from costs.comm import schemes as comm

SCHEME_NAMES = sorted(comm.SCHEMES)

# paleo-model.md §B.2 worked check: NiN gradients over PALEO's InfiniBand, PPP_comm 0.56.
NIN_BYTES = 30_380_704.0
IB_BW = 70e9 / 8  # 70 Gbit/s, decimal, bytes/s
PPP_NIN = 0.56

# A grid of message sizes, workers, bandwidths, latencies and PPP values.
SIZES = np.array([0.0, 1.0, 4e3, 1e6, NIN_BYTES, 2.2e8, 5.5e11])
WORKERS = np.arange(1, 513, dtype=float)
BANDWIDTHS = np.array([0.25e9, 1.25e9, IB_BW, 16e9, 450e9])
LATENCIES = np.array([0.0, 6e-7, 1.5e-6, 5e-5])
PPPS = np.array([0.21, 0.56, 0.72, 1.0])


@pytest.fixture(params=SCHEME_NAMES)
def scheme(request):
    return request.param, comm.SCHEMES[request.param]


def _grid():
    """(S, K, bw, lat, ppp) broadcast over all combinations, K on axis 1."""
    return np.meshgrid(SIZES, WORKERS, BANDWIDTHS, LATENCIES, PPPS, indexing="ij")


# ---- registry ------------------------------------------------------------------------------


def test_registry_names_and_paleo_schemes():
    assert comm.SCHEME_NAMES == tuple(comm.SCHEMES)
    assert set(comm.PALEO_SCHEMES) == {"onetoall", "tree", "butterfly"}
    assert set(comm.PALEO_SCHEMES) <= set(comm.SCHEMES)
    assert "ring" in comm.SCHEMES
    assert all(callable(f) for f in comm.SCHEMES.values())


# ---- contract, every scheme ----------------------------------------------------------------


def test_zero_seconds_at_one_worker(scheme):
    _, f = scheme
    s, k, bw, lat, ppp = np.meshgrid(SIZES, [1.0], BANDWIDTHS, LATENCIES, PPPS, indexing="ij")
    out = f(s, k, bw, lat, ppp)
    assert out.shape == s.shape
    np.testing.assert_array_equal(out, 0.0)


def test_zero_at_one_worker_with_integer_workers(scheme):
    _, f = scheme
    out = f(np.array([NIN_BYTES, 1e9]), np.array([1, 1]), IB_BW, 1e-6, 0.5)
    np.testing.assert_array_equal(out, 0.0)


def test_non_negative_and_finite(scheme):
    _, f = scheme
    out = f(*_grid())
    assert np.all(np.isfinite(out))
    assert np.all(out >= 0.0)


def test_non_decreasing_in_message_bytes(scheme):
    _, f = scheme
    out = f(*_grid())  # axis 0 is the message size, sorted ascending
    assert np.all(np.diff(out, axis=0) >= 0.0)


def test_non_decreasing_in_workers_1_to_512(scheme):
    _, f = scheme
    out = f(*_grid())  # axis 1 is K = 1..512
    assert np.all(np.diff(out, axis=1) >= -1e-18)


def test_positive_beyond_one_worker_for_positive_message(scheme):
    _, f = scheme
    s, k, bw, lat, ppp = np.meshgrid(SIZES[1:], WORKERS[1:], BANDWIDTHS, LATENCIES, PPPS, indexing="ij")
    assert np.all(f(s, k, bw, lat, ppp) > 0.0)


def test_bandwidth_term_scales_as_one_over_ppp(scheme):
    """T(S) - T(0) is the bandwidth term; it is divided by PPP_comm, the latency term is not."""
    _, f = scheme
    s, k, bw, lat, _ = np.meshgrid(SIZES, WORKERS, BANDWIDTHS, LATENCIES, [1.0], indexing="ij")
    at_one = f(s, k, bw, lat, 1.0) - f(np.zeros_like(s), k, bw, lat, 1.0)
    for ppp in PPPS:
        term = f(s, k, bw, lat, ppp) - f(np.zeros_like(s), k, bw, lat, ppp)
        np.testing.assert_allclose(term * ppp, at_one, rtol=1e-12, atol=1e-15)
    # The latency-only part does not depend on PPP.
    lat_only = [f(np.zeros_like(s), k, bw, lat, ppp) for ppp in PPPS]
    for other in lat_only[1:]:
        np.testing.assert_allclose(other, lat_only[0], rtol=1e-12, atol=0)


def test_bandwidth_term_scales_as_one_over_bandwidth(scheme):
    _, f = scheme
    s, k = np.meshgrid(SIZES, WORKERS, indexing="ij")
    base = f(s, k, 1e9, 0.0, 1.0)
    np.testing.assert_allclose(f(s, k, 4e9, 0.0, 1.0) * 4, base, rtol=1e-12)
    np.testing.assert_allclose(f(s, k, 1e9, 0.0, 0.5) * 0.5, base, rtol=1e-12)


def test_linear_in_message_bytes_without_latency(scheme):
    _, f = scheme
    k = WORKERS
    one = f(np.full_like(k, 1e6), k, IB_BW, 0.0, PPP_NIN)
    np.testing.assert_allclose(f(np.full_like(k, 3e6), k, IB_BW, 0.0, PPP_NIN), 3 * one, rtol=1e-12)


def test_broadcasting_same_shape_arrays(scheme):
    _, f = scheme
    rng = np.random.default_rng(0)
    shape = (4, 6)
    s = rng.uniform(0, 1e9, shape)
    k = rng.integers(1, 513, shape).astype(float)
    bw = rng.uniform(1e8, 1e11, shape)
    lat = rng.uniform(0, 1e-5, shape)
    ppp = rng.uniform(0.1, 1.0, shape)
    out = f(s, k, bw, lat, ppp)
    assert isinstance(out, np.ndarray)
    assert out.shape == shape
    # Element by element it agrees with scalar calls.
    for idx in np.ndindex(shape):
        scalar = f(s[idx], k[idx], bw[idx], lat[idx], ppp[idx])
        assert float(scalar) == pytest.approx(out[idx], rel=1e-12, abs=0)


def test_broadcasting_mixed_shapes(scheme):
    _, f = scheme
    s = np.array([1e6, NIN_BYTES, 1e9])[:, None]  # (3, 1)
    k = np.array([1.0, 2.0, 7.0, 64.0, 100.0])[None, :]  # (1, 5)
    out = f(s, k, IB_BW, 1e-6, PPP_NIN)  # scalars for the link
    assert out.shape == (3, 5)
    bw = np.full((3, 5), IB_BW)
    np.testing.assert_allclose(f(s, k, bw, np.full((3, 5), 1e-6), np.full((3, 5), PPP_NIN)), out, rtol=0)
    np.testing.assert_array_equal(out[:, 0], 0.0)


def test_integer_worker_arrays(scheme):
    _, f = scheme
    k_int = np.arange(1, 513)
    s = np.full(k_int.shape, NIN_BYTES)
    np.testing.assert_allclose(
        f(s, k_int, IB_BW, 1e-6, PPP_NIN), f(s, k_int.astype(float), IB_BW, 1e-6, PPP_NIN), rtol=1e-15
    )


# ---- closed forms (paleo-model.md §B.2 worked check) -----------------------------------------

T_LINK_MS = 6.20014367


def _ms(x) -> float:
    return float(np.asarray(x)) * 1e3


def test_worked_check_t_link():
    t_link = NIN_BYTES / (IB_BW * PPP_NIN)
    assert t_link * 1e3 == pytest.approx(T_LINK_MS, abs=5e-9)
    # Butterfly at K=2 is exactly one link time (h(2) = 1).
    assert _ms(comm.butterfly(NIN_BYTES, 2, IB_BW, 0.0, PPP_NIN)) == pytest.approx(T_LINK_MS, abs=5e-9)


def test_worked_check_tree_k32():
    assert _ms(comm.tree(NIN_BYTES, 32, IB_BW, 0.0, PPP_NIN)) == pytest.approx(62.0014, abs=5e-5)
    assert _ms(comm.tree(NIN_BYTES, 32, IB_BW, 0.0, PPP_NIN)) == pytest.approx(10 * T_LINK_MS, rel=1e-8)


def test_worked_check_onetoall_k32():
    assert _ms(comm.one_to_all(NIN_BYTES, 32, IB_BW, 0.0, PPP_NIN)) == pytest.approx(384.4089, abs=5e-5)
    assert _ms(comm.one_to_all(NIN_BYTES, 32, IB_BW, 0.0, PPP_NIN)) == pytest.approx(62 * T_LINK_MS, rel=1e-8)


def test_worked_check_butterfly_k32():
    assert _ms(comm.butterfly(NIN_BYTES, 32, IB_BW, 0.0, PPP_NIN)) == pytest.approx(31.0007, abs=5e-5)


def test_paleo_schemes_have_no_latency_term():
    for name in comm.PALEO_SCHEMES:
        f = comm.SCHEMES[name]
        assert f(NIN_BYTES, 32, IB_BW, 1.0, PPP_NIN) == f(NIN_BYTES, 32, IB_BW, 0.0, PPP_NIN)


@pytest.mark.parametrize("f", [comm.tree, comm.butterfly])
def test_ceil_log2_height(f):
    """K=100 costs the same as K=128, K=50 as K=64, and K=65 already as K=128 (§B.2)."""
    t = lambda k: f(NIN_BYTES, k, IB_BW, 0.0, PPP_NIN)  # noqa: E731
    assert t(100) == t(128)
    assert t(50) == t(64)
    assert t(65) == t(128)
    assert t(64) < t(65)
    t_link = NIN_BYTES / (IB_BW * PPP_NIN)
    mult = 2 if f is comm.tree else 1
    for k in (2, 3, 4, 5, 8, 9, 33, 512):
        assert float(t(k)) == pytest.approx(mult * np.ceil(np.log2(k)) * t_link, rel=1e-14)


def test_onetoall_uses_k_minus_one():
    t_link = NIN_BYTES / (IB_BW * PPP_NIN)
    for k in (1, 2, 3, 17, 100, 512):
        assert float(comm.one_to_all(NIN_BYTES, k, IB_BW, 0.0, PPP_NIN)) == pytest.approx(
            2 * (k - 1) * t_link, rel=1e-14, abs=0
        )


@pytest.mark.parametrize("k", [1, 2, 3, 8, 32, 100, 512])
@pytest.mark.parametrize("lat", [0.0, 1.5e-6, 5e-5])
def test_ring_closed_form(k, lat):
    s, bw, ppp = NIN_BYTES, IB_BW, PPP_NIN
    expected = 2 * (k - 1) / k * s / bw / ppp + 2 * (k - 1) * lat
    assert float(comm.ring(s, k, bw, lat, ppp)) == pytest.approx(expected, rel=1e-13, abs=0)


def test_ring_worked_values():
    # K=32 over InfiniBand with 1.5 us latency: 62/32 T_link + 62 * 1.5 us.
    expected_ms = 62 / 32 * T_LINK_MS + 62 * 1.5e-3
    assert _ms(comm.ring(NIN_BYTES, 32, IB_BW, 1.5e-6, PPP_NIN)) == pytest.approx(expected_ms, rel=1e-8)
    assert expected_ms == pytest.approx(12.105778, abs=1e-6)


# ---- allreduce: flat, intra-node and hierarchical --------------------------------------------

PCIE3_BW, PCIE3_LAT = 128e9 / 8, 1.0e-6  # the intra-node link
IB_LAT = 1.5e-6


@pytest.fixture(params=list(enumerate(comm.SCHEME_NAMES)), ids=lambda p: p[1])
def indexed_scheme(request):
    i, name = request.param
    return i, comm.SCHEMES[name]


def test_allreduce_one_gpu_per_node_is_flat_scheme_over_network(indexed_scheme):
    i, f = indexed_scheme
    k = WORKERS
    s = np.full_like(k, NIN_BYTES)
    out = comm.allreduce(i, s, k, 1, PCIE3_BW, PCIE3_LAT, IB_BW, IB_LAT, PPP_NIN)
    np.testing.assert_allclose(out, f(s, k, IB_BW, IB_LAT, PPP_NIN), rtol=1e-14, atol=0)


def test_allreduce_single_node_uses_intra_node_link(indexed_scheme):
    i, f = indexed_scheme
    k = np.arange(1, 9, dtype=float)
    s = np.full_like(k, NIN_BYTES)
    for per_node in (8, 16):
        out = comm.allreduce(i, s, k, per_node, PCIE3_BW, PCIE3_LAT, IB_BW, IB_LAT, PPP_NIN)
        np.testing.assert_allclose(out, f(s, k, PCIE3_BW, PCIE3_LAT, PPP_NIN), rtol=1e-14, atol=0)
    # ... and so does not depend on the network at all.
    a = comm.allreduce(i, s, k, 8, PCIE3_BW, PCIE3_LAT, IB_BW, IB_LAT, PPP_NIN)
    b = comm.allreduce(i, s, k, 8, PCIE3_BW, PCIE3_LAT, 1.0, 1.0, PPP_NIN)
    np.testing.assert_array_equal(a, b)


def test_allreduce_zero_at_one_worker(indexed_scheme):
    i, _ = indexed_scheme
    out = comm.allreduce(
        i, np.array([NIN_BYTES, 1e9]), 1, np.array([1, 8]), PCIE3_BW, PCIE3_LAT, IB_BW, IB_LAT, 1.0
    )
    np.testing.assert_array_equal(out, 0.0)


# Hierarchical case written out by hand: 32 GPUs, 8 per node (4 nodes), NiN gradients,
# PCIe 3.0 inside a node (16 GB/s, 1 us), PALEO InfiniBand between nodes (8.75 GB/s, 1.5 us).
S = NIN_BYTES
_INNER = 2 * 7 / 8 * S / (16e9 * 0.56) + 2 * 7 * 1e-6  # ring over the 8 GPUs of a node
_SHARE = S / 8  # each GPU drives 1/8 of the message across nodes
_LINK = _SHARE / (8.75e9 * 0.56)
HIERARCHICAL = {
    "onetoall": _INNER + 2 * (4 - 1) * _LINK,
    "tree": _INNER + 2 * 2 * _LINK,  # ceil(log2 4) = 2
    "butterfly": _INNER + 2 * _LINK,
    "ring": _INNER + 2 * 3 / 4 * _LINK + 2 * 3 * 1.5e-6,
}


def test_hierarchical_hand_values_are_what_they_claim():
    # Literal seconds, so that the hand formulas above cannot drift together with the code.
    assert _INNER == pytest.approx(5.94773125e-3, rel=1e-9)
    assert _LINK == pytest.approx(7.750179592e-4, rel=1e-9)
    assert HIERARCHICAL["tree"] == pytest.approx(9.047803087e-3, rel=1e-9)


@pytest.mark.parametrize("name", comm.PALEO_SCHEMES + ("ring",))
def test_allreduce_hierarchical_by_hand(name):
    i = comm.SCHEME_NAMES.index(name)
    out = comm.allreduce(i, S, 32, 8, 16e9, 1e-6, 8.75e9, 1.5e-6, 0.56)
    assert out.shape == ()
    assert float(out) == pytest.approx(HIERARCHICAL[name], rel=1e-12)


def test_allreduce_hierarchical_is_ring_inside_plus_scheme_across(indexed_scheme):
    i, f = indexed_scheme
    for k, g in ((16, 8), (64, 8), (512, 8), (8, 4), (32, 2)):
        nodes = k // g
        expected = comm.ring(S, g, PCIE3_BW, PCIE3_LAT, PPP_NIN) + f(S / g, nodes, IB_BW, IB_LAT, PPP_NIN)
        out = comm.allreduce(i, S, k, g, PCIE3_BW, PCIE3_LAT, IB_BW, IB_LAT, PPP_NIN)
        assert float(out) == pytest.approx(float(expected), rel=1e-13)


def test_allreduce_vectorised_over_schemes_and_workers():
    """One call scores every (scheme, K, per_node) combination; equal to the scalar calls."""
    idx, k, g = np.meshgrid(
        np.arange(len(comm.SCHEME_NAMES)), [1, 2, 4, 8, 16, 64, 512], [1, 4, 8], indexing="ij"
    )
    out = comm.allreduce(idx, NIN_BYTES, k, g, PCIE3_BW, PCIE3_LAT, IB_BW, IB_LAT, PPP_NIN)
    assert out.shape == idx.shape
    for pos in np.ndindex(idx.shape):
        one = comm.allreduce(
            int(idx[pos]), NIN_BYTES, int(k[pos]), int(g[pos]), PCIE3_BW, PCIE3_LAT, IB_BW, IB_LAT, PPP_NIN
        )
        assert float(one) == pytest.approx(out[pos], rel=1e-14, abs=0)
    assert np.all(out >= 0)
    np.testing.assert_array_equal(out[:, 0, :], 0.0)  # K = 1
