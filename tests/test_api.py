"""The Python API (planner.optimize, planner.pareto, planner.estimate; docs/api.md).

Its answers must be the commands' answers for the same options (the best plan, the next best,
the front and the estimate rows, to the last digit), its bad input the commands' one-line
errors, its results frozen, and ``import planner`` light.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

import planner
from planner.cli import main
from planner.errors import BadInput, PlannerError

ROOT = Path(__file__).resolve().parents[1]


def _same(a, b) -> bool:
    """Equal as JSON (tuples and lists alike; NaN equals NaN)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _cli_json(capsys, argv: list[str]):
    """What `planner ARGV --format json` prints, parsed."""
    capsys.readouterr()
    assert main([*argv, "--format", "json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _cli_error(capsys, argv: list[str]) -> str:
    """The one error line of `planner ARGV` (exit code 2), without its 'error: ' prefix."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err.removeprefix("error: ").rstrip("\n")


def test_import_planner_loads_nothing_heavy():
    """`import planner` (and looking the API up) imports neither numpy, Optuna, SciPy, Typer nor
    pandas: the CLI's start-up and scripts that only import pay nothing."""
    code = (
        "import sys, planner; planner.optimize, planner.pareto, planner.Plan, planner.BadInput; "
        "print(sorted(m for m in ('numpy', 'optuna', 'scipy', 'typer', 'pandas') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def alexnet():
    return planner.optimize("alexnet", budget="16gpus")


def test_optimize_equals_the_command(alexnet, capsys, tmp_path):
    """Same best plan, iteration time and next best as `planner optimize alexnet --budget 16gpus`."""
    cli = _cli_json(capsys, ["optimize", "alexnet", "--budget", "16gpus", "--out", str(tmp_path / "run")])
    data = alexnet.to_dict()
    assert _same(data["best"], cli["best"])
    assert _same(data["alternatives"], cli["alternatives"])
    assert alexnet.best.gpu == cli["best"]["gpu"] and alexnet.best.gpus == cli["best"]["gpus"]
    assert alexnet.best.iteration_ms == cli["best"]["iteration_ms"]
    assert [p.gpu for p in alexnet.alternatives] == [r["gpu"] for r in cli["alternatives"]]
    assert _same(dict(alexnet.request), cli["request"])
    assert alexnet.text().startswith("Best plan for alexnet (minimising time):\n")
    assert f"Reproduce: {alexnet.best.estimate_command}" in alexnet.text()


def test_llm_optimize_with_options_equals_the_command(capsys, tmp_path):
    """Options in Python spelling (a list for --gpu, objective, network) give the command's answer."""
    api = planner.optimize(
        "llama3-8b", budget=["64gpus"], gpu=["H100_SXM", "A100_80GB"], objective="cost", network="ib_ndr"
    )
    cli = _cli_json(
        capsys,
        ["optimize", "llama3-8b", "--budget", "64gpus", "--gpu", "H100_SXM,A100_80GB", "--objective", "cost"]
        + ["--network", "ib_ndr", "--out", str(tmp_path / "run")],
    )
    assert _same(api.to_dict()["best"], cli["best"])
    assert api.best.tokens_per_s == cli["best"]["tokens_per_s"] > 0
    assert 0 < api.best.mfu < 1 and api.best.tp >= 1 and api.best.gpu in ("H100_SXM", "A100_80GB")


def test_request_fields_are_keywords():
    """``seq_len`` (an option of the command, or a field of the request it has no option for)
    and ``alternatives`` (a field only: how many next-best plans) give the pipeline's answer."""
    from planner.pipeline import optimize
    from planner.request.optimize import OptimizeRequest

    api = planner.optimize("llama3-8b", budget="64gpus", seq_len=4096, alternatives=2)
    direct = optimize(OptimizeRequest(net="llama3-8b", budget=("64gpus",), seq_len=4096, alternatives=2))
    assert api.request["seq_len"] == 4096 and api.best.record["seq_len"] == 4096
    assert _same(api.to_dict()["best"], direct.best) and len(api.alternatives) == 2


def test_pareto_equals_the_command(capsys, tmp_path):
    api = planner.pareto("alexnet", budget="16gpus", out=tmp_path / "api")
    cli = _cli_json(capsys, ["pareto", "alexnet", "--budget", "16gpus", "--out", str(tmp_path / "cli")])
    assert _same([p.to_dict() for p in api.front], cli["front"])
    assert api.objectives == ("time", "cost") and len(api.front) >= 1
    assert api.feasible <= api.evaluated
    written = sorted(p.name for p in (tmp_path / "api").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert (
        "report.html" in written
        and (tmp_path / "api" / "pareto.csv").read_text().count("\n") == len(api.front) + 1
    )


@pytest.mark.parametrize(
    "kwargs, argv",
    [
        (
            dict(workers=[1, 8, 64], gpus_per_node=8, batch=256, scheme="ring"),
            ["resnet50", "--workers", "1,8,64", "--gpus-per-node", "8", "--batch", "256", "--scheme", "ring"],
        ),
        (
            dict(device="H100_SXM", workers="64", gpus_per_node=8, tp=4, pp=2, zero=1, batch=1, sp=True),
            ["llama3-8b", "--device", "H100_SXM", "--workers", "64", "--gpus-per-node", "8", "--tp", "4"]
            + ["--pp", "2", "--zero", "1", "--batch", "1", "--sp"],
        ),
        (
            dict(rules="paleo-2016", device="K20X", network="infiniband", workers="1-8", scaling="strong"),
            [
                "nin",
                "--rules",
                "paleo-2016",
                "--device",
                "K20X",
                "--network",
                "infiniband",
                "--workers",
                "1-8",
            ]
            + ["--scaling", "strong"],
        ),
    ],
)
def test_estimate_equals_the_command(kwargs, argv, capsys):
    api = planner.estimate(argv[0], **kwargs)
    cli = _cli_json(capsys, ["estimate", *argv])
    assert _same(api.to_list(), cli)
    assert [r.total_ms for r in api.rows] == [r["total_ms"] for r in cli]
    assert all(isinstance(r.workers, int) and r.total_ms > 0 for r in api.rows)


def test_estimate_of_a_plan_file(alexnet, capsys, tmp_path):
    """``plan=`` re-evaluates a saved plan as `planner estimate --plan` does."""
    api = planner.pareto("alexnet", budget="8gpus", out=tmp_path / "front")
    plan = tmp_path / "front" / "plan_0.json"
    rows = planner.estimate(plan=plan).to_list()
    assert _same(rows, _cli_json(capsys, ["estimate", "--plan", str(plan)]))
    assert rows[0]["total_ms"] == pytest.approx(api.front[0].iteration_ms, rel=1e-9)


@pytest.mark.parametrize(
    "kwargs, argv",
    [
        (dict(sequence_len=4096), ["--sequence-len", "4096"]),  # unknown keyword: the parser's hint
        (dict(budget="16 cores"), ["--budget", "16 cores"]),
        (dict(objective="speed"), ["--objective", "speed"]),
        (dict(rules="paleo"), ["--rules", "paleo"]),
        (dict(trials="many"), ["--trials", "many"]),
        (dict(gpu=["A100", "H100X"]), ["--gpu", "A100,H100X"]),
        (dict(price={"H100_SXM": -2}), ["--price", "H100_SXM=-2"]),
        (dict(deadline="soon"), ["--deadline", "soon"]),
    ],
)
def test_bad_input_raises_the_commands_message(kwargs, argv, capsys):
    with pytest.raises(BadInput) as caught:
        planner.optimize("alexnet", **kwargs)
    assert str(caught.value) == _cli_error(capsys, ["optimize", "alexnet", *argv])


def test_bad_input_of_estimate_and_pareto(capsys):
    with pytest.raises(BadInput) as caught:
        planner.estimate("alexnet", workers="0,2")
    assert str(caught.value) == _cli_error(capsys, ["estimate", "alexnet", "--workers", "0,2"])
    with pytest.raises(BadInput) as caught:
        planner.pareto("alexnet", objectives="time,speed")
    assert str(caught.value) == _cli_error(capsys, ["pareto", "alexnet", "--objectives", "time,speed"])
    with pytest.raises(BadInput, match="^estimate needs NET"):
        planner.estimate()


def test_bad_values_of_request_fields_and_switches():
    """Fields without an option (``alternatives``) are checked as the parser checks options of
    their type, with its message."""
    for kwargs, message in (
        (dict(seq_len="long"), "Invalid value for '--seq-len': 'long' is not a valid integer."),
        (dict(alternatives="many"), "Invalid value for '--alternatives': 'many' is not a valid integer."),
        (dict(alternatives=2.5), "Invalid value for '--alternatives': 2.5 is not a valid integer."),
        (dict(alternatives=True), "Invalid value for '--alternatives': True is not a valid integer."),
        (dict(pipeline="yes"), "--pipeline is a switch: give True or False, got 'yes'"),
        (dict(format="json"), "--format is an option of the command line only"),
    ):
        with pytest.raises(BadInput) as caught:
            planner.optimize("alexnet", **kwargs)
        assert str(caught.value) == message
    with pytest.raises(PlannerError, match="^no plan"):  # infeasible: the InfeasibleError of the command
        planner.optimize("llama3-70b", budget="1gpus", gpu="T4")


def test_results_are_frozen_and_typed(alexnet):
    best = alexnet.best
    with pytest.raises(dataclasses.FrozenInstanceError):
        best.gpu = "H100_SXM"
    with pytest.raises(TypeError):
        best.record["gpu"] = "H100_SXM"
    assert isinstance(best, planner.Plan) and isinstance(alexnet, planner.OptimizeResult)
    for f in dataclasses.fields(planner.Plan):
        value = getattr(best, f.name)
        if f.name == "record":
            continue
        if f.name in ("tokens_per_s", "mfu"):  # a CNN has neither
            assert value is None
        else:
            assert value == best.record[f.name] and value is not None, f.name
    assert isinstance(best.gpus, int) and isinstance(best.iteration_ms, float)
    assert best.nodes * best.gpus_per_node == best.gpus and best.dp * best.tp * best.pp == best.gpus
    assert alexnet.objectives == ("time",) and alexnet.front == ()
    assert len(alexnet.alternatives) == 5 and alexnet.why
    assert alexnet.search["method"] == "enumeration" and alexnet.search["valid_plans"] == 37_920


def test_out_writes_what_the_command_writes(tmp_path):
    """Nothing is written without ``out``; with it, run.json as `planner optimize --out`."""
    r = planner.optimize("alexnet", budget="8gpus", trials=50, out=tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert _same(saved["best"], r.to_dict()["best"]) and saved["request"]["trials"] == 50
    assert set(saved) == set(r.to_dict()) | {"versions"}


def test_keyword_spellings_agree():
    """A list and its comma text, a dict of prices and DEVICE=USD texts, give one request."""
    from planner.api import _request

    a, _ = _request(
        "optimize", "alexnet", dict(gpu=["T4", "L4"], price={"T4": 0.4}, budget=16, pipeline=True)
    )
    b, _ = _request("optimize", "alexnet", dict(gpu="T4,L4", price=["T4=0.4"], budget="16", pipeline=True))
    assert a == b and a.gpu == "T4,L4" and a.prices == ("T4=0.4",) and a.budget == ("16",) and a.pipeline


def test_to_frame(alexnet):
    pd = pytest.importorskip("pandas")
    frame = alexnet.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 1 + len(alexnet.alternatives)
    assert list(frame["rank"]) == list(range(len(frame)))
    assert list(frame["gpu"]) == [alexnet.best.gpu] + [p.gpu for p in alexnet.alternatives]
    assert frame.loc[0, "iteration_ms"] == alexnet.best.iteration_ms
    assert "why" not in frame  # lists stay in the records
    rows = planner.estimate("alexnet", workers=[1, 2], scheme="ring").to_frame()
    assert list(rows["workers"]) == [1, 2]


def test_to_frame_without_pandas(alexnet, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    with pytest.raises(ModuleNotFoundError, match="pip install pandas"):
        alexnet.to_frame()


def test_estimate_is_the_package_and_the_function():
    """`planner.estimate` is the subpackage of the `estimate` command and, called, the API."""
    import planner.estimate.records  # noqa: F401  (its modules import as before)

    assert callable(planner.estimate) and planner.estimate.__name__ == "planner.estimate"
    rows = planner.estimate("alexnet", workers=[4], scheme="ring").rows
    assert len(rows) == 1 and rows[0].workers == 4
