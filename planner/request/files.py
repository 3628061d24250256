"""The one reader of the user's files: JSON, YAML, TOML and CSV, held to the bounds of
:mod:`planner.request.bounds` before anything is parsed or built.

Every reader checks that the path is a readable file (not a folder, not a symlink loop), at
most :data:`~planner.request.bounds.MAX_FILE_BYTES`, UTF-8 text (a leading byte-order mark, as
spreadsheet programs write it, is dropped), then parses and checks the nesting depth (and, for
YAML, duplicate keys and the size after alias expansion; for CSV, the size of a field). A
refusal is one line naming the file, what is wrong and the bound.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import tomllib
from pathlib import Path
from typing import Any

from costs.errors import PlannerError
from planner.errors import BadInput
from planner.request.bounds import MAX_CSV_FIELD, MAX_CSV_ROWS, MAX_FILE_BYTES, MAX_NESTING, MAX_YAML_NODES

Error = type[PlannerError]


def read_bytes(path: str | Path, what: str, error: Error = BadInput) -> bytes:
    """The bytes of a user's file: a regular file of at most MAX_FILE_BYTES."""
    p = Path(path)
    try:
        if p.is_dir():
            raise error(f"{what} {path} is a folder, not a file")
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise error(f"{what} {path} is {size:,} bytes, over the bound of {MAX_FILE_BYTES:,}")
        with p.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)  # a file that grows while read stops here
    except OSError as exc:
        raise error(f"{what} {path}: {_why(exc)}") from None
    if len(data) > MAX_FILE_BYTES:
        raise error(f"{what} {path} is over the bound of {MAX_FILE_BYTES:,} bytes")
    return data


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return f"not found ({exc.strerror})"
    if exc.errno == errno.ELOOP:
        return "a symbolic-link loop"
    return exc.strerror or str(exc)


def read_text(path: str | Path, what: str, error: Error = BadInput) -> str:
    """A user's file as text: UTF-8, a leading byte-order mark dropped."""
    data = read_bytes(path, what, error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def check_depth(data: Any, what: str, error: Error = BadInput, limit: int = MAX_NESTING) -> None:
    """Refuse objects nested deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                raise error(f"{what} nests deeper than the bound of {limit} levels")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def parse_json(text: str, what: str, error: Error = BadInput) -> Any:
    """JSON text -> data; malformed, too deep or an over-long number is one line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{what}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise error(f"{what} nests deeper than the bound of {MAX_NESTING} levels") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise error(f"{what}: {exc}".splitlines()[0]) from None
    check_depth(data, what, error)
    return data


def read_json(path: str | Path, what: str, error: Error = BadInput) -> Any:
    """A user's JSON file, checked (see the module docstring)."""
    return parse_json(read_text(path, what, error), f"{what} {path}", error)


def read_toml(path: str | Path, what: str, error: Error = BadInput) -> dict:
    """A user's TOML file, checked."""
    text = read_text(path, what, error)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} {path}: malformed TOML: {exc}") from None
    except RecursionError:
        raise error(f"{what} {path} nests deeper than the bound of {MAX_NESTING} levels") from None
    check_depth(data, f"{what} {path}", error)
    return data


def parse_yaml(text: str, what: str, error: Error = BadInput) -> Any:
    """YAML text -> data with the safe loader; duplicate keys, more than MAX_YAML_NODES values
    after alias expansion (a "billion laughs") and over-deep nesting are refused."""
    import yaml

    try:
        data = yaml.load(text, Loader=_loader(error, what))  # noqa: S506  (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise error(f"{what}: malformed YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise error(f"{what} nests deeper than the bound of {MAX_NESTING} levels") from None
    _check_expanded(data, what, error)
    return data


def read_yaml(path: str | Path, what: str, error: Error = BadInput) -> Any:
    """A user's YAML file, checked."""
    return parse_yaml(read_text(path, what, error), f"{what} {path}", error)


def _loader(error: Error, what: str):
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):  # refuse a key given twice
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str | int | float | bool):
                    continue
                if key in seen:
                    line = key_node.start_mark.line + 1
                    raise error(f"{what} line {line}: key '{key}' is given twice")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return Loader


def _check_expanded(data: Any, what: str, error: Error) -> None:
    """Count values as a reader that follows every alias would see them, stopping at the bound."""
    stack, count = [(data, 1)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise error(f"{what} expands to over {MAX_YAML_NODES:,} values (aliases included), the bound")
        if isinstance(node, dict | list):
            if depth > MAX_NESTING:
                raise error(f"{what} nests deeper than the bound of {MAX_NESTING} levels")
            children = list(node.keys()) + list(node.values()) if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children)


def read_csv(path: str | Path, what: str, error: Error = BadInput) -> tuple[list[str], list[dict[str, str]]]:
    """A user's CSV file -> (header, rows as dicts); CRLF and a byte-order mark are accepted, a
    field over MAX_CSV_FIELD bytes or more than MAX_CSV_ROWS rows are refused."""
    text = read_text(path, what, error)
    old = csv.field_size_limit()
    csv.field_size_limit(MAX_CSV_FIELD)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = list(reader.fieldnames or [])
        rows = []
        for row in reader:
            if len(rows) >= MAX_CSV_ROWS:
                raise error(f"{what} {path} has over {MAX_CSV_ROWS:,} rows, the bound")
            rows.append(row)
    except csv.Error as exc:
        row = len(rows) + 1  # 1-based data row, header excluded, as the row checks count
        raise error(f"{what} {path} row {row}: {exc} (bound: {MAX_CSV_FIELD:,} bytes per field)") from None
    finally:
        csv.field_size_limit(old)
    return header, rows


def check_writable(path: str | Path, what: str, *, folder: bool = False, error: Error = BadInput) -> Path:
    """An output path that can be written, checked before any work: a file's folder (or a
    folder's nearest existing parent) exists and is writable, and a file is not a folder."""
    import os

    p = Path(path)
    if not folder and p.is_dir():
        raise error(f"{what} {path}: is a folder; give a file name")
    if folder and p.exists() and not p.is_dir():
        raise error(f"{what} {path}: is a file; give a folder")
    parent = next((q for q in (p.parent, *p.parent.parents) if q.exists()), Path("."))
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise error(f"{what} {path}: {parent} is not a writable folder")
    if parent.resolve().parts[:2] in (("/", "proc"), ("/", "sys")):  # kernel views: no new files
        raise error(f"{what} {path}: {parent} is not a writable folder")
    return p
