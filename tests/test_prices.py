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
from planner.space.declare import PER_NODE


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


def row(provider, usd, gpus=1, kind="on-demand"):
    """A made-up A100_80GB price row (instance named by provider and price)."""
    return PriceRow("A100_80GB", provider, f"{provider}-{usd}", gpus, usd, kind, "r", "s", "2026-01")


def test_a_provider_counts_once_with_its_cheapest_offer():
    rows = [row("a", 8.0), row("a", 16.0, gpus=8), row("b", 3.0), row("c", 5.0), row("c", 1.0, kind="spot")]
    # a: min(8.0, 16/8 = 2.0) = 2.0; b: 3.0; c: 5.0 (its spot row is another kind) -> median 3.0
    assert choose(rows, "A100_80GB") == pricing.Price(3.0, "median on-demand of 3 providers (a, b, c)")
    # spot: c 1.0 (its spot row), a 2.0 and b 3.0 at on-demand (they publish no spot rate) -> 2.0
    assert choose(rows, "A100_80GB", "spot").usd_per_gpu_hour == 2.0
    assert choose(rows, "A100_80GB", "spot", keep=("c",)) == pricing.Price(1.0, "c spot")
    assert choose(rows, "A100_80GB", keep=("a", "c")).usd_per_gpu_hour == pytest.approx(3.5)
    assert choose(rows, "H100_SXM") is None


# ---- --provider and --pricing ------------------------------------------------------------------


def test_provider_filter_restricts_devices_and_prices():
    prob = validate(OptimizeRequest("alexnet", budget=("8gpus",), provider="aws,lambda"))
    rows = catalog.price_rows()
    offered = {r.device for r in rows if r.provider in ("aws", "lambda") and r.pricing == "on-demand"}
    assert set(prob.gpus) == {k for k in offered if not catalog.device(k).paleo}
    i, eight, one = prob.gpus.index("H100_SXM"), PER_NODE.index(8), PER_NODE.index(1)
    # 8-GPU nodes: aws p5.48xlarge 55.04 / 8 = 6.88 and lambda's 8x H100 at 3.99 per GPU; the
    # lower of the two middle offers prices the plan, and its instance is the host
    assert prob.prices[i, eight] == pytest.approx(3.99)
    assert prob.price_sources[i][eight] == (
        "lambda per GPU (8x H100 SXM instance) on-demand; the median-priced of 2 providers' 8-GPU offers (aws, lambda)"
    )
    assert prob.hosts.at(i, 8).id == "lambda/8x-NVIDIA-H100-SXM"
    assert np.isnan(prob.prices[i, one]) and not prob.hosts.offered()[i, one]  # neither rents 1 H100
    j = prob.gpus.index("T4")
    assert (prob.prices[j, one], prob.price_sources[j][one]) == (0.526, "aws g4dn.xlarge on-demand")
    assert not prob.hosts.offered()[j, eight]  # aws's T4 instance holds one GPU
    assert "MI300X" not in prob.gpus and "H200" not in prob.gpus  # neither aws nor lambda rents them


