"""Property-based fuzzing of the command line's numbers and lists, storage URLs and output
paths, and of the Python API (planner/api): every input answers or is refused in one line
(tests/fuzz_contract.py), within the bounds of planner/request/bounds.py."""

from __future__ import annotations

import math

import pytest
from fuzz_contract import FUZZ, files_under, fresh, run_cli
from hypothesis import given
from hypothesis import strategies as st

import planner
from planner.errors import PlannerError
from planner.request import bounds

# Numbers as a user (or an attacker) types them: huge, negative, zero, non-finite, fractional,
# with units, or not numbers at all.
NUMBER_TEXT = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e308", "99999999999999999999", "1_000", "0x10", ""]),
    st.text(alphabet="0123456789-.,e+ gpusGPUS$hmd", max_size=12),
)
INT_LIST_TEXT = st.one_of(
    st.lists(st.integers(min_value=-5, max_value=10**25), min_size=1, max_size=6).map(
        lambda xs: ",".join(map(str, xs))
    ),
    st.tuples(st.integers(-3, 10**6), st.integers(-3, 10**25)).map(lambda t: f"{t[0]}-{t[1]}"),
    st.text(alphabet="0123456789,- ", max_size=16),
)

ESTIMATE_NUMBERS = [
    "--batch",
    "--gpus-per-node",
    "--accumulation",
    "--ppp-comp",
    "--seq-len",
    "--memory-headroom",
    "--pue",
]
OPTIMIZE_NUMBERS = ["--budget", "--trials", "--seed", "--timeout", "--global-batch", "--deadline", "--epochs"]


@FUZZ
@given(option=st.sampled_from(ESTIMATE_NUMBERS), value=NUMBER_TEXT)
def test_estimate_numbers(capsys, option, value):
    net = "gpt2-xl" if option == "--seq-len" else "alexnet"
    run_cli(capsys, ["estimate", net, "--workers", "1,8", "--device", "V100", option, value])


@FUZZ
@given(workers=INT_LIST_TEXT)
def test_estimate_worker_lists(capsys, workers):
    run_cli(capsys, ["estimate", "alexnet", "--device", "V100", "--workers", workers])


@FUZZ
@given(option=st.sampled_from(OPTIMIZE_NUMBERS), value=NUMBER_TEXT)
def test_optimize_numbers(capsys, tmp_path, option, value):
    tmp_path = fresh(tmp_path)
    argv = ["optimize", "alexnet", "--gpu", "T4", "--trials", "20", "--out", tmp_path / "run", option, value]
    if option != "--budget":
        argv += ["--budget", "8gpus"]
    code, _, _ = run_cli(capsys, argv)
    if code != 0:
        assert not files_under(tmp_path)  # nothing written


@FUZZ
@given(axis=st.sampled_from(["--accumulation", "--tp", "--pp", "--microbatch"]), value=INT_LIST_TEXT)
def test_optimize_axis_lists(capsys, tmp_path, axis, value):
    tmp_path = fresh(tmp_path)
    net = "alexnet" if axis == "--accumulation" else "gpt2-xl"
    argv = ["optimize", net, "--gpu", "H100_SXM", "--budget", "16gpus", "--out", tmp_path / "r", axis, value]
    code, _, _ = run_cli(capsys, argv)
    if code != 0:
        assert not files_under(tmp_path)


@FUZZ
@given(price=NUMBER_TEXT, owned=NUMBER_TEXT)
def test_prices_and_owned(capsys, tmp_path, price, owned):
    tmp_path = fresh(tmp_path)
    argv = ["optimize", "alexnet", "--budget", "8gpus", "--gpu", "T4,L4", "--objective", "cost"]
    argv += ["--price", f"T4={price}", "--owned", f"L4:{owned}", "--out", tmp_path / "r"]
    code, out, _ = run_cli(capsys, argv)
    if code == 0:  # an accepted price is a finite positive number, and the answer has a cost
        assert math.isfinite(float(price.replace("_", ""))) and "cost $" in out


