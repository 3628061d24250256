"""Property-based fuzzing of every input file kind through the command line: a Hugging Face
config.json, a net spec, a sweep YAML, a measurement CSV, a calibration profile, a plan JSON and
a report folder. Each is answered or refused in one line, within the stated time and memory,
and a refused command writes nothing (tests/fuzz_contract.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from fuzz_contract import FUZZ, files_under, fresh, run_cli
from hypothesis import given
from hypothesis import strategies as st

from planner.catalog import configs_dir

SCALARS = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.booleans(),
    st.none(),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
)
RAW_BYTES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"\xef\xbb\xbf{}", b"\xff\xfe\x00x", b"[" * 5000, b'{"a":' * 3000, b"\x00" * 50]),
)


def _write(path: Path, content) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


GPT2 = {
    "model_type": "gpt2",
    "n_layer": 12,
    "n_embd": 768,
    "n_head": 12,
    "vocab_size": 50257,
    "n_positions": 1024,
}
LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 16,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}
SHAPE_INTS = st.one_of(
    st.integers(min_value=-3, max_value=70000),
    st.sampled_from([0, 7, 10**12, 10**30, 2**63, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
)


@FUZZ
@given(
    base=st.sampled_from([GPT2, LLAMA]),
    changes=st.dictionaries(st.text(max_size=3), SHAPE_INTS, max_size=2),
    data=st.data(),
)
def test_config_json(capsys, tmp_path, base, changes, data):
    tmp_path = fresh(tmp_path)
    cfg = dict(base)
    key = data.draw(
        st.sampled_from(
            sorted(base)[1:] if "n_layer" in base else sorted(k for k in base if k != "model_type")
        )
    )
    cfg[key] = data.draw(SHAPE_INTS)
    cfg.update({k: v for k, v in changes.items() if k != "model_type"})
    path = _write(tmp_path / "config.json", cfg)
    run_cli(capsys, ["estimate", path, "--workers", "8", "--device", "H100_SXM"])


@FUZZ
@given(content=st.one_of(JSON_VALUES, RAW_BYTES, st.text(max_size=100)))
def test_net_spec(capsys, tmp_path, content):
    tmp_path = fresh(tmp_path)
    path = _write(tmp_path / "net.json", content)
    run_cli(capsys, ["estimate", path, "--workers", "1,8", "--device", "V100"])


@FUZZ
@given(layers=st.dictionaries(st.sampled_from(["data", "conv", "fc", "x"]), JSON_VALUES, max_size=4))
def test_net_spec_layers(capsys, tmp_path, layers):
    tmp_path = fresh(tmp_path)
    path = _write(tmp_path / "net.json", {"name": "n", "layers": layers})
    run_cli(capsys, ["estimate", path, "--workers", "1,8", "--device", "V100"])


SWEEP_TEXT = st.one_of(
    st.text(max_size=200),
    RAW_BYTES,
    st.sampled_from(
        [
            "name: a\nname: b\ngrid: {net: [alexnet]}\n",
            "name: s\ngrid:\n  net: [alexnet]\n  budget: ["
            + ",".join(f"{i}gpus" for i in range(1, 200))
            + "]\n"
            "  deadline: [" + ",".join(f"{i}h" for i in range(1, 200)) + "]\n",
            "name: s\ngrid: {net: [alexnet]}\noptions:\n  price: [&a [x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a],"
            " &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], [*d,*d,*d,*d,*d,*d,*d,*d,*d]]\n",
            "!!python/object/apply:os.system ['echo hi']\n",
        ]
    ),
)


@FUZZ
@given(
    body=SWEEP_TEXT,
    grid=st.dictionaries(st.sampled_from(["net", "budget", "seed", "trials"]), JSON_VALUES, max_size=3),
)
def test_sweep_yaml(capsys, tmp_path, body, grid):
    tmp_path = fresh(tmp_path)
    spec = _write(tmp_path / "spec.yaml", body)
    results = tmp_path / "results"
    code, _, _ = run_cli(capsys, ["sweep", "status", spec, "--results", results])
    if code != 0:
        assert not files_under(results)
    spec2 = _write(tmp_path / "spec2.yaml", json.dumps({"name": "s", "trials": 5, "grid": grid}))
    code, _, _ = run_cli(capsys, ["sweep", "status", spec2, "--results", results])
    if code != 0:
        assert not files_under(results)


def _measurements() -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO((configs_dir() / "measurements" / "cnn.csv").read_text())))
    return rows[0], rows[1:6]


CELLS = st.one_of(
    st.sampled_from(
        ["", "0", "-1", "nan", "inf", "1e308", "=1+1", "@SUM(A1)", "+x", "-x", "8", "V100", "fp32"]
    ),
    st.text(max_size=10),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
)


@FUZZ
@given(
    edits=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 19), CELLS), max_size=3),
    bom=st.booleans(),
    crlf=st.booleans(),
)
def test_measurement_csv(capsys, tmp_path, edits, bom, crlf):
    tmp_path = fresh(tmp_path)
    header, rows = _measurements()
    for r, c, v in edits:
        rows[r][c] = v
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n" if crlf else "\n").writerows([header, *rows])
    path = _write(tmp_path / "m.csv", ("\ufeff" if bom else "") + buf.getvalue())
    out = tmp_path / "report"
    code, _, _ = run_cli(capsys, ["validate", path, "--out", out])
    if code != 0:
        assert not out.exists()
    else:  # a written CSV has no cell a spreadsheet would run as a formula
        for row in csv.reader(io.StringIO((out / "predictions.csv").read_text())):
            for cell in row:
                assert cell[:1] not in ("=", "+", "@") or cell.lstrip("+-").replace(".", "").isdigit()


@FUZZ
@given(
    body=st.one_of(
        st.text(max_size=200), RAW_BYTES, st.sampled_from(["[scael]\n", "[profile]\ninterval = [2, 1]\n"])
    ),
    scale=SCALARS,
)
def test_calibration_profile(capsys, tmp_path, body, scale):
    tmp_path = fresh(tmp_path)
    path = _write(tmp_path / "p.toml", body)
    run_cli(capsys, ["estimate", "alexnet", "--workers", "8", "--device", "V100", "--calibration", path])
    shipped = (configs_dir() / "profiles" / "default.toml").read_text()
    mutated = shipped.replace('"gemm.Volta.fp32" = ', f'"gemm.Volta.fp32" = {json.dumps(scale)} #', 1)
    path = _write(tmp_path / "q.toml", mutated)
    run_cli(capsys, ["estimate", "alexnet", "--workers", "8", "--device", "V100", "--calibration", path])


PLAN_KEYS = [
    "net",
    "device",
    "workers",
    "gpus_per_node",
    "batch_per_worker",
    "parallel",
    "scheme",
    "precision",
]


@FUZZ
@given(
    content=st.one_of(JSON_VALUES, RAW_BYTES),
    edits=st.dictionaries(st.sampled_from(PLAN_KEYS), SCALARS, max_size=2),
)
def test_plan_json(capsys, tmp_path, content, edits):
    tmp_path = fresh(tmp_path)
    plan = {"net": "alexnet", "device": "T4", "workers": 8, "gpus_per_node": 8, "batch_per_worker": 64}
    plan |= {"parallel": "data", "scheme": "ring", "precision": "fp16", "network": "eth100", **edits}
    for i, body in enumerate((content, plan)):
        path = _write(tmp_path / f"plan{i}.json", body)
        out = tmp_path / f"launch{i}"
        code, _, _ = run_cli(capsys, ["launch", path, "--target", "torchrun", "--out", out])
        if code != 0:
            assert not files_under(out)


@FUZZ
@given(content=st.one_of(JSON_VALUES, RAW_BYTES), report=JSON_VALUES)
def test_report_folder(capsys, tmp_path, content, report):
    tmp_path = fresh(tmp_path)
    for i, body in enumerate((content, {"report": report})):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        _write(folder / "run.json", body)
        code, _, _ = run_cli(capsys, ["report", folder])
        if code != 0:
            assert {p.name for p in folder.iterdir()} == {"run.json"}
