"""Shared test helpers: where the project's reference data (the ``shared/`` folder) lives.

In CI the shared folder sits beside the clone (``<clone>/../shared``); ``PLANNER_SHARED``
overrides that. Tests that need the demo reference file skip, with a clear message, when the
folder is not there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SKIP_MESSAGE = (
    "reference data not found: put the project's shared/ folder beside the clone or set PLANNER_SHARED"
)
DEMO_JSON = Path("reference") / "paleo_demo_precompute.json"


def find_shared_dir() -> Path:
    """$PLANNER_SHARED, else the ``shared`` folder beside the clone (it may not exist)."""
    env = os.environ.get("PLANNER_SHARED")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared folder; skips the test when it (or its demo reference file) is absent."""
    path = find_shared_dir()
    if not (path / DEMO_JSON).is_file():
        pytest.skip(SKIP_MESSAGE)
    return path
