"""The bounds every input is held to, in one place, and the checks that apply them.

Each bound keeps one command within the memory and time the README states (a few GB, a
minute on one core) and sits far above any real request: the model bounds are at least 8x the
largest value in the zoo (``tests/test_bounds.py`` checks every zoo file against them). A value
outside its bound is refused before anything is built, in one line naming the field, the value
and the bound (:class:`~planner.errors.BadInput`, exit 2).
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from planner.errors import BadInput

# GPUs in one plan: 16,384 is the largest published training run we know of, Llama 3 405B's
# pretraining on "up to 16K" H100 (Llama Team, "The Llama 3 Herd of Models", arXiv 2407.21783,
# 2024, section 3.3; summary read at https://ai-papers.xuzou.cn/papers/llama3_2024 on
# 2026-11-24), 16,384 GPUs in the layouts P. Balaji showed at SC'24 ("Herding Llamas", as
# tabulated at https://glennklockwood.com/garden/llama-3.1, read 2026-11-24). A budget at this
# bound answers in about 10 s and under 1 GB (the count axis grows linearly with the budget:
# whole 8-GPU nodes).
MAX_GPUS = 16_384
MAX_BATCH = 2**20  # samples (or sequences) per GPU or per step: 128x ImageNet's 8,192 cap
MAX_GLOBAL_BATCH = 2**24  # samples per optimizer step
MAX_TRIALS = 1_000_000  # Optuna trials of one study
MAX_TIMEOUT_S = 30 * 86_400.0  # --timeout: 30 days
MAX_SEED = 2**32 - 1  # numpy and Optuna seeds are 32-bit unsigned
MAX_EPOCHS = 1e6
MAX_DATASET = 10**15  # samples per epoch
MAX_ALTERNATIVES = 1_000  # next-best rows shown
MAX_DEGREE = MAX_GPUS  # tp, pp, ep, interleave, accumulation, microbatch: at most the GPUs
MAX_PORT = 65_535
MAX_USD_PER_GPU_HOUR = 1e4  # --price, --owned rates
PRICES = f"(a finite number of USD up to {MAX_USD_PER_GPU_HOUR:,.0f})"
MAX_USD_PER_KWH = 1e3  # --electricity

# Transformer shapes (model description or Hugging Face config.json): the zoo's largest are
# 128 layers, d_model 25,600, 160 heads, d_ff 102,400, vocabulary 151,936, 128 experts,
# sequence 32,768 (configs/nets/).
MAX_LAYERS = 4_096
MAX_HIDDEN = 2**20  # d_model and head_dim x heads
MAX_FFN = 2**22
MAX_HEADS = 2**14
MAX_VOCAB = 2**24
MAX_EXPERTS = 4_096
MAX_SEQ_LEN = 2**24  # as costs.specs.transformer_spec.MAX_SEQ_LEN
MAX_SPEC_LAYERS = 100_000  # layers of a layer-by-layer spec file

# Files: size, nesting, YAML aliases, CSV fields.
MAX_FILE_BYTES = 16 * 2**20  # any input file; the largest shipped config is 0.4 MB
MAX_NESTING = 64  # JSON / YAML / TOML depth; the shipped files nest at most 6 deep
MAX_YAML_NODES = 100_000  # YAML values after alias expansion (a "billion laughs" stops here)
MAX_CSV_FIELD = 2**20  # bytes in one CSV cell
MAX_CSV_ROWS = 1_000_000
# `planner pareto` keeps every plan it scores (trials.csv lists them), about 3 KB and 60 us a
# plan: alexnet at 256 GPUs (473,808 valid plans) takes 27-34 s and 1.45 GB, llama3-8b at 16,384
# GPUs (348,048) 43 s and 1.1 GB, while alexnet at 512 GPUs (928,464) took 70 s and 2.8 GB,
# over what one command may use (2 GB, 60 s)
MAX_PARETO_PLANS = 500_000
MAX_GRID_CELLS = 1_024  # studies in one sweep (each cell is validated by building its request)
MAX_LIST = 4_096  # values in one comma-separated option or sweep-grid list


def bad(field: str, value: Any, bound: str) -> BadInput:
    """The one-line refusal: ``field bound, got value``."""
    shown = repr(value) if isinstance(value, str) else f"{value}"
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return BadInput(f"{field} {bound}, got {shown}")


def price_ok(usd: float, *, zero: bool) -> bool:
    """A price per GPU-hour: finite, positive (or zero when ``zero``), at most the bound."""
    return (0 <= usd if zero else 0 < usd) and usd <= MAX_USD_PER_GPU_HOUR


def check_int(field: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi] (bools and non-integers refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise bad(field, value, f"must be an integer from {lo:,} to {hi:,}")
    if not lo <= value <= hi:
        raise bad(field, value, f"must be an integer from {lo:,} to {hi:,}")
    return value


def check_float(field: str, value: Any, lo: float, hi: float, *, open_lo: bool = False) -> float:
    """``value`` as a finite float in [lo, hi] (or (lo, hi] with ``open_lo``); NaN and inf refused."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (lo < value if open_lo else lo <= value) and value <= hi
    if not ok:
        if open_lo and lo == 0:
            raise bad(field, value, f"must be a positive finite number up to {hi:g}")
        raise bad(field, value, f"must be a finite number in [{lo:g}, {hi:g}]")
    return float(value)


