"""`planner pareto`: a two- (or three-) objective search written up as a report folder.

Files of a run folder: report.html (self-contained), report.md with charts/*.svg beside it,
pareto.csv (the front), trials.csv (every evaluated plan with its breakdown and `feasible`),
plan_<k>.json per front plan (re-evaluate with `planner estimate --plan`), run.json (inputs,
search, versions and the report data, from which `planner report` re-renders).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from planner.errors import BadInput, InfeasibleError
from planner.metrics.scorer import METRIC
from planner.report import pareto as report
from planner.report.files import dumps, versions
from planner.report.render import to_csv
from planner.request.optimize import OptimizeRequest, request_dict
from planner.result.explain import diagnose
from planner.result.front import FRONT_TOLERANCE, thin
from planner.result.records import PLAN_AXES, PLAN_BREAKDOWN, axis_columns, plan_record, scalar
from planner.result.sensitivity import sensitivity
from planner.search.certify import Outcome
from planner.search.scored import front_indices
from planner.space.axes import OPTIONS


def _columns(objectives) -> list[str]:
    """CSV columns: one per objective first, then the plan's axes, then its breakdown."""
    third = {"memory": ["memory_gb"], "energy": ["energy_kwh"]}
    obj = ["time_to_train_s", "cost_usd"] + [c for o in objectives for c in third.get(o, [])]
    obj += [c for c in ("energy_kwh", "co2_kg") if c not in obj]
    return obj + PLAN_AXES + [c for c in PLAN_BREAKDOWN if c not in obj]


def _trial_rows(scorer, cols: dict, m: dict, feasible: np.ndarray) -> list[dict]:
    """Every valid evaluated plan (index columns ``cols``, metrics ``m``) as a CSV row."""
    axes = axis_columns(scorer, cols, m)
    ms = {f"{k}_ms": m[f"{k}_s"] * 1e3 for k in ("forward", "backward", "update", "comm", "iteration")}
    rows = []
    for i in range(len(feasible)):
        row = {k: float(m[k][i]) for k in ("time_to_train_s", "cost_usd", "energy_kwh", "co2_kg")}
        row.update({k: _cell(v[i]) for k, v in axes.items()})
        row.update({k: float(v[i]) for k, v in ms.items()})
        row["throughput_samples_s"] = float(m["throughput_samples_s"][i])
        row["memory_gb"] = float(m["memory_bytes"][i] / 1e9)
        row["feasible"] = bool(feasible[i])
        rows.append(row)
    return rows


def _cell(v):
    """A CSV cell: the Python value, and an empty cell for None."""
    return "" if v is None else scalar(v)


def _scaling_counts(sp, per_node: int) -> tuple[list[int], list[int]]:
    """GPU counts of a scaling curve at ``per_node`` GPUs per node, with their per-node index."""
    ks, pn = [], []
    for k in sp.choices("gpus"):
        g = min(per_node, k)
        if (k == 1 or k % per_node == 0 or k < per_node) and g in sp.choices("per_node"):
            ks.append(k)
            pn.append(sp.choices("per_node").index(g))
    return ks, pn


def _scaling(scorer, cols: dict, keep: np.ndarray, front: list[dict]) -> dict:
    """Speedup vs GPU count per scheme for each GPU type of the front (data parallel), every
    other axis as in the front plan (index ``keep[i]`` of ``cols``)."""
    sp = scorer.space
    schemes = sp.choices("scheme")
    out = {}
    for j, p in zip(keep, front, strict=True):
        if p["gpu"] in out:
            continue
        ks, pn = _scaling_counts(sp, p["gpus_per_node"])
        n = len(ks) * len(schemes)
        one = {a: np.full(n, c[j]) for a, c in cols.items()}
        one["gpus"] = np.repeat([sp.choices("gpus").index(k) for k in ks], len(schemes))
        one["per_node"] = np.repeat(pn, len(schemes))
        one["split"] = np.full(n, sp.choices("split").index(sp.n_layers))
        one["scheme"] = np.tile(np.arange(len(schemes)), len(ks))
        thr = scorer.metrics(one)["throughput_samples_s"].reshape(len(ks), len(schemes))
        out[p["gpu"]] = {
            "batch_per_worker": p["batch_per_worker"],
            "per_node": p["gpus_per_node"],
            "schemes": {
                s: [[int(k), float(thr[i, c] / thr[0, c])] for i, k in enumerate(ks)]
                for c, s in enumerate(schemes)
            },
        }
    return out


