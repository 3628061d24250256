"""--fabric through the command line: `planner list fabrics` cites every row; the default changes
nothing; a named fabric reaches the answer (text and JSON), its Reproduce line and its plan files
and comes back exactly; sweep specs take it; bad names and fabrics too small for the plan are
refused in one line with exit 2."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import fabrics
from planner.cli import main

LLM = ["llama3-8b", "--device", "H100_SXM", "--gpus-per-node", "8", "--global-batch", "512"]
LAYOUT = ["--tp", "2", "--pp", "4", "--zero", "1", "--workers", "64,4096"]


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys, *args):
    code, out, err = _run(capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_list_fabrics_cites_every_row(capsys):
    rows = _json(capsys, "list", "fabrics")
    assert [r["fabric"] for r in rows] == list(fabrics.fabrics())
    for r in rows:
        assert r["source"] and r["date_read"]
        assert r["fabric"] == "nonblocking" or r["url"].startswith("https://")
    code, out, _ = _run(capsys, "list", "fabrics")
    assert code == 0 and "meta-llama3-roce" in out and "24,576" in out


def test_the_default_fabric_changes_no_number(capsys):
    plain = _json(capsys, "estimate", *LLM, *LAYOUT)
    named = _json(capsys, "estimate", *LLM, *LAYOUT, "--fabric", "nonblocking")
    assert plain == named and "fabric" not in plain[0]


def test_metas_fabric_slows_the_pipeline_that_crosses_its_pods(capsys):
    """PP 4 over 4,096 GPUs (Megatron's order: pipeline ranks outermost): 4 x 3,072 / 4,096 = 3
    stages a pod, so a send keeps 3/7 of the NIC; at 64 GPUs nothing leaves a pod."""
    flat = _json(capsys, "estimate", *LLM, *LAYOUT)
    meta = _json(capsys, "estimate", *LLM, *LAYOUT, "--fabric", "meta-llama3-roce")
    assert meta[0]["total_ms"] == flat[0]["total_ms"] and meta[0]["fabric"] == "meta-llama3-roce"
    assert meta[1]["pp_comm_ms"] > 2.0 * flat[1]["pp_comm_ms"] and meta[1]["total_ms"] > flat[1]["total_ms"]
    code, out, _ = _run(capsys, "estimate", *LLM, *LAYOUT, "--fabric", "meta-llama3-roce")
    assert code == 0 and "Fabric: meta-llama3-roce (16-GPU domains at 1:1, 3,072-GPU domains at 1:7" in out


def test_optimize_answer_reproduce_line_and_plan_files_carry_the_fabric(capsys, tmp_path):
    args = ["llama3-8b", "--budget", "64gpus", "--gpu", "H100_SXM", "--trials", "20"]
    data = _json(
        capsys, "optimize", *args, "--fabric", "dgx-superpod-h100-sharp", "--out", str(tmp_path / "o")
    )
    best = data["best"]
    assert best["fabric"] == "dgx-superpod-h100-sharp"
    assert data["request"]["fabric"] == "dgx-superpod-h100-sharp"
    assert "--fabric dgx-superpod-h100-sharp" in best["estimate_command"]
    words = shlex.split(best["estimate_command"])
    again = _json(capsys, *words[1:])
    assert again[0]["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-9)
    assert again[0]["fabric"] == "dgx-superpod-h100-sharp"
    code, out, _ = _run(
        capsys, "optimize", *args, "--fabric", "dgx-superpod-h100-sharp", "--out", str(tmp_path / "t")
    )
    assert code == 0 and "Fabric: dgx-superpod-h100-sharp (" in out and "in-network reduction (SHARP)" in out
    # pareto's plan files re-score exactly with `estimate --plan`, on the same fabric
    code, _, err = _run(capsys, "pareto", *args, "--fabric", "meta-llama3-roce", "--out", str(tmp_path / "p"))
    assert code == 0, err
    for path in sorted((tmp_path / "p").glob("plan_*.json")):
        plan = json.loads(path.read_text())
        assert plan["fabric"] == "meta-llama3-roce"
        row = _json(capsys, "estimate", "--plan", str(path))[0]
        assert row["total_ms"] == pytest.approx(plan["expected"]["iteration_ms"], rel=1e-9)
        assert row["fabric"] == "meta-llama3-roce"


def test_a_default_answer_records_no_fabric(capsys, tmp_path):
    data = _json(capsys, "optimize", "alexnet", "--budget", "16gpus", "--out", str(tmp_path / "o"))
    assert "fabric" not in data["best"] and "fabric" not in data["request"]
    assert "--fabric" not in data["best"]["estimate_command"]


def test_sweep_spec_takes_a_fabric(tmp_path):
    from planner.sweep.spec import SweepSpecError, load

    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  fabric: [nonblocking, meta-llama3-roce]\n"
        "options:\n  net: llama3-8b\n  budget: 64gpus\n  gpu: H100_SXM\n"
    )
    cells = load(path, tmp_path / "r").cells()
    assert sorted(c.request.fabric for c in cells) == ["meta-llama3-roce", "nonblocking"]
    path.write_text("name: s\ntrials: 8\ngrid:\n  net: [llama3-8b]\noptions:\n  budget: 8gpus\n  fabric: 7\n")
    with pytest.raises(SweepSpecError, match="fabric"):
        load(path, tmp_path / "r")
    path.write_text(
        "name: s\ntrials: 8\ngrid:\n  net: [llama3-8b]\noptions:\n  budget: 8gpus\n  fabric: torus\n"
    )
    with pytest.raises(Exception, match="--fabric 'torus' is not in fabrics.toml"):
        load(path, tmp_path / "r")


_names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40).filter(
    lambda s: s not in fabrics.fabrics() and not s.startswith("-") and s.strip() == s and s
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_names, st.sampled_from(["estimate", "optimize"]))
def test_an_unknown_fabric_is_one_line_naming_the_valid_ones(capsys, name, command):
    args = ["alexnet", "--workers", "8"] if command == "estimate" else ["alexnet", "--budget", "8gpus"]
    code, _, err = _run(capsys, command, *args, "--fabric", name)
    assert code == 2 and "Traceback" not in err
    assert (
        err.strip().count("\n") == 0 and "--fabric" in err and "valid: nonblocking, meta-llama3-roce" in err
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["estimate", *LLM, "--workers", "2048", "--fabric", "dgx-superpod-h100"],
            "--fabric dgx-superpod-h100 connects at most 1,016 GPUs (fabrics.toml gpus_max); "
            "--workers 2048 asks for 2,048 (valid: 1-1016)",
        ),
        (
            ["optimize", "llama3-8b", "--budget", "2048gpus", "--fabric", "dgx-superpod-h100-sharp"],
            "--fabric dgx-superpod-h100-sharp connects at most 1,016 GPUs (fabrics.toml gpus_max); "
            "--budget 2048gpus asks for 2,048 (valid: 1-1016)",
        ),
        (
            ["estimate", "alexnet", "--rules", "paleo-2018", "--fabric", "meta-llama3-roce"],
            "--fabric applies to the modern rule set, not paleo-2018 (valid: nonblocking)",
        ),
    ],
)
def test_a_fabric_that_cannot_hold_the_plan_is_refused(capsys, tmp_path, args, message):
    code, _, err = _run(capsys, *args)
    assert code == 2 and err.strip() == f"error: {message}"
