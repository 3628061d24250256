"""Mutation score of the LLM evaluator's fast tests: how many one-token changes to
costs/llm/*.py the tests notice.

Each mutant changes one token of a copy of the repository's tracked files (the working tree is
never touched): an arithmetic operator (+ -, * /, // /, ** *), a comparison (> >=, < <=,
== !=), a number (0 -> 1, an integer n -> n + 1, a float x -> 2x) or np.maximum <-> np.minimum.
The fast LLM test files run against it with ``-x``; a mutant no test fails "survived". One line
of JSON per mutant goes to the output file (appended: a run can resume), and a summary to
stdout. ``--replay FILE`` reruns only the survivors recorded in FILE (after adding tests).

Run: python benchmarks/mutate_llm.py OUT.jsonl [--files evaluator.py,memory.py]
     [--tests tests/a.py,tests/b.py] [--replay OLD.jsonl] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("evaluator.py", "memory.py", "shard.py")
TESTS = (
    "tests/test_llm_terms_comm.py",
    "tests/test_llm_terms_memory.py",
    "tests/test_llm_terms_dp.py",
    "tests/test_llm_terms_step.py",
    "tests/test_llm.py",
)
_BINOP = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"), ast.Div: ("/", "*")}
_BINOP |= {ast.FloorDiv: ("//", "/"), ast.Pow: ("**", "*")}
_CMP = {ast.Gt: (">", ">="), ast.GtE: (">=", ">"), ast.Lt: ("<", "<="), ast.LtE: ("<=", "<")}
_CMP |= {ast.Eq: ("==", "!="), ast.NotEq: ("!=", "==")}


def _between(lines: list[str], left: ast.AST, right: ast.AST, symbol: str, new: str):
    """The (line, start, end, old, new) of ``symbol`` between two nodes on one line, or None."""
    if left.end_lineno != right.lineno:
        return None
    i = lines[left.end_lineno - 1][left.end_col_offset : right.col_offset].find(symbol)
    if i < 0:
        return None
    start = left.end_col_offset + i
    return (left.end_lineno, start, start + len(symbol), symbol, new)


def _number(v):
    return type(v)(v + 1) if v == 0 or isinstance(v, int) else v * 2.0


def mutants(text: str) -> list[tuple[int, int, int, str, str]]:
    """Every one-token mutation of a module's code: (line, start col, end col, old, new)."""
    lines, out = text.splitlines(), set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
            out.add(_between(lines, node.left, node.right, *_BINOP[type(node.op)]))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
            out.add(_between(lines, node.left, node.comparators[0], *_CMP[type(node.ops[0])]))
        elif (
            isinstance(node, ast.Constant)
            and type(node.value) in (int, float)
            and node.lineno == node.end_lineno
        ):
            old = lines[node.lineno - 1][node.col_offset : node.end_col_offset]
            out.add((node.lineno, node.col_offset, node.end_col_offset, old, repr(_number(node.value))))
        elif isinstance(node, ast.Attribute) and node.attr in ("maximum", "minimum"):
            new = "minimum" if node.attr == "maximum" else "maximum"
            out.add(
                (node.end_lineno, node.end_col_offset - len(node.attr), node.end_col_offset, node.attr, new)
            )
    return sorted(m for m in out if m is not None and "noqa" not in lines[m[0] - 1])


def _copy(scratch: Path) -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for name in tracked.split():
        src, dst = ROOT / name, scratch / name
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _run(scratch: Path, tests: list[str]) -> tuple[str, str]:
    """(killed | survived | timeout, the first failing test)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for cache in (scratch / "costs").rglob("__pycache__"):
        shutil.rmtree(cache)  # a mutant of the same size and second must not load a stale .pyc
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    try:
        r = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    failed = [x for x in r.stdout.splitlines() if x.startswith(("FAILED", "ERROR"))]
    return ("survived", "") if r.returncode == 0 else ("killed", failed[0] if failed else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--replay", type=Path)
    ap.add_argument("--scratch", type=Path)
    args = ap.parse_args()
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="mutate-llm-"))
    _copy(scratch)
    tests = args.tests.split(",")
    keep = None
    if args.replay:
        records = [json.loads(x) for x in args.replay.read_text().splitlines()]
        keep = {(r["file"], r["line"], r["old"], r["new"]) for r in records if r["status"] == "survived"}
    counts: dict[str, int] = {}
    with args.out.open("a") as fh:
        for name in args.files.split(","):
            path = scratch / "costs" / "llm" / name
            original = path.read_text()
            for line, start, end, old, new in mutants(original):
                if keep is not None and (name, line, old, new) not in keep:
                    continue
                rows = original.splitlines(keepends=True)
                rows[line - 1] = rows[line - 1][:start] + new + rows[line - 1][end:]
                path.write_text("".join(rows))
                t0 = time.perf_counter()
                try:
                    status, by = _run(scratch, tests)
                finally:
                    path.write_text(original)
                rec = dict(file=name, line=line, col=start, old=old, new=new, status=status, by=by)
                rec |= dict(seconds=round(time.perf_counter() - t0, 1), code=rows[line - 1].strip())
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                counts[status] = counts.get(status, 0) + 1
                if status != "killed":
                    print(f"{status}: costs/llm/{name}:{line}  {old} -> {new}  {rec['code']}", flush=True)
    print(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
