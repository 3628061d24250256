"""The price table: loader validation, the median rule, --provider / --pricing, bad names, and
`planner list prices` with its 12-month flag."""

from __future__ import annotations

import shutil
from datetime import date

import numpy as np
import pytest

from planner import catalog, pricing
from planner.cli import main
from planner.errors import BadInput, CatalogError
from planner.pricing import PriceRow, choose, is_old
from planner.request.optimize import OptimizeRequest, validate


def _clear():
    for f in (catalog.devices, catalog.networks, catalog.prices, catalog.price_rows):
        f.cache_clear()


@pytest.fixture
def configs_copy(tmp_path, monkeypatch):
    """A private copy of configs/ that PLANNER_CONFIGS points at; caches cleared around it."""
    dst = tmp_path / "configs"
    shutil.copytree(catalog.configs_dir(), dst)
    monkeypatch.setenv("PLANNER_CONFIGS", str(dst))
    _clear()
    yield dst
    _clear()


ROW = """
[[price]]
device = "H100_SXM"
provider = "testcloud"
instance = "tc.8xh100"
gpus_per_instance = 8
usd_per_hour = 40.0
pricing = "on-demand"
region = "us-test-1"
source = "https://example.org/prices"
date = "2026-01-15"
"""


def _with_row(configs, old: str = "", new: str = "") -> None:
    """Only ROW (edited: ``old`` -> ``new``) in the copy's prices.toml."""
    assert old in ROW
    (configs / "prices.toml").write_text(ROW.replace(old, new, 1))


# ---- loader validation -------------------------------------------------------------------------

BAD_ROWS = {
    "unknown-key": ('region = "us-test-1"\n', 'region = "us-test-1"\nspot = 1.0\n', "unknown key(s) spot"),
    "missing": ('region = "us-test-1"\n', "", "lacks region"),
    "wrong-type": (
        "gpus_per_instance = 8",
        'gpus_per_instance = "8"',
        "gpus_per_instance has the wrong type",
    ),
    "zero-gpus": ("gpus_per_instance = 8", "gpus_per_instance = 0", "gpus_per_instance must be >= 1"),
    "negative": ("usd_per_hour = 40.0", "usd_per_hour = -1.0", "usd_per_hour must be a positive number"),
    "kind": ('pricing = "on-demand"', 'pricing = "preemptible"', "pricing 'preemptible' (valid: on-demand"),
    "device": ('device = "H100_SXM"', 'device = "H100_SXMX"', "device 'H100_SXMX' is not in devices.toml"),
    "provider": (
        'provider = "testcloud"',
        'provider = "Test Cloud"',
        "provider 'Test Cloud' must be lower-case",
    ),
    "date": ('date = "2026-01-15"', 'date = "Jan 2026"', "date 'Jan 2026' is not YYYY-MM"),
    "month": ('date = "2026-01-15"', 'date = "2026-13"', "date '2026-13' is not YYYY-MM"),
    "empty-source": ('source = "https://example.org/prices"', 'source = " "', "source is empty"),
}


@pytest.mark.parametrize("old,new,fragment", BAD_ROWS.values(), ids=BAD_ROWS.keys())
def test_bad_row_is_one_line_error_naming_file_row_and_field(configs_copy, old, new, fragment):
    _with_row(configs_copy, old, new)
    with pytest.raises(CatalogError) as info:
        catalog.price_rows()
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("prices.toml: [[price]] row 1 (")
    assert fragment in msg, msg


def test_repeated_row_and_unknown_table_are_rejected(configs_copy):
    (configs_copy / "prices.toml").write_text(ROW + ROW)
    with pytest.raises(CatalogError, match=r"row 2 \(H100_SXM testcloud\): repeats row 1"):
        catalog.price_rows()
    (configs_copy / "prices.toml").write_text(ROW + "\n[H100_SXM]\nusd_per_gpu_hour = 2.0\n")
    _clear()
    with pytest.raises(CatalogError, match=r"prices\.toml: unknown table\(s\) H100_SXM"):
        catalog.price_rows()


