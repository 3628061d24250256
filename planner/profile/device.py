"""The local device and what it is (imports torch): ``--device`` resolved, the GPU's name and
driver, the framework version and the date that make a row's ``source``."""

from __future__ import annotations

import datetime as dt
import platform
import shutil
import subprocess

from planner.errors import BadInput
from planner.profile import lazy, rows
from planner.profile.rows import Env


def _defined() -> dict:
    """This module's names, defined on first use: PyTorch, the optional extra of `planner
    profile`, is imported here and not when planner starts."""
    import torch

    DEVICES = ("auto", "cpu", "cuda")

    def resolve(choice: str) -> torch.device:
        """``auto``: the GPU when PyTorch sees one, else the CPU; ``cuda`` without one is an error."""
        if choice not in DEVICES:
            raise BadInput(f"--device '{choice}' (valid: {', '.join(DEVICES)})")
        has_gpu = torch.cuda.is_available()
        if choice == "cuda" and not has_gpu:
            build = (
                "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            )
            raise BadInput(
                f"--device cuda: PyTorch {torch.__version__} ({build}) sees no CUDA GPU; use --device cpu"
            )
        return torch.device("cuda" if choice == "cuda" or (choice == "auto" and has_gpu) else "cpu")

    def _driver() -> str:
        """The NVIDIA driver version as nvidia-smi reports it, "" when it cannot be read."""
        exe = shutil.which("nvidia-smi")
        if not exe:
            return ""
        try:
            out = subprocess.run(
                [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""

    def env(device: torch.device, given_key: str | None) -> Env:
        """Where this profile runs; the catalog key is read from the GPU's name (or given)."""
        date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        if device.type == "cuda":
            name = torch.cuda.get_device_name(device)
            return Env(name, rows.device_key(name, given_key), _driver(), torch.__version__, date)
        rows.device_key(None, given_key)  # a given key must still be a catalog device
        name = f"{platform.machine() or 'unknown'} CPU ({torch.get_num_threads()} threads)"
        return Env(name, rows.CPU, "", torch.__version__, date)

    return locals()


_defined, __getattr__ = lazy.names(_defined)
