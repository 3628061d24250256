"""A net's published training run: the ``training`` section of a spec file, validated and typed.

:mod:`planner.catalog` reads the spec and hands it to :func:`parse`; this module checks each key
(a malformed value is a one-line :class:`CatalogError` naming the net, the key and the value) and
that the keys agree with each other and with the model:

* ``seq_len`` (tokens per training sequence) equals the model's ``seq_len``: a sample of a
  transformer spec is one sequence of that length;
* ``dataset_size`` (sequences per epoch) is ``ceil(tokens / (epochs x seq_len))``;
* ``global_batch`` (sequences) times ``seq_len`` is ``global_batch_tokens`` within 2.5%: papers
  round the tokens per step (GPT-3's "3.2M" is 1,562.5 sequences of 2,048 tokens; BERT's
  "128,000 tokens/batch" is 256 x 512 = 131,072).

Every number carries its source in the file (``source`` for the dataset and tokens,
``global_batch_source``, ``global_batch_tokens_source``); ``training_note`` says what was not
published.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import CatalogError

_POSITIVE_INT = ("dataset_size", "global_batch", "seq_len", "global_batch_tokens", "tokens")
_POSITIVE_NUMBER = ("epochs",)
_TEXT = (
    "dataset",
    "source",
    "global_batch_source",
    "global_batch_tokens_source",
    "training_note",
    "optimizer",
)
OPTIMIZERS = ("sgd", "momentum", "adam")  # a published recipe's optimizer (AdamW keeps Adam's state)
KEYS = _POSITIVE_INT + _POSITIVE_NUMBER + _TEXT
# a published tokens-per-step figure may be rounded to two or three significant digits
BATCH_TOKENS_TOLERANCE = 0.025
# which key's citation a number needs
_NEEDS_SOURCE = {
    "tokens": "source",
    "dataset_size": "source",
    "global_batch": "global_batch_source",
    "global_batch_tokens": "global_batch_tokens_source",
}


@dataclass(frozen=True)
class TrainingDefaults:
    """A net's published training run; None where the spec (or its source) gives no value."""

    net: str
    seq_len: int | None = None  # tokens per training sequence (transformers)
    tokens: int | None = None  # total training tokens, all epochs
    dataset_size: int | None = None  # samples (sequences, images) per epoch
    epochs: float | None = None
    global_batch: int | None = None  # samples per optimizer step
    global_batch_tokens: int | None = None  # tokens per optimizer step
    dataset: str = ""
    source: str = ""  # where the dataset, tokens and epochs were read (URL, date)
    global_batch_source: str = ""
    global_batch_tokens_source: str = ""
    note: str = ""  # what was not published, and what the defaults do instead
    optimizer: str = ""  # the published recipe's optimizer, cited in ``source``; "" when not stated


def _bad(net: str, key: str, value, want: str) -> CatalogError:
    return CatalogError(f"net '{net}': training.{key} = {value!r} (want {want})")


def _number(net: str, key: str, value, integral: bool) -> float | int:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf
    if not ok or (integral and value != int(value)):
        raise _bad(net, key, value, "a positive whole number" if integral else "a positive finite number")
    return int(value) if integral else float(value)


def _values(net: str, training) -> dict:
    if not isinstance(training, dict):
        raise CatalogError(f"net '{net}': training must be an object, got {type(training).__name__}")
    unknown = sorted(set(training) - set(KEYS))
    if unknown:
        raise CatalogError(
            f"net '{net}': training has unknown key(s) {', '.join(unknown)} (valid: {', '.join(KEYS)})"
        )
    out: dict = {}
    for key, value in training.items():
        if key in _TEXT:
            if not isinstance(value, str) or not value.strip():
                raise _bad(net, key, value, "a non-empty string")
            out[key] = value
        else:
            out[key] = _number(net, key, value, key in _POSITIVE_INT)
    if out.get("optimizer", OPTIMIZERS[0]) not in OPTIMIZERS:
        raise _bad(net, "optimizer", out["optimizer"], f"one of {', '.join(OPTIMIZERS)}")
    for key, cite in _NEEDS_SOURCE.items():
        if key in out and cite not in out:
            raise CatalogError(f"net '{net}': training.{key} = {out[key]} has no training.{cite}")
    return out


def _check_consistent(net: str, v: dict, model_seq: int | None) -> None:
    seq = v.get("seq_len")
    if seq is not None and model_seq is not None and seq != model_seq:
        raise _bad(net, "seq_len", seq, f"the model's seq_len, {model_seq}")
    if "tokens" in v and "dataset_size" in v and seq:
        want = math.ceil(v["tokens"] / (v.get("epochs", 1) * seq))
        if v["dataset_size"] != want:
            raise _bad(net, "dataset_size", v["dataset_size"], f"ceil(tokens / (epochs x seq_len)) = {want}")
    if "global_batch" in v and "global_batch_tokens" in v and seq:
        ratio = v["global_batch"] * seq / v["global_batch_tokens"]
        if abs(ratio - 1) > BATCH_TOKENS_TOLERANCE:
            raise _bad(
                net,
                "global_batch_tokens",
                v["global_batch_tokens"],
                f"global_batch x seq_len = {v['global_batch'] * seq} within {BATCH_TOKENS_TOLERANCE:.1%}",
            )


def parse(net: str, spec: dict) -> TrainingDefaults:
    """The validated training defaults of a parsed spec (empty when it has no training section);
    ``seq_len`` defaults to the model's."""
    model = spec.get("model") if isinstance(spec, dict) else None
    model_seq = model.get("seq_len") if isinstance(model, dict) else None
    if "training" not in spec:
        return TrainingDefaults(net, seq_len=model_seq)
    v = _values(net, spec["training"])
    _check_consistent(net, v, model_seq)
    seq = v.get("seq_len", model_seq)
    if seq is None and ("tokens" in v or "global_batch_tokens" in v):
        raise CatalogError(f"net '{net}': training gives tokens but no seq_len (and the spec has no model)")
    return TrainingDefaults(
        net,
        seq_len=seq,
        tokens=v.get("tokens"),
        dataset_size=v.get("dataset_size"),
        epochs=v.get("epochs"),
        global_batch=v.get("global_batch"),
        global_batch_tokens=v.get("global_batch_tokens"),
        dataset=v.get("dataset", ""),
        source=v.get("source", ""),
        global_batch_source=v.get("global_batch_source", ""),
        global_batch_tokens_source=v.get("global_batch_tokens_source", ""),
        note=v.get("training_note", ""),
        optimizer=v.get("optimizer", ""),
    )


def checked(net: str, spec: dict) -> dict:
    """``spec`` unchanged once its training section parses (a CatalogError otherwise)."""
    parse(net, spec)
    return spec
