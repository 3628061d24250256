"""Files the user names on the command line (a calibration profile, a measurements CSV, a sweep
spec) that may be the shipped ones of ``configs/``."""

from __future__ import annotations

from pathlib import Path

from planner.catalog import configs_dir


def user_file(path: str | Path) -> Path:
    """``path`` as given; or, when no such file exists and the path is written into the shipped
    ``configs/`` folder (``configs/profiles/h100-sxm-pytorch-eager.toml``, as the README writes
    it), the shipped file, so that the documented commands also run from an installed package,
    outside a checkout. A file of the user's own of that name wins."""
    given = Path(path)
    if given.exists() or given.parts[:1] != ("configs",):
        return given
    shipped = configs_dir().joinpath(*given.parts[1:])
    return shipped if shipped.is_file() else given
