"""The data-parallel case studies of paleo-model.md §D.3 ("Code-derived case-study values (GEMM
only)"), through `planner estimate`.

§D.3 rows are paleo-2016 targets: per-iteration compute ms, per-scheme communication ms and
per-scheme speedups (printed to 2 decimals, checked to 0.005). The K=1 forward / backward /
update / total line is given for both rule sets (3 decimals, checked to 0.0005 ms), and the
"Tree speedup (paleo-2018)" row repeats the Tree speedup under paleo-2018. T(K) = compute +
scheme time; speedup T(1)/T(K) for strong scaling (ceil(B/K) per worker) and K T(1)/T(K) for
weak scaling (B per worker) (§B.1, §B.2).
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import pytest

from planner.estimate.estimate import estimate
from planner.request.estimate import EstimateRequest

RULES = ("paleo-2016", "paleo-2018")
TOL_3DP = 0.0005 + 1e-9  # half a unit of the printed 3rd decimal, plus float noise
TOL_2DP = 0.005 + 1e-9  # half a unit of the printed 2nd decimal

# Row labels of the §D.3 tables -> planner scheme names (costs.comm.schemes.SCHEME_NAMES).
SCHEMES = {"OneToAll": "onetoall", "TreeAllReduce": "tree", "ButterflyAllReduce": "butterfly"}


class Case(NamedTuple):
    id: str
    net: str  # planner zoo name: alexnet = alex_v2, alexnet_cc2 = alex_v2_1gpu (§E.2)
    device: str
    network: str
    batch: int  # total batch (strong) or per-worker batch (weak)
    scaling: str
    ppp_comp: float
    ppp_comm: float
    k1: dict[str, tuple[float, float, float, float]]  # rules -> K=1 (fwd, bwd, update, total) ms
    table: str  # the §D.3 table body: "label | v1 | v2 ...", first row K


# paleo-model.md §D.3: every data-parallel table (the hybrid "one weird trick" table, which is not
# data-parallel, is not here). Configuration from each table's title and §D.2; K=1 values from
# the "Per-iteration compute at K=1 (paleo-2016 / paleo-2018)" line above each table.
CASES = [
    # §D.3, "Case FireCaffe/NiN, batch 256, strong scaling"
    Case(
        "firecaffe_nin_b256_strong",
        "nin",
        "K20X",
        "infiniband",
        256,
        "strong",
        0.21,
        0.56,
        k1={
            "paleo-2016": (667.163, 1250.826, 0.343, 1918.332),
            "paleo-2018": (667.963, 1253.477, 0.343, 1921.783),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            compute ms | 1918.33 | 960.14 | 481.05 | 241.50 | 121.73 | 61.84 | 31.90 | 16.93
            OneToAll comm ms | 0.00 | 12.40 | 37.20 | 86.80 | 186.00 | 384.41 | 781.22 | 1574.84
            TreeAllReduce comm ms | 0.00 | 12.40 | 24.80 | 37.20 | 49.60 | 62.00 | 74.40 | 86.80
            ButterflyAllReduce comm ms | 0.00 | 6.20 | 12.40 | 18.60 | 24.80 | 31.00 | 37.20 | 43.40
            OneToAll speedup | 1.00 | 1.97 | 3.70 | 5.84 | 6.23 | 4.30 | 2.36 | 1.21
            TreeAllReduce speedup | 1.00 | 1.97 | 3.79 | 6.88 | 11.20 | 15.49 | 18.05 | 18.49
            ButterflyAllReduce speedup | 1.00 | 1.99 | 3.89 | 7.38 | 13.09 | 20.66 | 27.76 | 31.80
            Tree speedup (paleo-2018) | 1.00 | 1.97 | 3.79 | 6.88 | 11.20 | 15.50 | 18.07 | 18.52
        """,
    ),
    # §D.3, "Case FireCaffe/NiN, batch 1024, strong scaling"
    Case(
        "firecaffe_nin_b1024_strong",
        "nin",
        "K20X",
        "infiniband",
        1024,
        "strong",
        0.21,
        0.56,
        k1={
            "paleo-2016": (2667.036, 5000.081, 0.343, 7667.46),
            "paleo-2018": (2670.235, 5010.683, 0.343, 7681.262),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            compute ms | 7667.46 | 3834.71 | 1918.33 | 960.14 | 481.05 | 241.50 | 121.73 | 61.84
            OneToAll comm ms | 0.00 | 12.40 | 37.20 | 86.80 | 186.00 | 384.41 | 781.22 | 1574.84
            TreeAllReduce comm ms | 0.00 | 12.40 | 24.80 | 37.20 | 49.60 | 62.00 | 74.40 | 86.80
            ButterflyAllReduce comm ms | 0.00 | 6.20 | 12.40 | 18.60 | 24.80 | 31.00 | 37.20 | 43.40
            OneToAll speedup | 1.00 | 1.99 | 3.92 | 7.32 | 11.49 | 12.25 | 8.49 | 4.68
            TreeAllReduce speedup | 1.00 | 1.99 | 3.95 | 7.69 | 14.45 | 25.26 | 39.09 | 51.58
            ButterflyAllReduce speedup | 1.00 | 2.00 | 3.97 | 7.83 | 15.16 | 28.14 | 48.24 | 72.85
            Tree speedup (paleo-2018) | 1.00 | 1.99 | 3.95 | 7.69 | 14.45 | 25.27 | 39.12 | 51.64
        """,
    ),
    # §D.3, "Case Inception v3, 256 per worker, weak scaling"
    Case(
        "inception_b256_weak",
        "inception_v3",
        "K40",
        "ethernet",
        256,
        "weak",
        0.62,
        0.72,
        k1={
            "paleo-2016": (1254.131, 2691.91, 0.932, 3946.973),
            "paleo-2018": (1257.565, 2701.069, 0.932, 3959.566),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 50 | 100
            OneToAll comm ms | 0.00 | 210.97 | 632.91 | 1476.80 | 3164.57 | 10337.61 | 20886.19
            TreeAllReduce comm ms | 0.00 | 210.97 | 421.94 | 632.91 | 843.89 | 1265.83 | 1476.80
            ButterflyAllReduce comm ms | 0.00 | 105.49 | 210.97 | 316.46 | 421.94 | 632.91 | 738.40
            OneToAll speedup | 1.00 | 1.90 | 3.45 | 5.82 | 8.88 | 13.82 | 15.89
            TreeAllReduce speedup | 1.00 | 1.90 | 3.61 | 6.89 | 13.18 | 37.86 | 72.77
            ButterflyAllReduce speedup | 1.00 | 1.95 | 3.80 | 7.41 | 14.45 | 43.09 | 84.24
            Tree speedup (paleo-2018) | 1.00 | 1.90 | 3.61 | 6.90 | 13.19 | 37.89 | 72.83
        """,
    ),
    # §D.3, "Hypothetical AlexNet, batch 2048, strong scaling"
    Case(
        "alexnet_b2048_strong",
        "alexnet",
        "K80",
        "ethernet20",
        2048,
        "strong",
        0.62,
        1.0,
        k1={
            "paleo-2016": (902.86, 2447.09, 1.189, 3351.139),
            "paleo-2018": (904.507, 2459.606, 1.189, 3365.302),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            compute ms | 3351.14 | 1677.11 | 840.09 | 421.59 | 212.33 | 107.70 | 55.39 | 29.23
            OneToAll comm ms | 0.00 | 160.97 | 482.92 | 1126.81 | 2414.59 | 4990.15 | 10141.27 | 20443.51
            TreeAllReduce comm ms | 0.00 | 160.97 | 321.95 | 482.92 | 643.89 | 804.86 | 965.84 | 1126.81
            ButterflyAllReduce comm ms | 0.00 | 80.49 | 160.97 | 241.46 | 321.95 | 402.43 | 482.92 | 563.40
            OneToAll speedup | 1.00 | 1.82 | 2.53 | 2.16 | 1.28 | 0.66 | 0.33 | 0.16
            TreeAllReduce speedup | 1.00 | 1.82 | 2.88 | 3.70 | 3.91 | 3.67 | 3.28 | 2.90
            ButterflyAllReduce speedup | 1.00 | 1.91 | 3.35 | 5.05 | 6.27 | 6.57 | 6.23 | 5.65
            Tree speedup (paleo-2018) | 1.00 | 1.82 | 2.89 | 3.71 | 3.93 | 3.69 | 3.29 | 2.91
        """,
    ),
    # §D.3, "Hypothetical AlexNet, 2048 per worker, weak scaling"
    Case(
        "alexnet_b2048_weak",
        "alexnet",
        "K80",
        "ethernet20",
        2048,
        "weak",
        0.62,
        1.0,
        k1={
            "paleo-2016": (902.86, 2447.09, 1.189, 3351.139),
            "paleo-2018": (904.507, 2459.606, 1.189, 3365.302),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            OneToAll comm ms | 0.00 | 160.97 | 482.92 | 1126.81 | 2414.59 | 4990.15 | 10141.27 | 20443.51
            TreeAllReduce comm ms | 0.00 | 160.97 | 321.95 | 482.92 | 643.89 | 804.86 | 965.84 | 1126.81
            ButterflyAllReduce comm ms | 0.00 | 80.49 | 160.97 | 241.46 | 321.95 | 402.43 | 482.92 | 563.40
            OneToAll speedup | 1.00 | 1.91 | 3.50 | 5.99 | 9.30 | 12.86 | 15.90 | 18.03
            TreeAllReduce speedup | 1.00 | 1.91 | 3.65 | 6.99 | 13.42 | 25.80 | 49.68 | 95.79
            ButterflyAllReduce speedup | 1.00 | 1.95 | 3.82 | 7.46 | 14.60 | 28.57 | 55.94 | 109.58
            Tree speedup (paleo-2018) | 1.00 | 1.91 | 3.65 | 7.00 | 13.43 | 25.82 | 49.73 | 95.89
        """,
    ),
    # §D.3, "Hypothetical AlexNet, batch 256, strong scaling"
    Case(
        "alexnet_b256_strong",
        "alexnet",
        "K80",
        "ethernet20",
        256,
        "strong",
        0.62,
        1.0,
        k1={
            "paleo-2016": (113.408, 306.988, 1.189, 421.585),
            "paleo-2018": (113.614, 308.552, 1.189, 423.356),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            compute ms | 421.59 | 212.33 | 107.70 | 55.39 | 29.23 | 16.16 | 9.62 | 6.35
            OneToAll comm ms | 0.00 | 160.97 | 482.92 | 1126.81 | 2414.59 | 4990.15 | 10141.27 | 20443.51
            TreeAllReduce comm ms | 0.00 | 160.97 | 321.95 | 482.92 | 643.89 | 804.86 | 965.84 | 1126.81
            ButterflyAllReduce comm ms | 0.00 | 80.49 | 160.97 | 241.46 | 321.95 | 402.43 | 482.92 | 563.40
            OneToAll speedup | 1.00 | 1.13 | 0.71 | 0.36 | 0.17 | 0.08 | 0.04 | 0.02
            TreeAllReduce speedup | 1.00 | 1.13 | 0.98 | 0.78 | 0.63 | 0.51 | 0.43 | 0.37
            ButterflyAllReduce speedup | 1.00 | 1.44 | 1.57 | 1.42 | 1.20 | 1.01 | 0.86 | 0.74
            Tree speedup (paleo-2018) | 1.00 | 1.13 | 0.98 | 0.79 | 0.63 | 0.52 | 0.43 | 0.37
        """,
    ),
    # §D.3, "Hypothetical AlexNet, 256 per worker, weak scaling"
    Case(
        "alexnet_b256_weak",
        "alexnet",
        "K80",
        "ethernet20",
        256,
        "weak",
        0.62,
        1.0,
        k1={
            "paleo-2016": (113.408, 306.988, 1.189, 421.585),
            "paleo-2018": (113.614, 308.552, 1.189, 423.356),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            OneToAll comm ms | 0.00 | 160.97 | 482.92 | 1126.81 | 2414.59 | 4990.15 | 10141.27 | 20443.51
            TreeAllReduce comm ms | 0.00 | 160.97 | 321.95 | 482.92 | 643.89 | 804.86 | 965.84 | 1126.81
            ButterflyAllReduce comm ms | 0.00 | 80.49 | 160.97 | 241.46 | 321.95 | 402.43 | 482.92 | 563.40
            OneToAll speedup | 1.00 | 1.45 | 1.86 | 2.18 | 2.38 | 2.49 | 2.55 | 2.59
            TreeAllReduce speedup | 1.00 | 1.45 | 2.27 | 3.73 | 6.33 | 11.00 | 19.45 | 34.85
            ButterflyAllReduce speedup | 1.00 | 1.68 | 2.89 | 5.09 | 9.07 | 16.37 | 29.83 | 54.79
            Tree speedup (paleo-2018) | 1.00 | 1.45 | 2.27 | 3.74 | 6.35 | 11.03 | 19.50 | 34.96
        """,
    ),
    # §D.3, "MXNet case: Inception v3, 32 per worker, weak scaling"
    Case(
        "mxnet_inception_b32_weak",
        "inception_v3",
        "K80",
        "ethernet20",
        32,
        "weak",
        0.49,
        0.72,
        k1={
            "paleo-2016": (147.971, 319.357, 0.561, 467.889),
            "paleo-2018": (148.297, 320.227, 0.561, 469.085),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            OneToAll comm ms | 0.00 | 105.49 | 316.46 | 738.40 | 1582.29 | 3270.06 | 6645.61 | 13396.70
            TreeAllReduce comm ms | 0.00 | 105.49 | 210.97 | 316.46 | 421.94 | 527.43 | 632.91 | 738.40
            ButterflyAllReduce comm ms | 0.00 | 52.74 | 105.49 | 158.23 | 210.97 | 263.71 | 316.46 | 369.20
            OneToAll speedup | 1.00 | 1.63 | 2.39 | 3.10 | 3.65 | 4.01 | 4.21 | 4.32
            TreeAllReduce speedup | 1.00 | 1.63 | 2.76 | 4.77 | 8.41 | 15.04 | 27.20 | 49.65
            ButterflyAllReduce speedup | 1.00 | 1.80 | 3.26 | 5.98 | 11.03 | 20.47 | 38.18 | 71.55
            Tree speedup (paleo-2018) | 1.00 | 1.63 | 2.76 | 4.78 | 8.42 | 15.06 | 27.24 | 49.73
        """,
    ),
    # §D.3, "MXNet case: AlexNet, 512 per worker, weak scaling"
    Case(
        "mxnet_alexnet_b512_weak",
        "alexnet",
        "K80",
        "ethernet20",
        512,
        "weak",
        0.49,
        0.72,
        k1={
            "paleo-2016": (286.196, 775.274, 1.189, 1062.659),
            "paleo-2018": (286.717, 779.233, 1.189, 1067.139),
        },
        table="""
            K | 1 | 2 | 4 | 8 | 16 | 32 | 64 | 128
            OneToAll comm ms | 0.00 | 223.57 | 670.72 | 1565.01 | 3353.59 | 6930.76 | 14085.10 | 28393.76
            TreeAllReduce comm ms | 0.00 | 223.57 | 447.15 | 670.72 | 894.29 | 1117.86 | 1341.44 | 1565.01
            ButterflyAllReduce comm ms | 0.00 | 111.79 | 223.57 | 335.36 | 447.15 | 558.93 | 670.72 | 782.51
            OneToAll speedup | 1.00 | 1.65 | 2.45 | 3.24 | 3.85 | 4.25 | 4.49 | 4.62
            TreeAllReduce speedup | 1.00 | 1.65 | 2.82 | 4.90 | 8.69 | 15.59 | 28.29 | 51.76
            ButterflyAllReduce speedup | 1.00 | 1.81 | 3.30 | 6.08 | 11.26 | 20.97 | 39.24 | 73.72
            Tree speedup (paleo-2018) | 1.00 | 1.65 | 2.82 | 4.91 | 8.70 | 15.63 | 28.36 | 51.89
        """,
    ),
    # §D.3, "Hybrid-case baseline: alex_v2_1gpu, 128 per worker, weak data parallelism"
    Case(
        "hybrid_baseline_alexnet_cc2_b128_weak",
        "alexnet_cc2",
        "K20",
        "pcie2",
        128,
        "weak",
        0.46,
        0.75,
        k1={"paleo-2016": (107.835, 300.41, 2.691, 410.936), "paleo-2018": (108.122, 302.776, 2.691, 413.59)},
        table="""
            K | 1 | 2 | 4 | 8
            OneToAll comm ms | 0.00 | 66.09 | 198.27 | 462.62
            TreeAllReduce comm ms | 0.00 | 66.09 | 132.18 | 198.27
            ButterflyAllReduce comm ms | 0.00 | 33.04 | 66.09 | 99.13
            OneToAll speedup | 1.00 | 1.72 | 2.70 | 3.76
            TreeAllReduce speedup | 1.00 | 1.72 | 3.03 | 5.40
            ButterflyAllReduce speedup | 1.00 | 1.85 | 3.45 | 6.45
            Tree speedup (paleo-2018) | 1.00 | 1.72 | 3.03 | 5.41
        """,
    ),
]


def _rows(case: Case) -> tuple[tuple[int, ...], dict[str, tuple[float, ...]]]:
    lines = [[c.strip() for c in line.split("|")] for line in case.table.strip().splitlines()]
    workers = tuple(int(v) for v in lines[0][1:])
    assert lines[0][0] == "K"
    return workers, {row[0]: tuple(float(v) for v in row[1:]) for row in lines[1:]}


_CASES_BY_ID = {c.id: c for c in CASES}


def _estimate(case: Case, rules: str) -> dict[tuple[int, str], dict]:
    """{(workers, scheme): record} of `planner estimate` for the case (cached per case, rules)."""
    return _estimate_cached(case.id, rules)


@cache
def _estimate_cached(case_id: str, rules: str) -> dict[tuple[int, str], dict]:
    case = _CASES_BY_ID[case_id]
    workers, _ = _rows(case)
    req = EstimateRequest(
        net=case.net,
        device=case.device,
        network=case.network,
        batch=case.batch,
        workers=workers,
        scaling=case.scaling,
        schemes=tuple(SCHEMES.values()),
        ppp_comp=case.ppp_comp,
        ppp_comm=case.ppp_comm,
        rules=rules,
        conv_algorithm="gemm",
    )
    return {(r["workers"], r["scheme"]): r for r in estimate(req)}


def _check_row(got: list[float], want: tuple[float, ...], tol: float, what: str) -> list[str]:
    return [
        f"{what}[{i}]: got {g:.5f}, §D.3 says {w}"
        for i, (g, w) in enumerate(zip(got, want))
        if abs(g - w) > tol
    ]


CASE_IDS = [c.id for c in CASES]


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_k1_breakdown(case, rules):
    """K=1 forward, backward, update and total ms, per rule set (3 decimals)."""
    recs = _estimate(case, rules)
    want = case.k1[rules]
    for scheme in SCHEMES.values():
        r = recs[(1, scheme)]
        got = (r["forward_ms"], r["backward_ms"], r["update_ms"], r["total_ms"])
        bad = _check_row(list(got), want, TOL_3DP, f"{scheme} K=1 (fwd, bwd, update, total)")
        assert not bad, "\n".join(bad)
        assert r["comm_ms"] == 0.0
        assert r["speedup"] == pytest.approx(1.0)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_compute_and_comm_rows(case):
    """ "compute ms" (strong) and the per-scheme "comm ms" rows, paleo-2016, 2 decimals. Under weak
    scaling the compute is profiled once at B (§B.1), so it is the K=1 total at every K."""
    workers, rows = _rows(case)
    recs = _estimate(case, "paleo-2016")
    bad = []
    for scheme in SCHEMES.values():
        compute = [recs[(k, scheme)]["compute_ms"] for k in workers]
        if case.scaling == "strong":
            bad += _check_row(compute, rows["compute ms"], TOL_2DP, f"{scheme} compute ms")
        else:
            assert "compute ms" not in rows
            k1_total = case.k1["paleo-2016"][3]
            bad += _check_row(compute, (k1_total,) * len(workers), TOL_3DP, f"{scheme} compute ms")
    for label, scheme in SCHEMES.items():
        comm = [recs[(k, scheme)]["comm_ms"] for k in workers]
        bad += _check_row(comm, rows[f"{label} comm ms"], TOL_2DP, f"{label} comm ms")
        total = [recs[(k, scheme)]["total_ms"] for k in workers]
        summed = [recs[(k, scheme)]["compute_ms"] + recs[(k, scheme)]["comm_ms"] for k in workers]
        assert total == pytest.approx(summed, rel=1e-12)  # T(K) = compute + comm
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_speedup_rows(case):
    """The three per-scheme speedup rows, paleo-2016, 2 decimals."""
    workers, rows = _rows(case)
    recs = _estimate(case, "paleo-2016")
    bad = []
    for label, scheme in SCHEMES.items():
        speedup = [recs[(k, scheme)]["speedup"] for k in workers]
        bad += _check_row(speedup, rows[f"{label} speedup"], TOL_2DP, f"{label} speedup")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_tree_speedup_paleo_2018(case):
    """The "Tree speedup (paleo-2018)" row, 2 decimals."""
    workers, rows = _rows(case)
    recs = _estimate(case, "paleo-2018")
    speedup = [recs[(k, "tree")]["speedup"] for k in workers]
    bad = _check_row(speedup, rows["Tree speedup (paleo-2018)"], TOL_2DP, "Tree speedup (paleo-2018)")
    assert not bad, "\n".join(bad)