# Request field -> (option, low, high); ints checked as ints, floats as finite floats.
# Fields that parsers already bound (budget, deadline, tokens, headroom, PUE, grid intensity,
# electricity: planner/energy.py) are not repeated here.
REQUEST_INTS: dict[str, tuple[str, int, int]] = {
    "dataset_size": ("--dataset-size", 1, MAX_DATASET),
    "global_batch": ("--global-batch", 1, MAX_GLOBAL_BATCH),
    "seq_len": ("--seq-len", 1, MAX_SEQ_LEN),
    "max_global_batch": ("--max-global-batch", 1, MAX_GLOBAL_BATCH),
    "min_global_batch": ("--min-global-batch", 1, MAX_GLOBAL_BATCH),
    "trials": ("--trials", 1, MAX_TRIALS),
    "seed": ("--seed", 0, MAX_SEED),
    "alternatives": ("--alternatives", 0, MAX_ALTERNATIVES),
    "batch": ("--batch", 1, MAX_BATCH),
    "gpus_per_node": ("--gpus-per-node", 1, MAX_GPUS),
    "accumulation": ("--accumulation", 1, MAX_DEGREE),
    "tp": ("--tp", 1, MAX_DEGREE),
    "pp": ("--pp", 1, MAX_DEGREE),
    "ep": ("--ep", 1, MAX_DEGREE),
    "interleave": ("--interleave", 1, MAX_DEGREE),
    "cp": ("--cp", 1, MAX_DEGREE),
    "microbatch": ("--microbatch", 1, MAX_BATCH),
    "zero": ("--zero", 0, 3),
    "nics": ("--nics", 1, 1_024),  # NICs per node (planner.hosts.MAX_NICS)
}
REQUEST_FLOATS: dict[str, tuple[str, float, float]] = {
    "epochs": ("--epochs", 0.0, MAX_EPOCHS),
    "timeout": ("--timeout", 0.0, MAX_TIMEOUT_S),
    "ppp_comp": ("--ppp-comp", 0.0, 1.0),
    "ppp_comm": ("--ppp-comm", 0.0, 1.0),
    "cpu_cores_per_gpu": ("--cpu-cores-per-gpu", 0.0, 1_024.0),  # planner.hosts.MAX_CORES_PER_GPU
    # goodput (planner.goodput): 0 failures is allowed (the failure-free case); at most one
    # failure per GPU-hour, about 50,000 times Llama 3 405B's rate
    "failures_per_1k_gpu_hours": ("--failures-per-1k-gpu-hours", 0.0, 1_000.0),
    # aggregate checkpoint write rate: up to 1 PB/s, 140x the 7 TB/s peak of Llama 3's storage
    "ckpt_write_gbs": ("--ckpt-write-gbs", 0.0, 1e6),
    "restart_min": ("--restart-min", 0.0, 10_080.0),  # a relaunch of at most a week
}
_OPEN_LOW = {"epochs", "timeout", "ppp_comp", "ppp_comm", "cpu_cores_per_gpu", "ckpt_write_gbs"}


