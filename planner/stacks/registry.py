"""The stack registry: configs/stacks/<name>.toml, plus user stacks in ``$PLANNER_STACKS`` or
``~/.config/planner/stacks/``.

A stack is what a prediction is for: a framework and its kernels, a data-parallel engine, the
calibration profile fitted on cited runs of that stack, and the plans it can run. A file's
tables: ``[stack]`` (description, framework, versions, kernels, data_parallel, families,
profile), ``[runs]`` (files: globs under configs/; framework: a regular expression on the
``framework`` column; sources: source keys; family: cnn or transformer) and ``[plans]``
(see :mod:`planner.stacks.plans`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from costs.llm.pipeline import SCHEDULES
from planner import catalog
from planner.errors import BadInput, CatalogError

FAMILIES = ("cnn", "transformer")
# The stack an answer uses when none is asked for, per net family (README "Stacks" says why).
DEFAULT = {"transformer": "megatron", "cnn": "optimized-cnn"}
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")
_STACK_KEYS = {
    "description", "framework", "versions", "kernels", "data_parallel", "families", "profile", "gradients",
}  # fmt: skip
# the dtype an engine accumulates gradients in under mixed precision: the parameters' (16-bit)
# or fp32 buffers (Megatron-Core's DDP); costs.llm.memory counts the bytes
GRADIENTS = ("param", "fp32")
_RUN_KEYS = {"files", "framework", "sources", "family"}
PLAN_BOOLS = ("tp", "pp", "sp", "ep", "interleave", "tp_overlap", "ep_overlap", "cp", "hybrid")
_PLAN_KEYS = {*PLAN_BOOLS, "zero", "zero_with_pp", "schedules", "source"}


@dataclass(frozen=True)
class Stack:
    """One stack as its file describes it (see the module docstring)."""

    name: str
    description: str
    framework: str
    versions: str
    kernels: str
    data_parallel: str
    families: tuple[str, ...]
    profile: str  # a shipped profile name (configs/profiles/<profile>.toml) or a file path
    gradients: str = "param"  # GRADIENTS
    files: tuple[str, ...] = ()
    framework_rule: str | None = None
    sources: tuple[str, ...] = ()
    family: str | None = None
    plans: dict = field(default_factory=dict)
    path: str = ""
    user: bool = False

    def allows(self, key: str) -> bool:
        """Whether its plans may use ``key`` (tp, pp, sp, ep, interleave, tp_overlap, ep_overlap, cp, hybrid)."""
        return bool(self.plans.get(key, True))

    @property
    def zero(self) -> tuple[int, ...]:
        return tuple(self.plans.get("zero", (0, 1, 2, 3)))

    @property
    def zero_with_pp(self) -> tuple[int, ...]:
        return tuple(self.plans.get("zero_with_pp", self.zero))

    @property
    def schedules(self) -> tuple[str, ...]:
        """Pipeline schedules it runs (costs.llm.pipeline.SCHEDULES)."""
        return tuple(self.plans.get("schedules", ("1f1b",)))


def _strings(value, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CatalogError(f"{what} must be a string or a list of strings")
    return tuple(value)


def _check_keys(file: str, table: str, data: dict, valid: set[str]) -> None:
    unknown = sorted(set(data) - valid)
    if unknown:
        raise CatalogError(f"{file}: unknown key [{table}] {unknown[0]} (valid: {', '.join(sorted(valid))})")


def _plans(file: str, plans: dict) -> dict:
    _check_keys(file, "plans", plans, _PLAN_KEYS)
    for k in PLAN_BOOLS:
        if k in plans and not isinstance(plans[k], bool):
            raise CatalogError(f"{file}: [plans] {k} must be true or false")
    for k in ("zero", "zero_with_pp"):
        v = plans.get(k, [0])
        if not isinstance(v, list) or not v or not set(v) <= {0, 1, 2, 3}:
            raise CatalogError(f"{file}: [plans] {k} must be a list of ZeRO stages 0-3")
    v = plans.get("schedules", ["1f1b"])
    if not isinstance(v, list) or "1f1b" not in v or not set(v) <= set(SCHEDULES):
        raise CatalogError(f"{file}: [plans] schedules must be a list of {', '.join(SCHEDULES)} with 1f1b")
    return plans


def parse(data: dict, name: str, path: str, user: bool = False) -> Stack:
    """Validate a parsed stack file (errors name the file, the key and the valid keys)."""
    s, runs = data.get("stack"), data.get("runs", {})
    if not isinstance(s, dict) or not isinstance(runs, dict):
        raise CatalogError(f"{path}: not a stack file (needs a [stack] table)")
    _check_keys(path, "stack", s, _STACK_KEYS)
    _check_keys(path, "runs", runs, _RUN_KEYS)
    _check_keys(path, "", {k for k in data if k not in ("stack", "runs", "plans")}, set())
    missing = sorted(k for k in ("description", "families", "profile") if k not in s)
    if missing:
        raise CatalogError(f"{path}: [stack] needs {', '.join(missing)}")
    if s.get("gradients", "param") not in GRADIENTS:
        raise CatalogError(f"{path}: [stack] gradients '{s['gradients']}' (valid: {', '.join(GRADIENTS)})")
    families = _strings(s["families"], f"{path}: [stack] families")
    if not set(families) <= set(FAMILIES):
        raise CatalogError(f"{path}: [stack] families {list(families)} (valid: {', '.join(FAMILIES)})")
    rule = runs.get("framework")
    if rule is not None:
        try:
            re.compile(rule)
        except re.error as exc:
            raise CatalogError(
                f"{path}: [runs] framework '{rule}' is not a regular expression: {exc}"
            ) from None
    return Stack(
        name=name,
        description=str(s["description"]),
        framework=str(s.get("framework", "")),
        versions=str(s.get("versions", "")),
        kernels=str(s.get("kernels", "")),
        data_parallel=str(s.get("data_parallel", "")),
        families=families,
        profile=str(s["profile"]),
        gradients=str(s.get("gradients", "param")),
        files=_strings(runs.get("files", []), f"{path}: [runs] files"),
        framework_rule=rule,
        sources=_strings(runs.get("sources", []), f"{path}: [runs] sources"),
        family=runs.get("family"),
        plans=_plans(path, data.get("plans", {})),
        path=path,
        user=user,
    )


def user_dirs() -> list[Path]:
    """Folders of user stacks: ``$PLANNER_STACKS`` (os.pathsep-separated), else
    ``~/.config/planner/stacks``."""
    env = os.environ.get("PLANNER_STACKS")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    return [Path.home() / ".config" / "planner" / "stacks"]


def _read(path: Path) -> dict:
    from planner.request.files import read_toml  # bounded: size, UTF-8, nesting

    return read_toml(path, "stack file", CatalogError)


@lru_cache(maxsize=4)
def _stacks(user_key: tuple[str, ...]) -> dict[str, Stack]:
    out: dict[str, Stack] = {}
    for p in sorted((catalog.configs_dir() / "stacks").glob("*.toml")):
        out[p.stem] = parse(_read(p), p.stem, f"configs/stacks/{p.name}")
    for folder in map(Path, user_key):
        for p in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
            data = _read(p)
            if "stack" in data and NAME.match(p.stem):  # a user stack; other files are ignored
                out[p.stem] = parse(data, p.stem, str(p), user=True)
    return out


def stacks() -> dict[str, Stack]:
    """Every stack by name: the shipped ones, then the user's (a user stack of the same name wins)."""
    return _stacks(tuple(str(d) for d in user_dirs()))