def test_shipped_table_is_valid_and_derives_per_gpu_prices():
    rows = catalog.price_rows()
    assert len(rows) >= 40
    kinds = {r.pricing for r in rows}
    assert {"on-demand", "spot"} <= kinds <= set(pricing.PRICING_KINDS)
    assert {"aws", "gcp", "azure", "lambda", "coreweave"} <= set(pricing.providers(rows))
    p5 = next(r for r in rows if r.instance == "p5.48xlarge")
    assert p5.usd_per_gpu_hour == pytest.approx(55.04 / 8)  # AWS list price after the June-2025 cut


# ---- the median rule ---------------------------------------------------------------------------


def test_default_h100_price_is_the_hand_computed_median():
    """H100_SXM on-demand, each provider's cheapest per-GPU-hour price (configs/prices.toml):
    hyperstack 3.20, crusoe 3.90, lambda 3.99, runpod 3.99, coreweave 49.24/8 = 6.155,
    aws 55.04/8 = 6.88, gcp 10.9791, azure 12.29. Eight values: median = (3.99 + 6.155) / 2."""
    p = catalog.prices()["H100_SXM"]
    assert p.usd_per_gpu_hour == pytest.approx((3.99 + 6.155) / 2)  # 5.0725
    assert (
        p.source
        == "median on-demand of 8 providers (aws, azure, coreweave, crusoe, gcp, hyperstack, lambda, runpod)"
    )
    assert catalog.device("H100_SXM").price_usd_per_hour == p.usd_per_gpu_hour


def test_a_provider_counts_once_with_its_cheapest_offer():
    def row(provider, usd, gpus=1, kind="on-demand"):
        return PriceRow("A100_80GB", provider, f"{provider}-{usd}", gpus, usd, kind, "r", "s", "2026-01")

    rows = [row("a", 8.0), row("a", 16.0, gpus=8), row("b", 3.0), row("c", 5.0), row("c", 1.0, kind="spot")]
    # a: min(8.0, 16/8 = 2.0) = 2.0; b: 3.0; c: 5.0 (its spot row is another kind) -> median 3.0
    assert choose(rows, "A100_80GB") == pricing.Price(3.0, "median on-demand of 3 providers (a, b, c)")
    assert choose(rows, "A100_80GB", "spot") == pricing.Price(1.0, "c spot")
    assert choose(rows, "A100_80GB", keep=("a", "c")).usd_per_gpu_hour == pytest.approx(3.5)
    assert choose(rows, "H100_SXM") is None


# ---- --provider and --pricing ------------------------------------------------------------------


def test_provider_filter_restricts_devices_and_prices():
    prob = validate(OptimizeRequest("alexnet", budget=("8gpus",), provider="aws,lambda"))
    rows = catalog.price_rows()
    offered = {r.device for r in rows if r.provider in ("aws", "lambda") and r.pricing == "on-demand"}
    assert set(prob.gpus) == {k for k in offered if not catalog.device(k).paleo}
    i = prob.gpus.index("H100_SXM")
    assert prob.prices[i] == pytest.approx((55.04 / 8 + 3.99) / 2)  # aws p5 and lambda
    assert prob.price_sources[i] == "median on-demand of 2 providers (aws, lambda)"
    j = prob.gpus.index("T4")
    assert (prob.prices[j], prob.price_sources[j]) == (0.526, "aws on-demand")
    assert "MI300X" not in prob.gpus and "H200" not in prob.gpus  # neither aws nor lambda rents them


def test_spot_pricing_and_price_override():
    prob = validate(OptimizeRequest("alexnet", pricing="spot", prices=("MI300X=1.0",), gpu="H100_SXM,MI300X"))
    # H100 spot: gcp a3-highgpu-1g 6.571, coreweave 19.71 / 8 = 2.46375
    assert prob.prices[0] == pytest.approx((6.571 + 19.71 / 8) / 2)
    assert prob.price_sources == ("median spot of 2 providers (coreweave, gcp)", "your --price")
    assert prob.prices[1] == 1.0
    default = validate(OptimizeRequest("alexnet", pricing="spot"))
    assert set(default.gpus) == {"A100_80GB", "H100_SXM", "H200", "B200", "MI300X"}  # those with spot rows
    assert not np.isnan(default.prices).any()


