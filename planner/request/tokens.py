"""Token counts of transformer requests: ``--tokens``, ``--global-batch-tokens`` and the defaults
that apply when neither the request nor the net states them.

A transformer trains for a number of tokens, not epochs: the training length is tokens, the
global batch is tokens per optimizer step, and both become sequences of the plan's length.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from planner import catalog
from planner.errors import BadInput

TOKEN_FORMS = "a token count such as 15T, 300B, 4M, 2e12 or 1000000"
# Bound of a token count: 1e17 tokens is 6,000x Llama 3's 15.6T (the largest published run);
# anything above it is a typo, and larger values would overflow the step counts downstream.
MAX_TOKENS = 1e17
# A transformer that publishes no training length is costed per this many tokens, and says so.
TOKENS_UNIT = 1e12
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_COUNT = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([kmbgtp]?)\s*(?:tokens?)?\s*$", re.IGNORECASE)

# Brown et al. 2020, "Language Models are Few-Shot Learners" (arXiv:2005.14165), Table 2.1:
# the batch size in tokens of each GPT-3 model size (parameters, tokens per step), read
# 2026-11-24. The one published rule of batch size against model size for dense decoders.
GPT3_BATCH_TOKENS = (
    (125e6, 0.5e6),
    (350e6, 0.5e6),
    (760e6, 0.5e6),
    (1.3e9, 1e6),
    (2.7e9, 1e6),
    (6.7e9, 2e6),
    (13e9, 2e6),
    (175e9, 3.2e6),
)


def parse_tokens(raw: str | float | int | None, option: str) -> float | None:
    """'15T' -> 1.5e13 tokens, '2e12' -> 2e12, '4M' -> 4e6 (decimal suffixes); None stays None."""
    if raw is None:
        return None
    m = _COUNT.match(str(raw).replace(",", "").replace("_", ""))
    if not m:
        raise BadInput(f"{option} '{raw}' is not {TOKEN_FORMS}")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not (1 <= value <= MAX_TOKENS):
        raise BadInput(f"{option} '{raw}' must be between 1 and {MAX_TOKENS:.0e} tokens")
    return value


def sequences(tokens: float, seq_len: int) -> int:
    """Whole sequences of ``seq_len`` tokens in ``tokens`` (at least one, rounded to nearest)."""
    return max(1, round(tokens / seq_len))


def default_batch_tokens(params: float) -> float:
    """Tokens per step of the GPT-3 model nearest in size (log scale) to ``params``."""
    return min(GPT3_BATCH_TOKENS, key=lambda row: abs(math.log(row[0] / params)))[1]


def power_of_two_sequences(tokens: float, seq_len: int) -> int:
    """The power-of-two sequence count nearest (log scale) to ``tokens`` of ``seq_len``
    (GPT-3's 0.5M-token batch is 256 sequences of 2,048: batches are powers of two)."""
    return 2 ** max(0, round(math.log2(max(tokens / seq_len, 1.0))))


@dataclass(frozen=True)
class Tokens:
    """How long a transformer trains and how large its step is, with where each comes from."""

    total: float  # training tokens
    basis: str  # where ``total`` comes from, in words
    unit: bool  # True: no training length is known; time and cost are per TOKENS_UNIT tokens
    batch_source: str  # where the global batch comes from, in words


def llm_tokens(
    tokens: str | None, dataset_size: int | None, training: dict, seq: int, spec_seq: int
) -> tuple[float, str, bool]:
    """Training tokens, where they come from, and whether they are only the per-1e12 unit:
    --tokens, --dataset-size sequences of ``seq``, the net's published tokens or training set
    (sequences of the spec's own length ``spec_seq``), else :data:`TOKENS_UNIT`."""
    if tokens is not None:
        return parse_tokens(tokens, "--tokens"), "--tokens", False
    if dataset_size is not None:
        return float(dataset_size) * seq, f"--dataset-size {dataset_size:,} sequences", False
    if "tokens" in training:
        return float(training["tokens"]), "the net's published training length", False
    if "dataset_size" in training:
        return float(training["dataset_size"]) * spec_seq, "the net's published training length", False
    return TOKENS_UNIT, "no training length is known: per 1e12 tokens; set --tokens", True


def llm_global_batch(
    global_batch: int | None,
    global_batch_tokens: str | None,
    training: dict,
    params: float,
    seq: int,
    spec_seq: int,
) -> tuple[int, str]:
    """Sequences of ``seq`` tokens per optimizer step, and where that number comes from:
    --global-batch, --global-batch-tokens, the net's published batch (tokens, or sequences of
    the spec's own length: its tokens per step are kept), else GPT-3's batch for a model of
    ``params`` parameters (Brown et al. 2020, Table 2.1) in a power-of-two count of sequences."""
    if global_batch_tokens is not None:
        batch = sequences(parse_tokens(global_batch_tokens, "--global-batch-tokens"), seq)
        if global_batch not in (None, batch):  # a saved request carries both when they agree
            raise BadInput("--global-batch and --global-batch-tokens both set the global batch: give one")
        return batch, "--global-batch-tokens"
    if global_batch is not None:
        return global_batch, "--global-batch"
    if "global_batch_tokens" in training:
        return sequences(float(training["global_batch_tokens"]), seq), "the net's published batch"
    if "global_batch" in training:
        return sequences(float(training["global_batch"]) * spec_seq, seq), "the net's published batch"
    tokens = default_batch_tokens(params)
    return power_of_two_sequences(tokens, seq), (
        f"GPT-3's batch for a model of its size, {tokens / 1e6:g}M tokens, in a power-of-two count of "
        "sequences: Brown et al. 2020, Table 2.1; set --global-batch-tokens"
    )


def spec_seq_len(net: str, rules: str, requested: int | None, meta: dict) -> int:
    """The sequence length the net's spec states (its published batch and training set count
    sequences of this length), whatever --seq-len the request sets: the training section's, else
    the spec's model (read again without --seq-len only when one was given). ``meta``: the
    built net's."""
    stated = meta.get("training", {}).get("seq_len")
    if stated is not None:
        return int(stated)
    if requested is None:
        return int(meta["model"]["seq_len"])
    return int(catalog.load_net(net, rules).meta["model"]["seq_len"])