def _rivals(scorer, cols: dict, m: dict, feasible: np.ndarray, on_front: set[str]) -> list[dict]:
    """Per GPU type off the front: its fastest feasible plan's time and cost, and its cheapest's."""
    out = []
    t, c = m["time_to_train_s"], m["cost_usd"]
    for g, name in enumerate(scorer.devices.names):
        sel = np.flatnonzero(feasible & (cols["gpu"] == g) & np.isfinite(c))
        if name in on_front or sel.size == 0:
            continue
        fast = sel[t[sel] <= t[sel].min() * 1.005]  # the fastest, ties (0.5%) to the cheapest
        f, k = fast[np.argmin(c[fast])], sel[np.argmin(c[sel])]
        host = (
            scorer.model.hosts.at(g, int(m["per_node"][f])) if scorer.model and scorer.model.hosts else None
        )
        out.append(
            {
                "gpu": name,
                "fast_s": float(t[f]),
                "fast_usd": float(c[f]),
                "cheap_s": float(t[k]),
                "cheap_usd": float(c[k]),
                "fast_gpus": int(m["gpus"][f]),
                "fast_input_share": float(m["input_s"][f] / m["iteration_s"][f]),
                "fast_instance": host.id if host is not None else None,
            }
        )
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
        "optimizer": req.optimizer,
        "data_loader": req.data_loader,
        "calibration": req.calibration,
        # the host: its instance (None: the assumed host) and the user's overrides of it
        "instance": p.get("instance"),
        "cpu_cores_per_gpu": req.cpu_cores_per_gpu,
        "nics": req.nics,
        "fabric": req.fabric,  # the network between nodes (configs/fabrics.toml)
        "rank_order": req.rank_order,  # which GPUs each parallel group occupies (costs.comm.ranks)
        **({"seq_len": p["seq_len"]} if "seq_len" in p else {}),
        # a kernel not the spec's (a plan file may be scored on another net: estimate NET --plan)
        **({"attention": p["attention"]} if p.get("attention_source") == "--attention" else {}),
        **({"image_size": p["image_size"]} if "image_size" in p else {}),
        **({"convergence": req.convergence} if req.convergence != "auto" else {}),
        # columns of the axes a user can set (e.g. accumulation), under their record keys
        **{f.key: p[f.key] for a in OPTIONS for f in a.fields},
        # what the expected time to train assumes of failures and checkpoints (planner.goodput);
        # `planner estimate --plan` scores a step and reads none of it
        "goodput": {
            "mode": getattr(req, "goodput", "on"),
            "failures_per_1k_gpu_hours": req.failures_per_1k_gpu_hours,
            "ckpt_write_gbs": req.ckpt_write_gbs,
            "restart_min": req.restart_min,
            "async_ckpt": req.async_ckpt,
            **{k: p.get(k) for k in ("goodput", "lost_hours", "ckpt_interval_s", "goodput_basis")},
        },
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
                "energy_kwh",
                "memory_gb",
            )
        },
    }


PARETO_OBJECTIVES = (("time", "cost"), ("time", "cost", "energy"), ("time", "cost", "memory"))


def check_objectives(text: str) -> list[str]:
    """`planner pareto` takes time,cost, time,cost,energy or time,cost,memory."""
    objectives = tuple(o.strip() for o in text.split(","))
    if objectives not in PARETO_OBJECTIVES:
        valid = ", ".join(",".join(o) for o in PARETO_OBJECTIVES)
        raise BadInput(f"--objectives '{text}' (valid: {valid})")
    return list(objectives)


def pareto_report(out: Outcome, req: OptimizeRequest) -> tuple[dict, dict[str, str]]:
    """The report data and every file of a run folder, from a search's outcome. Raises
    :class:`InfeasibleError` when no plan is feasible."""
    scorer, src = out.scorer, out.evaluated
    keep = front_indices(src)
    if keep.size == 0:
        raise InfeasibleError(diagnose(scorer, out.parts()))
    front = [plan_record(scorer, src.cols, int(j), out.objectives) for j in keep]
    search = {**out.search, **out.front_check(keep)}
    listed, merged = thin(front)
    search.update(front_tolerance=FRONT_TOLERANCE, front_merged=merged)
    keep, front = keep[listed], [front[i] for i in listed]
    tornado = sensitivity(scorer, src.cols, int(keep[0]))  # the fastest front plan
    if tornado is not None:
        front[0]["sensitivity"] = tornado
    valid = src.objectives[0] < 1e29
    cols = {a: c[valid] for a, c in src.cols.items()}
    m = scorer.metrics(cols)
    data = report.report_data(
        net=req.net,
        objectives=list(out.objectives),
        front=front,
        time_s=m[METRIC["time"]],
        cost_usd=m[METRIC["cost"]],
        feasible=src.feasible[valid],
        scaling=_scaling(scorer, src.cols, keep, front),
        inputs=request_dict(req),
        search=search,
        versions=versions(),
        constraints=scorer.limits.summary(),
        rivals=_rivals(scorer, cols, m, src.feasible[valid], {p["gpu"] for p in front}),
        energy=scorer.energy.describe(),
    )
    columns = _columns(out.objectives)
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
    from planner.request.files import read_json

    run_dir = Path(run_dir)
    if not (run_dir / "run.json").is_file():
        raise PlannerError(f"{run_dir} has no run.json (is it a `planner pareto` run folder?)")
    try:
        saved = read_json(run_dir / "run.json", "run record")  # bounded: size, UTF-8, nesting
        data = saved["report"]
        files = report.render_files(data)  # every file rendered before any is written
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # a record edited by hand or of another version: say which field, write nothing
        raise PlannerError(f"{run_dir / 'run.json'} is not a pareto run record: {exc!r}") from None
    for name, text in files.items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return sorted(files)