def test_pricing_names():
    assert pricing.parse_pricing("reserved") == "reserved-1y"  # reserved means the 1-year rate
    assert pricing.parse_pricing("On-Demand") == "on-demand"
    with pytest.raises(BadInput, match="valid: on-demand, spot, reserved, reserved-3y"):
        pricing.parse_pricing("preemptible")


@pytest.mark.parametrize(
    "argv,fragments",
    [
        (["--provider", "aws,nosuch"], ["--provider 'aws,nosuch'", "valid: aws, azure", "lambda"]),
        (["--pricing", "cheap"], ["--pricing 'cheap'", "valid: on-demand, spot, reserved"]),
        (["--pricing", "reserved"], ["no device has a reserved-1y price"]),
    ],
)
def test_bad_provider_or_pricing_is_one_line_exit_2(capsys, tmp_path, argv, fragments):
    code = main(["optimize", "alexnet", "--budget", "8gpus", "--out", str(tmp_path / "o"), *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])


def test_optimize_answer_says_which_price_it_used(capsys, tmp_path):
    code = main(["optimize", "alexnet", "--budget", "4gpus", "--gpu", "H100_SXM", "--provider", "aws"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "price $6.88 per GPU-hour (aws on-demand)" in out


# ---- planner list prices -----------------------------------------------------------------------


def test_is_old_counts_twelve_months_back():
    today = date(2026, 11, 23)

    def row(d):
        return PriceRow("T4", "x", "i", 1, 1.0, "on-demand", "r", "s", d)

    assert not is_old(row("2026-11-01"), today)
    assert not is_old(row("2025-11-23"), today)  # exactly 12 months
    assert is_old(row("2025-11-22"), today)
    assert is_old(row("2025-10"), today)
    assert not is_old(row("2025-12"), today)


def test_list_prices_flags_an_old_row(configs_copy, capsys):
    today = date.today()
    fresh = ROW.replace('date = "2026-01-15"', f'date = "{today.isoformat()}"')
    old = ROW.replace('provider = "testcloud"', 'provider = "oldcloud"').replace(
        'date = "2026-01-15"', f'date = "{today.year - 2}-01"'
    )
    (configs_copy / "prices.toml").write_text(fresh + old)
    code = main(["list", "prices"])
    out, _ = capsys.readouterr()
    assert code == 0
    lines = {ln.split()[1]: ln for ln in out.splitlines() if ln.startswith("H100_SXM")}
    assert lines["oldcloud"].rstrip().endswith("OLD")
    assert not lines["testcloud"].rstrip().endswith("OLD")
    assert "2 prices; 1 marked OLD" in out


def test_default_pricing_puts_several_gpu_types_on_the_alexnet_front():
    """Issue 13's done-when: `planner pareto alexnet --budget 16gpus` with default (median
    on-demand) prices has at least two GPU types on the front, and the report says which price
    each one used."""
    from planner.pipeline import pareto

    data, files = pareto(OptimizeRequest("alexnet", budget=("16gpus",), objective="time,cost"))
    gpus = {p["gpu"] for p in data["front"]}
    assert len(gpus) >= 2, gpus
    for p in data["front"]:
        assert p["usd_per_gpu_hour"] == pytest.approx(catalog.prices()[p["gpu"]].usd_per_gpu_hour)
        assert p["price_source"] == catalog.prices()[p["gpu"]].source
        assert f"{p['gpu']} ${p['usd_per_gpu_hour']:,.2f}/GPU-h ({p['price_source']})" in files["report.md"]


def test_sweep_specs_take_provider_and_pricing(tmp_path):
    from planner.sweep.spec import SweepSpecError, load

    def spec(options: str):
        path = tmp_path / "s.yaml"
        path.write_text(f"name: p\ngrid:\n  net: [alexnet]\n  budget: [8gpus]\noptions:\n{options}")
        return load(path, tmp_path)

    cell = spec("  provider: gcp,coreweave\n  pricing: spot\n").cells()[0]
    assert (cell.request.provider, cell.request.pricing) == ("gcp,coreweave", "spot")
    with pytest.raises(SweepSpecError, match=r"--provider 'nosuch'.*valid: aws"):
        spec("  provider: nosuch\n")
    with pytest.raises(SweepSpecError, match=r"no device has a spot price from aws, lambda"):
        spec("  provider: aws,lambda\n  pricing: spot\n")
