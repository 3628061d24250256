"""Packaging: what a user gets from ``pip install planner``.

The slow tests build the wheel from a copy of the source tree (so no stale ``build/`` folder
leaks into it), install it with its dependencies from the package index into a fresh virtual
environment without the system's site-packages, and run the documented commands from a folder
outside the source tree: ``planner validate`` (the shipped measurements, whose nets live in
``configs/measurements/nets/``), ``planner list nets`` and the main job. They prove that the
code they run is the installed wheel's, not this checkout nor an editable install.

The fast test checks that pyproject.toml declares every Python package of the tree, so a new
subpackage cannot be left out of the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODE = ("costs", "planner")
# Not part of the source tree proper: build outputs, caches, run results.
_IGNORE = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache", ".venv", "results"
)


def _tree_packages() -> set[str]:
    """Every Python package of the source tree (a folder with an __init__.py) under CODE."""
    found = set()
    for top in CODE:
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(".".join(init.parent.relative_to(ROOT).parts))
    return found


def test_pyproject_declares_every_package():
    """setuptools ships only the packages listed in [tool.setuptools] packages."""
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    missing = sorted(_tree_packages() - declared)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {', '.join(missing)}"
    assert "planner.configs" in declared


def test_documented_config_paths_resolve_to_the_shipped_files(tmp_path, monkeypatch):
    """`configs/...` paths as the README writes them name the shipped files from any folder
    (an installed package has no configs/ beside the user); a file of the user's own wins."""
    from planner import catalog
    from planner.paths import user_file

    monkeypatch.chdir(tmp_path)
    name = "configs/profiles/h100-sxm-pytorch-eager.toml"
    assert user_file(name) == catalog.configs_dir() / "profiles" / "h100-sxm-pytorch-eager.toml"
    assert user_file("configs/nope.toml") == Path("configs/nope.toml")  # missing: as given
    assert user_file("other/default.toml") == Path("other/default.toml")
    (tmp_path / "configs" / "profiles").mkdir(parents=True)
    (tmp_path / name).write_text("[scale]\n")
    assert user_file(name) == Path(name)


