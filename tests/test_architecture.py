"""The shape of the code, checked so that it stays true (docs/architecture.md):

* no import cycle among the modules of costs/ and planner/ (imports inside functions count;
  imports under ``if TYPE_CHECKING:`` do not, they never run);
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


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _resolve(name: str) -> str | None:
    """The module of ours that ``name`` (a dotted import target) loads, or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set[str]:
    """Our modules that ``module`` imports (each ``from X import y`` of a submodule y is X.y)."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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
    assert {"costs.graph", "costs.layers", "planner.catalog", "planner.cli", "planner.pipeline"} <= set(
        MODULES
    )
    assert "costs.layers" in GRAPH["costs.graph"]  # graph shapes layers with the layer rules
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
