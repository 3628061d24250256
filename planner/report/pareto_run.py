"""`planner pareto`: a two- (or three-) objective search written up as a report folder.

Files of a run folder: report.html (self-contained), report.md with charts/*.svg beside it,
pareto.csv (the front), trials.csv (every evaluated plan with its breakdown and `feasible`),
plan_<k>.json per front plan (re-evaluate with `planner estimate --plan`), run.json (inputs,
search, versions and the report data, from which `planner report` re-renders).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from planner.errors import BadInput, InfeasibleError
from planner.metrics.scorer import METRIC
from planner.report import pareto as report
from planner.report.files import dumps
from planner.report.render import to_csv
from planner.result.optimize import (
    PLAN_AXES,
    PLAN_BREAKDOWN,
    OptimizeRequest,
    _plan_record,
    diagnose,
    front_indices,
    search_and_certify,
)


def _columns(objectives) -> list[str]:
    """CSV columns: one per objective first, then the plan's axes, then its breakdown."""
    obj = ["time_to_train_s", "cost_usd"] + (["memory_gb"] if "memory" in objectives else [])
    return obj + PLAN_AXES + [c for c in PLAN_BREAKDOWN if c not in obj]


def _trial_rows(scorer, cols: dict, m: dict, feasible: np.ndarray) -> list[dict]:
    """Every valid evaluated plan (index columns ``cols``, metrics ``m``) as a CSV row."""
    sp = scorer.space
    L = sp.n_layers
    names = [s.name for s in scorer.costs.net.layers]
    ms = {k: m[k.replace("_ms", "_s")] * 1e3 for k in ("forward_ms", "backward_ms", "update_ms", "comm_ms")}
    ms["iteration_ms"] = m["iteration_s"] * 1e3
    rows = []
    gpu, scheme = np.asarray(sp.gpu), np.asarray(sp.scheme)
    for i in range(len(feasible)):
        split = int(m["split"][i])
        rows.append(
            {
                "time_to_train_s": float(m["time_to_train_s"][i]),
                "cost_usd": float(m["cost_usd"][i]),
                "gpu": gpu[cols["gpu"][i]],
                "gpus": int(m["gpus"][i]),
                "gpus_per_node": int(m["per_node"][i]),
                "nodes": int(m["nodes"][i]),
                "batch_per_worker": int(m["batch_per_worker"][i]),
                "global_batch": int(m["global_batch"][i]),
                "parallel": "data" if split >= L else "hybrid",
                "split": "" if split >= L else names[split],
                "scheme": scheme[cols["scheme"][i]],
                "precision": str(m["precision_name"][i]),
                **{k: float(v[i]) for k, v in ms.items()},
                "throughput_samples_s": float(m["throughput_samples_s"][i]),
                "memory_gb": float(m["memory_bytes"][i] / 1e9),
                "feasible": bool(feasible[i]),
            }
        )
    return rows


def _scaling(scorer, front: list[dict]) -> dict:
    """Speedup vs GPU count per scheme for each GPU type of the front (data parallel)."""
    sp = scorer.space
    out = {}
    for p in front:
        if p["gpu"] in out:
            continue
        g = sp.gpu.index(p["gpu"])
        counts = [k for k in sp.gpus if k == 1 or k % p["gpus_per_node"] == 0 or k < p["gpus_per_node"]]
        pn = [
            sp.per_node.index(min(p["gpus_per_node"], k))
            if min(p["gpus_per_node"], k) in sp.per_node
            else None
            for k in counts
        ]
        ks = [k for k, x in zip(counts, pn, strict=True) if x is not None]
        pn = [x for x in pn if x is not None]
        n = len(ks) * len(sp.scheme)
        cols = {
            "gpu": np.full(n, g),
            "gpus": np.repeat([sp.gpus.index(k) for k in ks], len(sp.scheme)),
            "per_node": np.repeat(pn, len(sp.scheme)),
            "split": np.full(n, sp.split.index(sp.n_layers)),
            "scheme": np.tile(np.arange(len(sp.scheme)), len(ks)),
            "precision": np.full(n, sp.precision.index(p["precision"])),
            "batch": np.full(n, sp.batch.index(p["batch_per_worker"]) if sp.global_batch is None else 0),
        }
        m = scorer.metrics(cols)
        thr = m["throughput_samples_s"].reshape(len(ks), len(sp.scheme))
        base = thr[0]
        out[p["gpu"]] = {
            "batch_per_worker": p["batch_per_worker"],
            "per_node": p["gpus_per_node"],
            "schemes": {
                s: [[int(k), float(thr[i, j] / base[j])] for i, k in enumerate(ks)]
                for j, s in enumerate(sp.scheme)
            },
        }
    return out