def _run(args: list[str], cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a clean copy of the source tree."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_IGNORE)
    out = tmp / "dist"
    done = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        tmp,
        dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (whl,) = out.glob("planner-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_holds_every_module_and_config_file(wheel):
    """Every module of costs/ and planner/ and every data file of configs/ is in the wheel
    (configs/ ships as planner/configs/, where planner.catalog looks first): a file of a new
    kind in configs/ fails here until pyproject.toml's package-data names its suffix."""
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {
        p.relative_to(ROOT).as_posix()
        for top in CODE
        for p in (ROOT / top).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    data = {
        "planner/" + p.relative_to(ROOT).as_posix()
        for p in (ROOT / "configs").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
    }
    assert len(data) > 60 and any("measurements/nets/" in d for d in data)
    assert not sorted(modules - names), sorted(modules - names)[:10]
    assert not sorted(data - names), sorted(data - names)[:10]


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> dict:
    """A fresh virtual environment (no system site-packages) with the wheel and its dependencies
    from the package index, and a working folder outside the source tree."""
    tmp = tmp_path_factory.mktemp("venv")
    venv = tmp / "venv"
    # --without-pip: the running pip installs into it (--python), so no ensurepip is needed.
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, dict(os.environ))
    assert made.returncode == 0, made.stderr
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PLANNER_CONFIGS")}
    pip = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--disable-pip-version-check",
        "-q",
    ]
    done = _run([*pip, str(wheel)], tmp, env)
    assert done.returncode == 0, done.stderr[-3000:]
    env["PATH"] = os.pathsep.join([str(bindir), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(venv)
    work = tmp / "work"
    work.mkdir()
    assert not work.resolve().is_relative_to(ROOT)
    return {"venv": venv.resolve(), "python": python, "planner": bindir / "planner", "env": env, "cwd": work}


@pytest.mark.slow
def test_installed_code_is_the_wheels(installed):
    """The venv's planner and costs are the wheel's, not this checkout's nor an editable install."""
    done = _run(
        [
            str(installed["python"]),
            "-c",
            "import costs, planner; print(planner.__file__); print(costs.__file__)",
        ],
        installed["cwd"],
        installed["env"],
    )
    assert done.returncode == 0, done.stderr
    for line in done.stdout.split():
        path = Path(line).resolve()
        assert path.is_relative_to(installed["venv"]), path
        assert not path.is_relative_to(ROOT), path


@pytest.mark.slow
def test_installed_validate(installed):
    """`planner validate` on the shipped runs: every source of the three files, Megatron's included."""
    out = installed["cwd"] / "validate"
    done = _run(
        [str(installed["planner"]), "validate", "--out", str(out)], installed["cwd"], installed["env"]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    assert text.startswith("Predicted vs measured: modern rules, the default profile,")
    for source in (
        "megatron-lm-readme-2021-a100",
        "megatron-core-readme-2024-h100",
        "nemo-24.07-h100-fp8",
        "llm-foundry-mpt-h100",
        "tf-benchmarks-2017-dgx1-p100",
    ):
        assert f"\n{source} " in text, source
    assert (out / "report.html").stat().st_size > 10_000
    assert (out / "predictions.csv").read_text().count("\n") > 400


@pytest.mark.slow
def test_installed_list_nets(installed):
    """`planner list nets` names every zoo net shipped in configs/nets/."""
    done = _run([str(installed["planner"]), "list", "nets"], installed["cwd"], installed["env"])
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines()[2:] if line.strip()}
    assert listed == {p.stem for p in (ROOT / "configs" / "nets").glob("*.json")}


@pytest.mark.slow
def test_installed_main_job(installed):
    """The main job answers from the installed wheel with the same best plan as this checkout."""
    from planner.pipeline import optimize
    from planner.request.optimize import OptimizeRequest

    done = _run(
        [str(installed["planner"]), "optimize", "alexnet", "--budget", "16gpus"],
        installed["cwd"],
        installed["env"],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    here = optimize(OptimizeRequest(net="alexnet", budget=("16gpus",))).best
    assert text.startswith("Best plan for alexnet (minimising time):\n")
    assert f"  {here['gpus']} x {here['gpu']}  (" in text
    assert f"iteration {here['iteration_ms']:,.2f} ms" in text
    assert f"Reproduce: {here['estimate_command']}\n" in text
    saved = text.rsplit("Saved: ", 1)[1].strip()
    assert saved.startswith("results/") and saved.endswith("/run.json")
    assert (installed["cwd"] / saved).is_file()  # written where the user ran it


@pytest.mark.slow
def test_installed_python_api(installed):
    """`import planner; planner.optimize(...)` from the installed wheel: the main job's answer."""
    code = (
        "import planner; r = planner.optimize('alexnet', budget='16gpus'); "
        "print(planner.__file__); print(r.best.gpus, r.best.gpu, repr(r.best.iteration_ms))"
    )
    work = installed["cwd"] / "api"
    work.mkdir()
    done = _run([str(installed["python"]), "-c", code], work, installed["env"])
    assert done.returncode == 0, done.stderr[-2000:]
    where, answer = done.stdout.splitlines()
    assert Path(where).resolve().is_relative_to(installed["venv"])
    from planner.pipeline import optimize
    from planner.request.optimize import OptimizeRequest

    here = optimize(OptimizeRequest(net="alexnet", budget=("16gpus",))).best
    assert answer == f"{here['gpus']} {here['gpu']} {here['iteration_ms']!r}"
    assert not list(work.iterdir())  # unlike the command, the API writes nothing unless given out=


@pytest.mark.slow
def test_installed_readme_paths(installed):
    """The README's commands that name files of configs/ run from the installed package."""
    planner = str(installed["planner"])
    done = _run(
        [planner, "validate", "configs/measurements/llm.csv", "--out", "llm"],
        installed["cwd"],
        installed["env"],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "\nmegatron-lm-readme-gpt3-175b " in done.stdout and "tf-benchmarks" not in done.stdout
    done = _run(
        [planner, "estimate", "resnet50", "--device", "H100_SXM", "--precision", "bf16", "--batch", "256"]
        + ["--workers", "1", "--scheme", "ring", "--data-loader", "none", "--format", "json"]
        + ["--calibration", "configs/profiles/h100-sxm-pytorch-eager.toml"],
        installed["cwd"],
        installed["env"],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # README: 3,397 images/s under the H100 eager profile (6,041 under the default one)
    assert round(json.loads(done.stdout)[0]["throughput_samples_s"]) == 3397
    done = _run(
        [planner, "sweep", "status", "configs/sweeps/example.yaml"], installed["cwd"], installed["env"]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "example.alexnet-16gpus-time." in done.stdout and "queued" in done.stdout
