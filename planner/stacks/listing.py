"""`planner list stacks`, and the line an answer prints about its stack: runs, sources, GPU
generations and held-out error from the stack's fitted profile, and what it lacks."""

from __future__ import annotations

from planner.stacks import registry
from planner.stacks.runs import profile

MIN_RUNS = 30  # fewer runs than this: the fit's held-out error rests on little
MIN_SOURCES = 4  # fewer independent sources than this: one publication's habits can dominate


def caveats(meta: dict) -> list[str]:
    """What a stack's fit lacks, from its profile's metadata ([] when nothing)."""
    out = []
    runs, sources = int(meta.get("runs", 0)), int(meta.get("sources", 0))
    if runs < MIN_RUNS:
        out.append(f"few runs ({runs}, under {MIN_RUNS})")
    if sources < MIN_SOURCES:
        out.append(f"few sources ({sources}, under {MIN_SOURCES})")
    gens = meta.get("generations", [])
    if len(gens) == 1:
        out.append(f"one GPU generation ({gens[0]})")
    if meta.get("error_kind") != "leave-one-source-out":
        out.append("in-sample error only (fitted with --no-loso)")
    return out


def _error(meta: dict, family: str) -> float | None:
    value = meta.get(f"median_ape_{family}")
    return None if value is None else float(value)


def record(stack: registry.Stack) -> dict:
    """One stack's listing record (JSON keys; the table shows a subset)."""
    meta = profile(stack).meta
    kind = "held-out" if meta.get("error_kind") == "leave-one-source-out" else "in-sample"
    return {
        "stack": stack.name,
        "families": list(stack.families),
        "runs": int(meta.get("runs", 0)),
        "sources": int(meta.get("sources", 0)),
        "generations": list(meta.get("generations", [])),
        "error_kind": kind,
        "median_ape_cnn": _error(meta, "cnn"),
        "median_ape_transformer": _error(meta, "transformer"),
        "caveats": caveats(meta),
        "description": stack.description,
        "framework": stack.framework,
        "versions": stack.versions,
        "kernels": stack.kernels,
        "data_parallel": stack.data_parallel,
        "profile": stack.profile,
        "fitted_on": list(meta.get("fitted_on", [])),
        "file": stack.path,
        "user": stack.user,
    }


def listing() -> tuple[list[dict], list[tuple[str, str]]]:
    """Records and table columns of every stack."""
    recs = []
    for s in registry.stacks().values():
        r = record(s)
        err = [
            f"{f} {r[f'median_ape_{f}']:.1f}%"
            for f in ("cnn", "transformer")
            if r[f"median_ape_{f}"] is not None
        ]
        default = [f for f, n in registry.DEFAULT.items() if n == s.name]
        recs.append(
            {
                **r,
                "gens": ", ".join(r["generations"]),
                "error": f"{', '.join(err)} ({r['error_kind']})",
                "note": "; ".join((["default for " + ", ".join(default)] if default else []) + r["caveats"]),
            }
        )
    cols = [
        ("stack", "stack"),
        ("runs", "runs"),
        ("sources", "sources"),
        ("gens", "GPU generations"),
        ("error", "median error per family"),
        ("note", "note"),
    ]
    return recs, cols


_PLURAL = {"cnn": "CNNs", "transformer": "transformers"}


def summary_line(name: str, transformer: bool = False) -> str:
    """One line an answer prints about its stack: what it is fitted on, its held-out error, and
    what it lacks; for a transformer, also the gradient buffers its memory counts."""
    r = record(registry.get(name))
    err = ", ".join(
        f"{_PLURAL[f]} {r[f'median_ape_{f}']:.1f}%"
        for f in ("cnn", "transformer")
        if r[f"median_ape_{f}"] is not None
    )
    line = (
        f"Stack {name}: {r['framework']}; fitted on {r['runs']} runs from {r['sources']} sources "
        f"({', '.join(r['generations'])}), {r['error_kind']} median error {err}"
    )
    line += f". Caution: {'; '.join(r['caveats'])}." if r["caveats"] else "."
    if transformer:  # costs.llm.memory: 2 bytes per parameter apart
        line += (
            " Gradients in fp32 buffers (2 bytes per parameter more than 16-bit ones)."
            if registry.get(name).gradients == "fp32"
            else " Gradients at the parameters' precision (a stack file's gradients = \"fp32\" adds 2 bytes per parameter)."
        )
    return line