def plan_file(p: dict, req: OptimizeRequest) -> dict:
    """A front plan as a self-describing JSON document `planner estimate --plan` reads."""
    return {
        "net": req.net,
        "device": p["gpu"],
        "network": p["network"],
        "workers": p["gpus"],
        "gpus_per_node": p["gpus_per_node"],
        "batch_per_worker": p["batch_per_worker"],
        "parallel": p["parallel"],
        "split": p["split"],
        "scheme": p["scheme"],
        "precision": p["precision"],
        "pipeline": p["pipeline"],
        "ppp_comp": req.ppp_comp,
        "ppp_comm": req.ppp_comm,
        "rules": req.rules,
        "conv_algorithm": req.conv_algorithm,
        "expected": {
            k: p[k]
            for k in (
                "forward_ms",
                "backward_ms",
                "update_ms",
                "comm_ms",
                "iteration_ms",
                "time_to_train_s",
                "cost_usd",
                "memory_gb",
            )
        },
    }


def run_pareto(req: OptimizeRequest) -> tuple[dict, dict[str, str]]:
    """Search and build the report; returns (report data, files to write). Raises
    :class:`InfeasibleError` before anything is written when no plan is feasible."""
    objectives = [o.strip() for o in req.objective.split(",")]
    if (
        objectives[:2] != ["time", "cost"]
        or len(objectives) > 3
        or (len(objectives) == 3 and objectives[2] != "memory")
    ):
        raise BadInput(f"--objectives '{req.objective}' must be time,cost or time,cost,memory")
    from planner.report.files import versions

    out = search_and_certify(req)
    scorer, src = out.scorer, out.evaluated
    keep = front_indices(src)
    if keep.size == 0:
        raise InfeasibleError(diagnose(scorer, src))
    front = [_plan_record(scorer, src.cols, int(j), out.objectives) for j in keep]
    search = {**out.search, **out.front_check(keep)}
    valid = src.objectives[0] < 1e29
    cols = {a: c[valid] for a, c in src.cols.items()}
    m = scorer.metrics(cols)
    data = report.report_data(
        net=req.net,
        objectives=objectives,
        front=front,
        time_s=m[METRIC["time"]],
        cost_usd=m[METRIC["cost"]],
        feasible=src.feasible[valid],
        scaling=_scaling(scorer, front),
        inputs={k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(req).items()},
        search=search,
        versions=versions(),
        constraints=scorer.limits.summary(),
    )
    columns = _columns(objectives)
    files = report.render_files(data)
    files["pareto.csv"] = to_csv(data["front"], ["label"] + columns + ["binding_text", "kind", "why"])
    files["trials.csv"] = to_csv(_trial_rows(scorer, cols, m, src.feasible[valid]), columns + ["feasible"])
    for k, p in enumerate(data["front"]):
        files[f"plan_{k}.json"] = dumps(plan_file(p, req))
    files["run.json"] = dumps(
        {"request": data["inputs"], "search": search, "versions": data["versions"], "report": data}
    )
    return data, files


def rerender(run_dir: str | Path) -> list[str]:
    """`planner report RUN_DIR`: render the report files again from run.json."""
    from planner.errors import PlannerError

    run_dir = Path(run_dir)
    try:
        saved = json.loads((run_dir / "run.json").read_text())
        data = saved["report"]
    except FileNotFoundError:
        raise PlannerError(f"{run_dir} has no run.json (is it a `planner pareto` run folder?)") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise PlannerError(f"{run_dir / 'run.json'} is not a pareto run record: {exc}") from None
    files = report.render_files(data)
    for name, text in files.items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return sorted(files)
