"""The shape of the code, checked so that it stays true (docs/architecture.md):

* no import cycle among the modules of costs/ and planner/, counting every import: inside
  functions and under ``if TYPE_CHECKING:`` too (a typing-only loop still ties the modules);
* costs/ keeps at most 10 modules at its top level, the rest in subpackages whose docstrings
  say what they own and may import, and each subpackage imports only what its docstring allows;
* costs/ imports nothing of planner/ (the evaluator stands alone);
* no module over 400 lines;
* no function or method with a cyclomatic complexity above 15 (radon's measure, grade C at most).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("costs", "planner")
MAX_LINES = 400
MAX_COMPLEXITY = 15


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the packages (a package is its __init__)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of ours that ``name`` (a dotted import target) loads, or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set[str]:
    """Our modules that ``module`` imports (each ``from X import y`` of a submodule y is X.y)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out |= {m for m in map(_resolve, targets) if m and m != module}
    return out


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a list of modules, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_checks_see_every_package_and_a_known_edge():
    assert {
        "costs.specs.graph",
        "costs.specs.layers",
        "planner.catalog",
        "planner.cli",
        "planner.pipeline",
    } <= set(MODULES)
    assert "costs.specs.layers" in GRAPH["costs.specs.graph"]  # graph shapes layers with the layer rules
    assert "planner.space.axes" in GRAPH["planner.space.space"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle():
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_costs_imports_nothing_of_planner():
    bad = {
        m: sorted(d for d in deps if d.startswith("planner"))
        for m, deps in GRAPH.items()
        if m.startswith("costs")
    }
    assert not {m: d for m, d in bad.items() if d}


MAX_TOP_LEVEL = 10
# What each subpackage of costs/ may import besides itself (its docstring says the same).
COSTS_ALLOWED = {
    "costs.specs": {"costs.errors"},
    "costs.comm": {"costs.errors"},
    "costs.modern": {"costs.errors", "costs.hardware", "costs.plans", "costs.specs", "costs.comm"},
    "costs.llm": {
        "costs.errors",
        "costs.hardware",
        "costs.plans",
        "costs.specs",
        "costs.comm",
        "costs.modern",
    },
    "costs.fit": {"costs.errors", "costs.hardware", "costs.modern"},
}


def test_costs_top_level_is_small_and_every_part_is_a_documented_subpackage():
    top = sorted(p.name for p in (ROOT / "costs").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, f"costs/ has {len(top)} top-level modules: {top}"
    subpackages = sorted(p.parent.name for p in (ROOT / "costs").glob("*/__init__.py"))
    assert subpackages == sorted(name.split(".")[1] for name in COSTS_ALLOWED)
    for name in subpackages:
        doc = ast.get_docstring(ast.parse((ROOT / "costs" / name / "__init__.py").read_text()))
        assert doc and "May import" in doc, f"costs/{name}/__init__.py must say what it owns and may import"


def _package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or f"{module}" in COSTS_ALLOWED else module


@pytest.mark.parametrize("package", sorted(COSTS_ALLOWED))
def test_costs_subpackage_imports_only_what_it_may(package):
    allowed = COSTS_ALLOWED[package] | {package, "costs"}
    bad = {
        m: sorted(d for d in deps if _package_of(d) not in allowed)
        for m, deps in GRAPH.items()
        if m == package or m.startswith(package + ".")
    }
    assert not {m: d for m, d in bad.items() if d}, f"{package} imports beyond its docstring: {bad}"


def test_the_layering_check_sees_an_edge():
    assert "costs.specs.graph" in GRAPH["costs.specs.coefficients"]
    assert _package_of("costs.modern.roofline") == "costs.modern"
    assert _package_of("costs.hardware") == "costs.hardware"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size(module):
    n = len(MODULES[module].read_text().splitlines())
    assert n <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {n} lines (at most {MAX_LINES})"


def _blocks(blocks):
    """Every function, method and closure of radon's results."""
    for b in blocks:
        if hasattr(b, "methods"):
            yield from _blocks(b.methods)
        else:
            yield b
            yield from _blocks(getattr(b, "closures", []))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_complexity(module):
    from radon.complexity import cc_visit

    path = MODULES[module]
    worst = [
        f"{b.name} (line {b.lineno}): {b.complexity}"
        for b in _blocks(cc_visit(path.read_text()))
        if b.complexity > MAX_COMPLEXITY
    ]
    assert not worst, f"{path.relative_to(ROOT)}: cyclomatic complexity above {MAX_COMPLEXITY}: {worst}"


# PyTorch is the optional extra of `planner profile`: only these modules import it (directly or
# through each other), and the CLI imports them only after checking that torch is installed.
TORCH_MODULES = {
    "planner.profile.builder",
    "planner.profile.cnn",
    "planner.profile.device",
    "planner.profile.hooks",
    "planner.profile.peaks",
    "planner.profile.run",
    "planner.profile.timing",
    "planner.profile.transformer",
}


def _imports_torch(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(n == "torch" or n.startswith("torch.") for n in names):
            return True
    return False


def test_only_the_profile_modules_import_torch():
    direct = {m for m, p in MODULES.items() if _imports_torch(p)}
    through = {m for m, deps in GRAPH.items() if deps & TORCH_MODULES}
    assert direct <= TORCH_MODULES
    assert through <= TORCH_MODULES | {"planner.cli.profile"}  # imports them inside its function
    assert {"planner.profile.cnn", "planner.profile.timing"} <= direct  # the check sees real imports


def test_every_other_module_imports_with_torch_blocked():
    """Each module of costs/ and planner/ but the torch ones imports in a Python where
    ``import torch`` fails, and `planner profile` then says how to install it (exit 2)."""
    import subprocess
    import sys

    others = sorted(set(MODULES) - TORCH_MODULES - {"planner.__main__"})  # __main__ runs the CLI
    code = (
        "import sys; sys.modules['torch'] = None\n"  # None in sys.modules makes the import fail
        "import importlib\n"
        f"for m in {others!r}: importlib.import_module(m)\n"
        "from planner.cli import main\n"
        "code = main(['profile', 'alexnet'])\n"
        "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
        "sys.exit(code)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: planner profile needs PyTorch: pip install 'planner[profile]' (or pip install torch)"
    ]