def get(name: str, option: str = "--stack") -> Stack:
    """The stack called ``name``; one-line error naming the option, the value and the valid names."""
    known = stacks()
    if name not in known:
        raise BadInput(f"{option} '{name}' is not a stack (valid: {', '.join(known)}, any, or a comma list)")
    return known[name]


def parse_choice(text: str | None, family: str, option: str = "--stack") -> tuple[str, ...]:
    """``--stack`` as given: None (the family's default), a name, ``any`` (every stack of the
    family) or a comma list; each name checked."""
    if text is None:
        return (DEFAULT[family],)
    raw = text.strip()
    if raw == "any":
        names = tuple(n for n, s in stacks().items() if family in s.families)
        return names
    parts = [p.strip() for p in raw.split(",")]
    if not raw or any(not p or not NAME.match(p) for p in parts):
        raise BadInput(
            f"{option} '{text}' is not a stack name (valid: {', '.join(stacks())}, any, or a comma list)"
        )
    out = tuple(dict.fromkeys(parts))
    for n in out:
        s = get(n, option)
        if family not in s.families:
            fits = [k for k, v in stacks().items() if family in v.families]
            raise BadInput(
                f"{option} '{n}' has no {family} runs (valid for {family} nets: {', '.join(fits)})"
            )
    return out


def family_of(net_meta: dict) -> str:
    """A net's family: transformer when its spec has a ``model`` description."""
    return "transformer" if "model" in net_meta else "cnn"
