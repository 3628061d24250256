"""Choices and parsers shared by the command-line modules (kept apart to avoid import cycles)."""

from __future__ import annotations

from enum import Enum


class Fmt(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


class Scaling(str, Enum):
    strong = "strong"
    weak = "weak"


class SchemeOpt(str, Enum):
    onetoall = "onetoall"
    tree = "tree"
    butterfly = "butterfly"
    ring = "ring"
    all = "all"


class Parallel(str, Enum):
    data = "data"
    model = "model"
    hybrid = "hybrid"


class RulesOpt(str, Enum):
    paleo_2018 = "paleo-2018"
    paleo_2016 = "paleo-2016"
    planner = "planner"


class ConvAlg(str, Enum):
    gemm = "gemm"
    fft = "fft"
    best = "best"


class Precision(str, Enum):
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"


class What(str, Enum):
    nets = "nets"
    devices = "devices"
    networks = "networks"


def parse_int_list(value: str, option: str) -> tuple[int, ...]:
    """'1,2,4,8' or '1-8' (powers of two) -> a tuple of positive integers."""
    from planner.errors import BadInput

    out: list[int] = []
    for part in value.replace(" ", "").split(","):
        try:
            if "-" in part[1:]:
                lo, hi = (int(x) for x in part.split("-", 1))
                v = lo
                while v <= hi:
                    out.append(v)
                    v *= 2
            else:
                out.append(int(part))
        except ValueError:
            raise BadInput(
                f"{option} takes integers like 1,2,4,8 or a range 1-128 (powers of two), got '{value}'"
            ) from None
    if not out or min(out) < 1:
        raise BadInput(f"{option} takes positive integers, got '{value}'")
    return tuple(out)
