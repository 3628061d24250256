"""The input bounds (planner/request/bounds.py) and the bounded reader (planner/request/files.py):
bounds far above every shipped net and run, every number of a request bounded somewhere, and
the reader's refusals."""

from __future__ import annotations

import json
import typing
from dataclasses import fields

import pytest

from planner import catalog
from planner.calibrate import measurements
from planner.errors import BadInput
from planner.request import bounds, files
from planner.request.estimate import EstimateRequest
from planner.request.optimize import OptimizeRequest
from planner.request.parse import parse_int_list


def _zoo_models() -> list[dict]:
    paths = [*catalog.zoo().values(), *catalog.measurement_nets().values()]
    return [m for p in paths if isinstance(m := json.loads(p.read_text()).get("model"), dict)]


@pytest.mark.parametrize("key", sorted(bounds.MODEL_BOUNDS))
def test_shape_bounds_are_8x_the_zoo(key):
    """Each shape bound is at least 8x the largest value of the zoo's transformers."""
    values = [m[key] for m in _zoo_models() if isinstance(m.get(key), int)]
    if values:
        assert bounds.MODEL_BOUNDS[key][0] >= 8 * max(values), key


def test_expert_bound_is_8x_the_zoo():
    experts = [m["moe"]["n_experts"] for m in _zoo_models() if m.get("moe")]
    assert experts and bounds.MAX_EXPERTS >= 8 * max(experts)


def test_every_zoo_net_is_within_the_bounds():
    for m in _zoo_models():
        bounds.check_model(m, "zoo")


def test_the_gpu_bound_covers_every_measured_run():
    runs = [
        r
        for f in measurements.shipped(("cnn.csv", "llm.csv", "transformer.csv"))
        for r in measurements.load(f)
    ]
    assert max(r.gpus for r in runs) == 6144 <= bounds.MAX_GPUS  # llm.csv: Megatron's 1T run


def _numeric(annotation: str) -> bool:
    return any(t in annotation for t in ("int", "float")) and "tuple" not in annotation


# request fields bounded by their own parsers (planner/request/parse.py, tokens.py, energy.py;
# --image-size by costs/specs/vision_nets.py, per net)
PARSED = {"memory_headroom", "pue", "grid_intensity", "electricity", "image_size"}


@pytest.mark.parametrize("request_type", [OptimizeRequest, EstimateRequest])
def test_every_number_of_a_request_is_bounded(request_type):
    hints = typing.get_type_hints(request_type)
    for f in fields(request_type):
        if _numeric(str(hints[f.name])) and hints[f.name] is not bool:
            assert f.name in {**bounds.REQUEST_INTS, **bounds.REQUEST_FLOATS} or f.name in PARSED, f.name


@pytest.mark.parametrize(
    "value, message",
    [(10**30, "from 1 to"), (0, "from 1 to"), (True, "integer"), (2.5, "integer"), (float("nan"), "integer")],
)
def test_check_int(value, message):
    with pytest.raises(BadInput, match=message):
        bounds.check_int("--x", value, 1, 10)
    assert bounds.check_int("--x", 4.0, 1, 10) == 4


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0.0, 11.0, "3"])
def test_check_float_refuses(value):
    with pytest.raises(BadInput, match=r"--x must be a positive finite number up to 10, got"):
        bounds.check_float("--x", value, 0.0, 10.0, open_lo=True)


def test_a_range_from_zero_ends():
    """'0-8' once doubled 0 forever."""
    with pytest.raises(BadInput, match="positive"):
        parse_int_list("0-8", "--workers")
    with pytest.raises(BadInput, match="16,384"):
        parse_int_list("1-99999999999999999999", "--workers")
    assert parse_int_list("1-8", "--workers") == (1, 2, 4, 8)


def test_reader_drops_a_bom_and_refuses_other_encodings(tmp_path):
    (tmp_path / "a.json").write_bytes(b"\xef\xbb\xbf" + b'{"x": 1}')
    assert files.read_json(tmp_path / "a.json", "spec") == {"x": 1}
    (tmp_path / "b.json").write_bytes('{"x": "é"}'.encode("latin-1"))
    with pytest.raises(BadInput, match=r"not UTF-8 text \(byte 0xe9 at offset 7\)"):
        files.read_json(tmp_path / "b.json", "spec")


def test_reader_bounds_size(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 10)
    (tmp_path / "a.json").write_text("[" + "1," * 10 + "1]")
    with pytest.raises(BadInput, match="over the bound of 10"):
        files.read_json(tmp_path / "a.json", "spec")


def test_reader_bounds_depth(tmp_path):
    ok = "[" * bounds.MAX_NESTING + "]" * bounds.MAX_NESTING
    assert files.parse_json(ok, "x") is not None
    deep = "[" * (bounds.MAX_NESTING + 1) + "]" * (bounds.MAX_NESTING + 1)
    with pytest.raises(BadInput, match="nests deeper than the bound of 64"):
        files.parse_json(deep, "x")


def test_yaml_duplicate_keys_and_alias_expansion():
    with pytest.raises(BadInput, match="line 2: key 'a' is given twice"):
        files.parse_yaml("a: 1\na: 2\n", "spec")
    laughs = "x: [&a [1,1,1,1,1,1,1,1,1,1], " + ", ".join(
        f"&{b} [{','.join([f'*{a}'] * 10)}]" for a, b in zip("abcd", "bcde")
    )
    with pytest.raises(BadInput, match="expands to over 100,000 values"):
        files.parse_yaml(laughs + "]\n", "spec")
    assert files.parse_yaml("x: &a [1, 2]\ny: *a\n", "spec") == {"x": [1, 2], "y": [1, 2]}


def test_yaml_refuses_python_tags():
    with pytest.raises(BadInput, match="malformed YAML"):
        files.parse_yaml("!!python/object/apply:os.system ['true']\n", "spec")


def test_csv_reader_accepts_crlf_and_bom(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"\xef\xbb\xbfsource,value\r\nx,1\r\n")
    assert files.read_csv(tmp_path / "a.csv", "m") == (["source", "value"], [{"source": "x", "value": "1"}])


def test_writable_outputs(tmp_path):
    assert files.check_writable(tmp_path / "new" / "deeper", "--out", folder=True)
    for path in ("/proc/x", "/sys/x"):
        with pytest.raises(BadInput, match="not a writable folder"):
            files.check_writable(path, "--out", folder=True)
    with pytest.raises(BadInput, match="is a folder"):
        files.check_writable(tmp_path, "-o")
