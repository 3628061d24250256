"""Token-native transformer requests: --tokens, --global-batch-tokens, --seq-len on optimize, the
published or default global batch in tokens, and the unit a net without a training length is
costed per (planner/request/tokens.py, planner/request/optimize.py)."""

from __future__ import annotations

import json
import math

import pytest

from planner.cli import main
from planner.errors import BadInput
from planner.request.tokens import (
    GPT3_BATCH_TOKENS,
    default_batch_tokens,
    parse_tokens,
    power_of_two_sequences,
    sequences,
)


@pytest.mark.parametrize(
    "text, value",
    [
        ("15T", 15e12),
        ("2e12", 2e12),
        ("300B", 300e9),
        ("4M", 4e6),
        ("1,000,000", 1e6),
        ("1.5t", 1.5e12),
        ("7 tokens", 7.0),
        (2e12, 2e12),
    ],
)
def test_token_counts_parse_in_the_units_people_write(text, value):
    assert parse_tokens(text, "--tokens") == value


@pytest.mark.parametrize("text", ["15Q", "0", "-1", "nan", "inf", "1e30", "", "T", "1e17.5"])
def test_bad_token_counts_name_the_option_and_the_forms(text):
    with pytest.raises(BadInput, match="--tokens"):
        parse_tokens(text, "--tokens")


def test_default_batch_is_gpt3_table_2_1_for_the_nearest_size():
    # Brown et al. 2020, Table 2.1: each GPT-3 size maps to its own published batch in tokens.
    for params, batch in GPT3_BATCH_TOKENS:
        assert default_batch_tokens(params) == batch
    assert default_batch_tokens(70.6e9) == 3.2e6  # nearer 175B than 13B in log
    assert default_batch_tokens(8.0e9) == 2e6
    assert default_batch_tokens(46.7e9) == 2e6  # nearer 13B
    # GPT-3 Small: 0.5M tokens = 256 sequences of 2,048; 3.2M tokens at 8,192 -> 512 sequences
    assert power_of_two_sequences(0.5e6, 2048) == 256
    assert power_of_two_sequences(3.2e6, 8192) == 512
    assert sequences(4e6, 8192) == 488 and sequences(10, 8192) == 1


def _json(capsys, *args):
    assert main(["optimize", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_tokens_set_the_length_and_time_follows(capsys, in_tmp):
    d = _json(
        capsys,
        "mixtral-8x7b",
        "--budget",
        "64gpus",
        "--gpu",
        "H100_SXM",
        "--tokens",
        "1T",
        "--seq-len",
        "4096",
    )
    b = d["best"]
    assert b["training_tokens"] == 1e12 and b["tokens_basis"] == "--tokens" and not b["per_token_unit"]
    assert b["seq_len"] == 4096
    assert b["global_batch_tokens"] == b["global_batch"] * 4096
    steps = math.ceil(math.ceil(1e12 / 4096) / b["global_batch"])
    assert b["useful_time_s"] == pytest.approx(steps * b["iteration_ms"] / 1e3, rel=1e-9)
    assert b["time_to_train_s"] == pytest.approx(b["useful_time_s"] / b["goodput"], rel=1e-12)
    assert b["gpu_hours"] == pytest.approx(b["gpus"] * b["time_to_train_s"] / 3600, rel=1e-12)
    assert b["tokens_per_s_per_gpu"] == pytest.approx(b["tokens_per_s"] / b["gpus"], rel=1e-12)
    # Mixtral publishes no batch: GPT-3's for the nearest size (13B: 2M tokens) as 512 x 4,096
    assert b["global_batch"] == 512 and "Table 2.1" in b["global_batch_source"]


def test_without_a_length_the_unit_is_stated(capsys, in_tmp):
    assert (
        main(["optimize", "mixtral-8x7b", "--budget", "64gpus", "--gpu", "H100_SXM", "--seq-len", "4096"])
        == 0
    )
    out = capsys.readouterr().out
    assert "time per 1T tokens" in out and "set --tokens" in out
    d = _json(capsys, "mixtral-8x7b", "--budget", "64gpus", "--gpu", "H100_SXM", "--seq-len", "4096")
    assert d["best"]["per_token_unit"] is True and d["best"]["training_tokens"] == 1e12


def test_published_length_and_global_batch_tokens(capsys, in_tmp):
    d = _json(capsys, "llama3-8b", "--budget", "64gpus", "--gpu", "H100_SXM", "--global-batch-tokens", "4M")
    b = d["best"]
    assert b["training_tokens"] == pytest.approx(15e12, rel=1e-9)  # Llama 3: over 15T tokens
    assert b["global_batch"] == 488 and b["global_batch_source"] == "--global-batch-tokens"
    assert "15T tokens" in _text(capsys, "llama3-8b", "--budget", "64gpus", "--gpu", "H100_SXM")


def _text(capsys, *args):
    assert main(["optimize", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["alexnet", "--budget", "16gpus", "--tokens", "1T"], "--tokens is for transformers"),
        (["llama3-8b", "--budget", "16gpus", "--tokens", "1T", "--dataset-size", "5"], "give one"),
        (
            ["llama3-8b", "--budget", "16gpus", "--global-batch", "64", "--global-batch-tokens", "4M"],
            "give one",
        ),
        (
            ["llama3-8b", "--budget", "16gpus", "--global-batch-tokens", "lots"],
            "--global-batch-tokens 'lots'",
        ),
    ],
)
def test_bad_token_requests_are_one_line_exit_2(capsys, in_tmp, args, message):
    assert main(["optimize", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_sweep_specs_take_tokens_sequence_and_batch_in_tokens(tmp_path):
    from planner.sweep.spec import load

    path = tmp_path / "spec.yaml"
    path.write_text(
        "name: tok\ngrid:\n  tokens: ['1T', 2e12]\noptions:\n  net: llama3-8b\n  budget: 16gpus\n"
        "  gpu: H100_SXM\n  seq_len: 4096\n  global_batch_tokens: 2M\n"
    )
    cells = load(path, tmp_path / "out").cells()
    assert [c.request.tokens for c in cells] == ["1T", "2e12"]  # YAML 1.1 reads 2e12 as text
    assert {(c.request.seq_len, c.request.global_batch_tokens) for c in cells} == {(4096, "2M")}


@pytest.mark.parametrize("value", ["0", "-5", "99999999999"])
def test_bad_sequence_lengths_are_refused_not_defaulted(capsys, value):
    for cmd in (["estimate", "llama3-8b"], ["optimize", "llama3-8b", "--budget", "8gpus"]):
        assert main([*cmd, "--seq-len", value]) == 2
        err = capsys.readouterr().err
        assert f"--seq-len must be an integer from 1 to 16,777,216, got {value}" in err
