"""Run folders under results/: written whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path


def versions() -> dict:
    """Versions a run depends on, recorded with its outputs (Optuna's from its package metadata:
    a run that enumerates its space does not import it)."""
    from importlib.metadata import PackageNotFoundError, version

    import numpy

    from planner._version import __version__

    try:
        optuna_version = version("optuna")
    except PackageNotFoundError:  # pragma: no cover - a required dependency
        optuna_version = "not installed"
    return {
        "planner": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "optuna": optuna_version,
    }


def run_dir(root: str | Path, net: str, what: str) -> Path:
    """results/<timestamp>_<net>_<what>/ (not created)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{Path(net).stem}_{what}")
    return Path(root) / f"{stamp}_{safe}"


def write_atomic(target: Path, files: dict[str, str | bytes]) -> Path:
    """Write ``files`` into a fresh folder ``target`` via a temporary folder and one rename."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would hide the run from other users
    try:
        for name, content in files.items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        target = _rename_free(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _rename_free(tmp: Path, target: Path) -> Path:
    """Rename ``tmp`` to ``target``, or, when that name is taken (runs in the same second), to
    ``target-2``, ``target-3``, ...: every run keeps its own folder, none is overwritten."""
    name, n = target.name, 1
    while True:
        try:
            if not target.exists():
                tmp.rename(target)
                return target
        except OSError as exc:  # another process took the name between the check and the rename
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        n += 1
        target = target.with_name(f"{name}-{n}")


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, default=str) + "\n"
