"""Choices shared by the command-line modules (str Enums, so Typer lists them in --help)."""

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
    auto = "auto"


class Parallel(str, Enum):
    data = "data"
    model = "model"
    hybrid = "hybrid"


class RulesOpt(str, Enum):
    modern = "modern"
    paleo_2018 = "paleo-2018"
    paleo_2016 = "paleo-2016"
    planner = "planner"


class ConvAlg(str, Enum):
    gemm = "gemm"
    fft = "fft"
    best = "best"


class Precision(str, Enum):
    auto = "auto"
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"
    fp8 = "fp8"


class What(str, Enum):
    nets = "nets"
    devices = "devices"
    networks = "networks"
    prices = "prices"
    stacks = "stacks"
    instances = "instances"
    fabrics = "fabrics"
