"""Every transformer answer states the attention kernel it is costed with, and whose choice it is.

The kernel comes from the net spec (gpt3-175b, bert-large and gpt2-xl: ``standard``; the Llama,
Mixtral and DeepSeek specs: ``flash``) unless ``--attention`` sets another. Text answers say
"flash attention (the net spec's)" or "... (--attention; not the net spec's)"; JSON records carry
``attention`` and ``attention_source`` (absent for CNNs); CSV output and the Pareto report name
it (the sweep summary's column: tests/test_llm_cli.py). The Reproduce line and plan files name the kernel only where it is not the spec's, and
still reproduce the number exactly.
"""

from __future__ import annotations

import csv
import io
import json
import shlex

import pytest
from test_fabric_cli import _json
from test_fabric_cli import _run as _cli

LLAMA = ["llama3-8b", "--device", "H100_SXM", "--gpus-per-node", "8", "--workers", "8", "--tp", "2"]
SEARCH = ["llama3-8b", "--budget", "16gpus", "--gpu", "H100_SXM", "--trials", "20"]
SPEC_KERNEL = {
    "gpt3-175b": "standard",
    "bert-large": "standard",
    "gpt2-xl": "standard",
    "llama3-8b": "flash",
    "llama3-70b": "flash",
    "llama2-70b": "flash",
    "llama3.1-405b": "flash",
    "mixtral-8x7b": "flash",
    "deepseek-v3": "flash",
}


@pytest.mark.parametrize("net, kernel", sorted(SPEC_KERNEL.items()))
def test_every_zoo_transformer_states_its_spec_kernel(capsys, net, kernel):
    spec = json.loads(open(f"configs/nets/{net}.json").read())["model"]["attention"]
    assert spec == kernel
    args = [net, "--device", "H100_SXM", "--gpus-per-node", "8", "--workers", "8", "--precision", "bf16"]
    rec = _json(capsys, "estimate", *args)[0]
    assert (rec["attention"], rec["attention_source"]) == (kernel, "net spec")
    code, out, err = _cli(capsys, "estimate", *args)
    assert code == 0, err
    assert f", {kernel} attention (the net spec's)" in out.splitlines()[0]


def test_a_cnn_answer_names_no_kernel(capsys, tmp_path):
    rec = _json(capsys, "estimate", "resnet50", "--workers", "8")[0]
    assert "attention" not in rec and "attention_source" not in rec
    code, out, _ = _cli(capsys, "estimate", "resnet50", "--workers", "8")
    assert code == 0 and "attention" not in out
    cnn = ["resnet50", "--budget", "8gpus", "--gpu", "H100_SXM", "--trials", "10", "--out", str(tmp_path)]
    code, out, _ = _cli(capsys, "optimize", *cnn, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows and {r["attention"] for r in rows} == {""}  # the column, empty


def test_estimate_text_says_whose_kernel(capsys):
    _, out, _ = _cli(capsys, "estimate", *LLAMA)
    assert ", flash attention (the net spec's)" in out.splitlines()[0]
    _, out, _ = _cli(capsys, "estimate", *LLAMA, "--attention", "flash")  # the spec's own: no override
    assert ", flash attention (the net spec's)" in out.splitlines()[0]
    _, out, _ = _cli(capsys, "estimate", *LLAMA, "--attention", "standard")
    assert ", standard attention (--attention; not the net spec's)" in out.splitlines()[0]


def test_optimize_states_the_spec_kernel_and_its_reproduce_line_reproduces(capsys, tmp_path):
    data = _json(capsys, "optimize", *SEARCH, "--out", str(tmp_path / "j"))
    best = data["best"]
    assert (best["attention"], best["attention_source"]) == ("flash", "net spec")
    assert all(a["attention"] == "flash" for a in data["alternatives"])
    assert "--attention" not in best["estimate_command"]  # the spec's kernel: not an option
    again = _json(capsys, *shlex.split(best["estimate_command"])[1:])[0]
    assert again["total_ms"] == pytest.approx(best["iteration_ms"], rel=1e-9)
    assert (again["attention"], again["attention_source"]) == ("flash", "net spec")
    code, out, err = _cli(capsys, "optimize", *SEARCH, "--out", str(tmp_path / "t"))
    assert code == 0, err
    line = next(x for x in out.splitlines() if "recomputation" in x and "per step" in x)
    assert line.endswith(", flash attention (the net spec's)")
    code, out, _ = _cli(capsys, "optimize", *SEARCH, "--format", "csv", "--out", str(tmp_path / "c"))
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows and {r["attention"] for r in rows} == {"flash"}


def test_pareto_report_and_plan_files_of_a_spec_kernel(capsys, tmp_path):
    code, out, err = _cli(capsys, "pareto", *SEARCH, "--out", str(tmp_path / "p"))
    assert code == 0, err
    lines = out.splitlines()
    at = lines[1].index("  attention  ") + 2  # the terminal table's column
    assert {x[at : at + 9].strip() for x in lines[3:] if x.startswith("P")} == {"flash"}
    md = (tmp_path / "p" / "report.md").read_text()
    assert "| attention |" in md and ", flash attention (the net spec's))" in md
    html = (tmp_path / "p" / "report.html").read_text()
    assert "<th>attention</th>" in html and "flash attention (the net spec&#x27;s)" in html
    files = sorted((tmp_path / "p").glob("plan_*.json"))
    assert files
    for path in files:
        plan = json.loads(path.read_text())
        assert "attention" not in plan  # the spec's kernel: a plan scored on another net keeps its own
        row = _json(capsys, "estimate", "--plan", str(path))[0]
        assert row["total_ms"] == pytest.approx(plan["expected"]["iteration_ms"], rel=1e-9)
        assert (row["attention"], row["attention_source"]) == ("flash", "net spec")
    front = _json(capsys, "pareto", *SEARCH, "--out", str(tmp_path / "j"))["front"]
    assert {(p["attention"], p["attention_source"]) for p in front} == {("flash", "net spec")}