def test_spot_pricing_and_price_override():
    prob = validate(OptimizeRequest("alexnet", pricing="spot", prices=("MI300X=1.0",), gpu="H100_SXM,MI300X"))
    eight, one = PER_NODE.index(8), PER_NODE.index(1)
    # 8-GPU H100 nodes, each provider at its cheapest spot-or-on-demand offer of that size: coreweave
    # spot 19.71 / 8 = 2.46375, hyperstack 3.20, crusoe 3.90, lambda 3.99, runpod 3.99, gcp spot
    # a3-highgpu-8g 6.3262, aws p5 6.88, azure 12.29: the lower middle one of eight is lambda's 3.99
    assert prob.prices[0, eight] == pytest.approx(3.99)
    assert prob.price_sources[0][eight].startswith(
        "lambda per GPU (8x H100 SXM instance) on-demand; the median-priced of 8"
    )
    # one-GPU nodes: coreweave rents 8-GPU nodes, aws, azure and lambda 8-GPU instances; gcp's
    # a3-highgpu-1g spot 6.571 and the per-GPU quotes (hyperstack 3.20, crusoe 3.90, runpod 3.99)
    assert prob.prices[0, one] == pytest.approx(3.90)
    assert prob.price_sources[1] == ("your --price",) * len(PER_NODE)
    assert (prob.prices[1] == 1.0).all()
    gcp_coreweave = validate(
        OptimizeRequest("alexnet", pricing="spot", provider="gcp,coreweave", gpu="H100_SXM")
    )
    assert gcp_coreweave.prices[0, eight] == pytest.approx(19.71 / 8)  # the lower of 2.46 and 6.33
    assert gcp_coreweave.prices[0, one] == pytest.approx(6.571)  # only gcp rents one H100
    default = validate(OptimizeRequest("alexnet", pricing="spot"))
    spot = {r.device for r in catalog.price_rows() if r.pricing == "spot"}
    assert set(default.gpus) == {k for k in spot if not catalog.device(k).paleo}  # those with spot rows
    assert len(default.gpus) == 8 and {"L4", "A100_40GB", "MI300X", "RTX_A6000"} <= set(default.gpus)
    assert not np.isnan(default.prices[default.hosts.offered()]).any()


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
        (["--pricing", "reserved", "--provider", "aws"], ["no device has a reserved-1y price from aws"]),
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
    code = main(["optimize", "alexnet", "--budget", "8gpus", "--gpu", "H100_SXM", "--provider", "aws"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "price $6.88 per GPU-hour (aws p5.48xlarge on-demand)" in out
    assert "host: aws p5.48xlarge: 8 x H100_SXM, 192 vCPUs" in out
    # aws rents H100s eight to an instance: four of them fill no node
    code = main(["optimize", "alexnet", "--budget", "4gpus", "--gpu", "H100_SXM", "--provider", "aws"])
    _, err = capsys.readouterr()
    assert code == 1 and "no GPU count searched (up to 4) fills whole nodes" in err
    assert "H100_SXM in nodes of 8" in err


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
    each one used. With the default CPU data loader every GPU waits on the same loader, so the
    honest front (plans within 1% merged) is one plan; the GPUs' own speeds differ with the
    data already decoded (--data-loader none)."""
    from planner.pipeline import pareto

    data, files = pareto(
        OptimizeRequest("alexnet", budget=("16gpus",), objective="time,cost", data_loader="none")
    )
    gpus = {p["gpu"] for p in data["front"]}
    assert len(gpus) >= 2, gpus
    rows = catalog.price_rows()
    for p in data["front"]:
        # each plan pays an offer of its GPU at its node size: a price some provider charges
        offers = {
            round(r.usd_per_gpu_hour, 6) for r in rows if r.device == p["gpu"] and r.pricing == "on-demand"
        }
        assert round(p["usd_per_gpu_hour"], 6) in offers, p
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


# ---- reserved (committed-use) rows ------------------------------------------------------------


def test_row_counts_per_pricing_kind():
    """configs/prices.toml as shipped: the reserved rows are GCP's committed-use prices of
    g2-standard-4/-96 (L4), a2-highgpu-1g/-8g and a2-megagpu-16g (A100 40GB), a3-highgpu-1g/-8g
    (H100), one 1-year and one 3-year row each (pricing.yml of Cyclenerd/google-cloud-pricing-cost-
    calculator, generated 2026-07-30); no other provider's reserved rate with a term was found."""
    rows = catalog.price_rows()
    counts = {k: sum(r.pricing == k for r in rows) for k in pricing.PRICING_KINDS}
    assert counts == {"on-demand": 66, "spot": 15, "reserved-1y": 7, "reserved-3y": 7}
    reserved = [r for r in rows if r.pricing.startswith("reserved")]
    assert {r.provider for r in reserved} == {"gcp"}
    assert {r.device for r in reserved} == {"L4", "A100_40GB", "H100_SXM"}
    one = {(r.device, r.instance, r.region) for r in reserved if r.pricing == "reserved-1y"}
    three = {(r.device, r.instance, r.region) for r in reserved if r.pricing == "reserved-3y"}
    assert one == three and len(one) == 7


def _by_kind():
    """{(device, provider, instance, region): {pricing kind: USD per instance-hour}}."""
    out: dict = {}
    for r in catalog.price_rows():
        out.setdefault((r.device, r.provider, r.instance, r.region), {})[r.pricing] = r.usd_per_hour
    return out


def test_reserved_is_cheaper_than_on_demand_and_3y_than_1y():
    """For every instance with both rows: 3-year < 1-year < on-demand (a commitment buys a discount).
    GCP's a3-highgpu-1g on-demand row (10.9791, read without the bundled local SSD) is compared too."""
    pairs = 0
    for key, kinds in _by_kind().items():
        if "reserved-1y" in kinds and "reserved-3y" in kinds:
            assert kinds["reserved-3y"] < kinds["reserved-1y"], key
        for k in ("reserved-1y", "reserved-3y"):
            if k in kinds and "on-demand" in kinds:
                assert kinds[k] < kinds["on-demand"], (key, k)
                pairs += 1
    assert pairs == 14  # every reserved row has its instance's on-demand row


def test_gcp_reserved_rows_are_the_files_month_over_730_hours():
    """pricing.yml's month is 730 x hour (a2-highgpu-1g us-central1: hour 3.673385, month
    2681.57105); a reserved row is month_1y (or month_3y) / 730, the month figure quoted in its note."""
    assert 2681.57105 / 3.673385 == pytest.approx(730)
    for r in catalog.price_rows():
        if r.pricing.startswith("reserved"):
            key = "month_1y" if r.pricing == "reserved-1y" else "month_3y"
            month = float(r.note.split(f"{key} ")[1].split(" USD")[0])
            assert r.usd_per_hour == pytest.approx(month / 730, abs=0.01), r
            assert key in r.source and "us-central1" in r.source and r.date == "2026-07-30"


def test_reserved_gcp_picks_the_one_year_row():
    """H100 a3-highgpu-8g, us-central1: month_1y 44810.08066464 and month_3y 28370.99821392 USD for
    8 GPUs (a3-highgpu-1g gives the same per GPU: 5601.26008308 and 3546.37477674)."""
    eight, one = PER_NODE.index(8), PER_NODE.index(1)
    rate = validate(OptimizeRequest("alexnet", pricing="reserved", provider="gcp", gpu="H100_SXM"))
    assert rate.prices[0, eight] == pytest.approx(44810.08066464 / 730 / 8, rel=1e-6)  # 7.6730 per GPU-hour
    assert rate.price_sources[0][eight] == "gcp a3-highgpu-8g reserved-1y"
    assert rate.price_sources[0][one] == "gcp a3-highgpu-1g reserved-1y"
    three = validate(OptimizeRequest("alexnet", pricing="reserved-3y", provider="gcp", gpu="H100_SXM"))
    assert three.prices[0, eight] == pytest.approx(28370.99821392 / 730 / 8, rel=1e-6)  # 4.8580
    default = validate(OptimizeRequest("alexnet", pricing="reserved"))
    assert set(default.gpus) == {"L4", "A100_40GB", "H100_SXM"}
    # one-GPU L4 nodes: gcp g2-standard-4 reserved 325.07215214 / 730 = 0.44530 and aws g6.xlarge at
    # its on-demand 0.8048 (aws publishes no reserved rate): the lower middle offer is gcp's
    l4 = default.gpus.index("L4")
    assert default.prices[l4, one] == pytest.approx(325.07215214 / 730, rel=1e-6)
    assert default.hosts.at(l4, 1).id == "gcp/g2-standard-4"
    # H100 8-GPU nodes: gcp's 1-year rate (7.6730) sits among the other providers' on-demand
    # offers, so a reserved price never reads dearer than the on-demand one of the same size
    h100 = default.gpus.index("H100_SXM")
    on_demand = validate(OptimizeRequest("alexnet", gpu="H100_SXM"))
    assert default.prices[h100, eight] <= on_demand.prices[0, eight]


def test_optimize_with_reserved_pricing_runs_and_names_the_price(capsys, tmp_path):
    code = main(
        ["optimize", "alexnet", "--budget", "16gpus", "--pricing", "reserved-3y", "--provider", "gcp"]
        + ["--out", str(tmp_path / "o")]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "reserved-3y)" in out and "per GPU-hour (gcp " in out


def test_devices_priced_since_2026_11():
    """L40S on-demand, each provider's cheapest per GPU-hour: runpod 1.09, crusoe 1.50, nebius 1.55,
    coreweave 18.00 / 8 = 2.25; median = (1.50 + 1.55) / 2. RTX 4090: runpod Secure Cloud only."""
    prices = catalog.prices()
    assert prices["L40S"] == pricing.Price(
        pytest.approx(1.525), "median on-demand of 4 providers (coreweave, crusoe, nebius, runpod)"
    )
    assert prices["RTX_4090"] == pricing.Price(0.74, "runpod on-demand")
    assert prices["A100_80GB_PCIE"].usd_per_gpu_hour == pytest.approx((2.00 + 1.59) / 2)
    assert prices["MI325X"] == pricing.Price(1.95, "tensorwave on-demand")
    for unpriced in ("RTX_3090", "MI250", "MI250X"):
        assert unpriced not in prices


# ---- every spot and reserved rate against its provider's on-demand rate --------------------------


def test_every_spot_and_reserved_row_has_its_instances_on_demand_row_and_is_not_dearer():
    """Each spot and reserved row of the shipped table is checked against the on-demand row of the
    same device, provider, instance and region (one cited rate each): it exists and is not dearer."""
    checked = 0
    for key, kinds in _by_kind().items():
        for kind, usd in kinds.items():
            if kind == "on-demand":
                continue
            assert "on-demand" in kinds, f"{kind} row without its on-demand row: {key}"
            assert usd <= kinds["on-demand"], (key, kind, usd, kinds["on-demand"])
            checked += 1
    assert checked == 15 + 7 + 7  # every spot and reserved row


@pytest.mark.parametrize("keep", [None, ("gcp",), ("aws", "gcp"), ("coreweave", "gcp", "lambda")])
def test_a_term_price_is_never_dearer_than_on_demand_from_the_same_providers(keep):
    """Per device and provider filter: spot and reserved medians run over the same providers as the
    on-demand median, each provider at most its on-demand price, so the median is at most it too."""
    rows = catalog.price_rows()
    compared = 0
    for device in dict.fromkeys(r.device for r in rows):
        on_demand = choose(rows, device, "on-demand", keep)
        for kind in ("spot", "reserved-1y", "reserved-3y"):
            term = choose(rows, device, kind, keep)
            if term is None:
                continue
            assert on_demand is not None, (device, kind, keep)
            assert term.usd_per_gpu_hour <= on_demand.usd_per_gpu_hour, (device, kind, keep, term, on_demand)
            compared += 1
    assert compared > 0


def test_a_provider_without_the_term_counts_at_its_on_demand_price():
    """A median of the term over the providers that publish it alone compared a GCP-only rate with a
    market median; the providers counted are the on-demand ones."""
    rows = [row("a", 10.0), row("a", 7.0, kind="reserved-1y"), row("b", 4.0), row("c", 5.0)]
    # on-demand: median(10, 4, 5) = 5; reserved: a 7 (its term), b 4, c 5 (on-demand) -> 5, not 7
    assert choose(rows, "A100_80GB").usd_per_gpu_hour == 5.0
    got = choose(rows, "A100_80GB", "reserved-1y")
    assert got.usd_per_gpu_hour == 5.0
    assert got.source == (
        "median of 3 providers (reserved-1y: a; on-demand where no cheaper reserved-1y rate is published: b, c)"
    )
    assert choose(rows, "A100_80GB", "spot") is None  # nobody publishes spot: the device is not offered
