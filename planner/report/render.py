"""Plain renderers for lists of records: aligned text tables, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json

from planner.units import duration  # noqa: F401  (re-exported for renderers)


def _fmt(value, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def table(records: list[dict], columns: list[tuple[str, str]], digits: int = 3) -> str:
    """An aligned text table of ``records``; ``columns`` are (key, header) pairs."""
    rows = [[h for _, h in columns]]
    rows += [[_fmt(r.get(k, ""), digits) for k, _ in columns] for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = []
    for j, row in enumerate(rows):
        cells = [c.ljust(w) if j == 0 or not _numeric(c) else c.rjust(w) for c, w in zip(row, widths)]
        lines.append("  ".join(cells).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _numeric(cell: str) -> bool:
    return cell.replace(",", "").replace(".", "").replace("-", "").replace("e", "").isdigit()


# A spreadsheet runs a cell that begins with one of these as a formula (OWASP, "CSV Injection",
# https://owasp.org/www-community/attacks/CSV_Injection, read 2026-11-24): such a text cell gets
# a leading apostrophe, which spreadsheets show as text. Numbers ("-5", "1e3") are left alone.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value):
    """A CSV cell that no spreadsheet runs as a formula (see _FORMULA_START)."""
    if not isinstance(value, str) or not value.startswith(_FORMULA_START):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def to_csv(records: list[dict], columns: list[str] | None = None) -> str:
    """CSV with a header row; columns default to the keys of the first record; text cells
    that a spreadsheet would run as formulas neutralised (:func:`safe_cell`)."""
    if not records:
        return ""
    columns = columns or list(records[0])
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writerow({c: safe_cell(c) for c in columns})
    for r in records:
        writer.writerow({k: safe_cell(v) for k, v in r.items()})
    return buf.getvalue()


def to_json(obj) -> str:
    return json.dumps(obj, indent=2)