@FUZZ
@given(
    url=st.one_of(
        st.text(max_size=30),
        st.sampled_from(["journal:", "sqlite://", "sqlite:////proc/x/db", "postgresql://u@127.0.0.1:1/x"]),
        st.text(alphabet="abc/:.", max_size=20).map(lambda s: "journal:" + s),
    )
)
def test_storage_urls(capsys, tmp_path, monkeypatch, url):
    tmp_path = fresh(tmp_path)
    monkeypatch.chdir(tmp_path)  # a journal or sqlite file the URL names lands here
    argv = ["optimize", "alexnet", "--budget", "4gpus", "--gpu", "T4", "--trials", "8", "--storage", url]
    run_cli(capsys, [*argv, "--study-name", "s"])


@FUZZ
@given(
    out=st.one_of(
        st.sampled_from(["/proc/x", "/proc/self/x/y", "/sys/x", "/dev/null/x", "", ".", "plan.json"]),
        st.text(alphabet="abc/._-", min_size=1, max_size=20),
    )
)
def test_output_paths(capsys, tmp_path, monkeypatch, out):
    tmp_path = fresh(tmp_path)
    monkeypatch.chdir(tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"net": "alexnet", "device": "T4", "workers": 8, "gpus_per_node": 8, "batch_per_worker": 64,'
        ' "parallel": "data", "scheme": "ring", "precision": "fp16", "network": "eth100"}'
    )
    before = files_under(tmp_path)
    code, _, _ = run_cli(capsys, ["launch", plan, "--target", "torchrun", "--out", out])
    if code != 0:
        assert files_under(tmp_path) == before


API_VALUES = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.none(),
    st.lists(st.integers(-3, 10**6), max_size=3),
)


@FUZZ
@given(
    key=st.sampled_from(["workers", "batch", "tp", "pp", "seq_len", "global_batch", "ppp_comp", "pue"]),
    value=API_VALUES,
)
def test_api_estimate(key, value):
    try:
        planner.estimate("gpt2-xl", device="H100_SXM", **{key: value})
    except PlannerError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(
    key=st.sampled_from(
        ["budget", "trials", "seed", "timeout", "global_batch", "deadline", "price", "max_global_batch"]
    ),
    value=API_VALUES,
)
def test_api_optimize(key, value):
    options = {"budget": "8gpus", "gpu": "T4", "trials": 20}
    if key == "price":
        options["price"] = [f"T4={value}"]
    else:
        options[key] = value
    try:
        planner.optimize("alexnet", **options)
    except PlannerError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("budget", ["16384gpus", "16385gpus", "99999999999999999999gpus"])
def test_the_gpu_budget_is_bounded(capsys, tmp_path, budget):
    """At the bound the answer comes within the stated time and memory; above it, one line."""
    tmp_path = fresh(tmp_path)
    code, _, err = run_cli(capsys, ["optimize", "alexnet", "--budget", budget, "--out", tmp_path / "r"])
    if budget == "16384gpus":
        assert code == 0
    else:
        assert code == 2 and f"{bounds.MAX_GPUS:,}" in err and budget in err


# Named choices as a user types them: near misses of the valid names, empty, case and separator
# variants, leading dashes, control characters, very long names.
NAME_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            " ",
            "-",
            "--",
            "tp-cp-ep-pp-dp ",
            "TP-CP-EP-PP-DP",
            "tp-cp-pp-dp",
            "meta",
            "1f1b,zb1p",
            "nonblocking2",
            "flash ",
            "FLASH",
            "fused",
        ]
    ),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.,/0123456789", min_size=1, max_size=300),
)
# (option, the LLM plan it is given to: one that can take every valid value)
NAMED = {
    "--rank-order": ["--tp", "2", "--pp", "2"],
    "--fabric": ["--tp", "2", "--pp", "2"],
    "--pp-schedule": ["--tp", "2", "--pp", "2", "--stack", "fsdp"],
    "--stack": ["--tp", "2"],
    "--cp-comm": ["--cp", "2"],
    "--attention": ["--tp", "2"],
}


@FUZZ
@given(option=st.sampled_from(sorted(NAMED)), value=NAME_TEXT)
def test_estimate_named_choices(capsys, option, value):
    argv = ["estimate", "llama3-8b", "--device", "H100_SXM", "--workers", "16", "--gpus-per-node", "8"]
    run_cli(capsys, [*argv, *NAMED[option], option, value])