def check_request(req: Any) -> None:
    """Every bounded number of an optimize or estimate request (a dataclass); None is unset."""
    for f in fields(req):
        value = getattr(req, f.name)
        if value is None:
            continue
        if f.name in REQUEST_INTS:
            option, lo, hi = REQUEST_INTS[f.name]
            check_int(option, value, lo, hi)
        elif f.name in REQUEST_FLOATS:
            option, lo, hi = REQUEST_FLOATS[f.name]
            check_float(option, value, lo, hi, open_lo=f.name in _OPEN_LOW)
        elif f.name == "workers":
            if len(value) > MAX_LIST:
                raise bad("--workers", f"{len(value)} values", f"at most {MAX_LIST:,} values")
            for w in value:
                check_int("--workers", w, 1, MAX_GPUS)


def check_list_length(field: str, values: list | tuple) -> None:
    """A comma-separated option or grid list of at most :data:`MAX_LIST` values."""
    if len(values) > MAX_LIST:
        raise bad(field, f"{len(values):,} values", f"at most {MAX_LIST:,} values")


# Model description field -> (bound, what it is).
MODEL_BOUNDS: dict[str, tuple[int, str]] = {
    "n_layers": (MAX_LAYERS, "layers"),
    "d_model": (MAX_HIDDEN, "hidden size"),
    "n_heads": (MAX_HEADS, "attention heads"),
    "n_kv_heads": (MAX_HEADS, "key-value heads"),
    "head_dim": (MAX_HIDDEN, "head size"),
    "d_ff": (MAX_FFN, "feed-forward size"),
    "vocab": (MAX_VOCAB, "vocabulary"),
    "seq_len": (MAX_SEQ_LEN, "sequence length"),
    "max_positions": (MAX_SEQ_LEN, "positions"),
    "type_vocab": (MAX_VOCAB, "segment vocabulary"),
    "batch": (MAX_BATCH, "sequences per step"),
}


def check_model(model: Any, what: str) -> None:
    """A transformer's model description (a zoo file's ``model`` or one built from a Hugging Face
    config.json) within the shape bounds, its heads dividing its width, before any layer is built."""
    if not isinstance(model, dict):
        return  # the spec's own checks say what a model description must be
    for key, (hi, name) in MODEL_BOUNDS.items():
        value = model.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= hi:
            raise bad(f"{what}: model field '{key}' ({name})", value, f"must be from 1 to {hi:,}")
    moe = model.get("moe")
    if isinstance(moe, dict):
        for key in ("n_experts", "top_k"):
            check_int(f"{what}: model field 'moe.{key}' (experts)", moe.get(key), 1, MAX_EXPERTS)
        if moe["top_k"] > moe["n_experts"]:
            raise bad(
                f"{what}: model field 'moe.top_k'",
                moe["top_k"],
                f"must be at most n_experts ({moe['n_experts']})",
            )
    _check_heads(model, what)


def _check_heads(model: dict, what: str) -> None:
    """Heads split the width evenly (unless head_dim is stated) and the key-value heads group
    the query heads evenly (grouped-query attention, Ainslie et al. 2023)."""
    d, h, kv = model.get("d_model"), model.get("n_heads"), model.get("n_kv_heads", model.get("n_heads"))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (d, h, kv)):
        return
    if model.get("head_dim") is None and d % h:
        raise bad(f"{what}: model field 'n_heads'", h, f"must divide the hidden size {d} (or state head_dim)")
    if h % kv:
        raise bad(f"{what}: model field 'n_kv_heads'", kv, f"must divide the {h} attention heads")


def check_spec_layers(spec: Any, what: str) -> None:
    """A layer-by-layer spec of at most :data:`MAX_SPEC_LAYERS` layers (blocks counted once)."""
    layers = spec.get("layers") if isinstance(spec, dict) else None
    if isinstance(layers, dict) and len(layers) > MAX_SPEC_LAYERS:
        raise bad(f"{what}: 'layers'", f"{len(layers):,} layers", f"at most {MAX_SPEC_LAYERS:,}")
