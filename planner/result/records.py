"""Plan records: one plan and its breakdown as a flat dict (times in ms and s, memory in GB).

The axis columns come from the declarations (:data:`planner.space.axes.FIELDS`); the
breakdown columns from the metrics. Every table and CSV that lists plans uses these keys.
"""

from __future__ import annotations

import math
import shlex

import numpy as np

from costs.comm.ranks import MEGATRON
from costs.specs.transformer_spec import attention_fields
from planner import catalog
from planner.metrics.scorer import Scorer
from planner.space.axes import AXES, KEYS

PLAN_AXES = list(KEYS)
PLAN_BREAKDOWN = [
    "forward_ms",
    "backward_ms",
    "update_ms",
    "comm_ms",
    "overhead_ms",
    "iteration_ms",
    "throughput_samples_s",
    "memory_gb",
]
# attention: a transformer's kernel (its source in the record's attention_source); empty for CNNs
PLAN_COLUMNS = [
    *PLAN_AXES,
    "attention",
    "network",
    "time_to_train_s",
    "cost_usd",
    "energy_kwh",
    "co2_kg",
    *PLAN_BREAKDOWN,
]
_MS = (
    "forward",
    "backward",
    "update",
    "compute",
    "sync",
    "act_comm",
    "comm",
    "overhead",
    "input",
    "iteration",
)


def scalar(v):
    """A numpy scalar as the Python value (int, float, str); None and Python values stay."""
    return v.item() if isinstance(v, np.generic) else v


def axis_columns(scorer: Scorer, cols: dict[str, np.ndarray], m: dict) -> dict[str, np.ndarray]:
    """The declared axes' record columns of some plans (index columns ``cols``, metrics ``m``)."""
    return scorer.space.fields(cols, m)


def plan_record(scorer: Scorer, cols: dict[str, np.ndarray], i: int, objectives) -> dict:
    """Plan ``i`` of the index columns ``cols`` as a flat record (see the module docstring)."""
    one = {a: c[i : i + 1] for a, c in cols.items()}
    m = scorer.metrics(one)
    rec = {k: scalar(v[0]) for k, v in axis_columns(scorer, one, m).items()}
    rec.update(
        workers=int(m["gpus"][0]),
        pipeline=scorer.pipeline,
        network=scorer.links.names[0],
        intra_node_link=scorer.links.names[1 + int(one["gpu"][0])],
    )
    rec.update({f"{k}_ms": float(m[f"{k}_s"][0] * 1e3) for k in _MS})
    cost = m["cost_usd"][0]
    g = int(one["gpu"][0])
    per_node = int(m["per_node"][0])
    usd = float(scorer.price_of(g, per_node))
    rec.update(
        usd_per_gpu_hour=None if math.isnan(usd) else usd,
        price_source=scorer.price_source_of(g, per_node),
    )
    if scorer.model is not None:
        rec.update(scorer.model.host_record(g, per_node))
        if scorer.model.fabric != "nonblocking":  # the network between nodes, when not the flat default
            rec["fabric"] = scorer.model.fabric
        if scorer.model.rank_order != MEGATRON:  # the rank order, when not Megatron-Core's default
            rec["rank_order"] = scorer.model.rank_order
    rec.update(
        throughput_samples_s=float(m["throughput_samples_s"][0]),
        time_to_train_s=float(m["time_to_train_s"][0]),
        cost_usd=None if math.isnan(cost) else float(cost),
        energy_kwh=_number(m["energy_kwh"][0]),
        co2_kg=_number(m["co2_kg"][0]),
        memory_gb=float(m["memory_bytes"][0] / 1e9),
        device_memory_gb=float(m["device_memory_bytes"][0] / 1e9),
        usable_memory_gb=float(m["device_memory_bytes"][0] * scorer.limits.memory_fraction / 1e9),
        gpu_hours=float(m["gpus"][0] * m["time_to_train_s"][0] / 3600),
    )
    rec.update(_owned_fields(scorer, g, m))
    rec.update(_epochs_fields(scorer, m))
    rec.update(_transformer_fields(scorer, m))
    rec.update(_goodput_fields(scorer, m))
    rec.update(_image_fields(scorer, one))
    rec.update(attention_fields(scorer.costs.net.meta))  # a transformer's kernel, and whose it is
    vals = scorer.objective_values(m, objectives)[:, 0]
    rec["objective"] = float(vals[0]) if len(vals) == 1 else [float(v) for v in vals]
    cons = scorer.limits.values(m)[:, 0]
    rec["constraints"] = {n: float(v) for n, v in zip(scorer.limits.names(), cons, strict=True)}
    rec["binding"] = _binding(scorer, rec)
    rec["estimate_command"] = estimate_command(scorer, rec)
    interval = _interval(scorer, rec)
    if interval is not None:  # the calibration's 80% interval (held-out or in-sample error)
        lo, hi = interval
        rec["iteration_ms_range"] = [rec["iteration_ms"] / hi, rec["iteration_ms"] / lo]
        rec["time_to_train_s_range"] = [rec["time_to_train_s"] / hi, rec["time_to_train_s"] / lo]
        rec.update(_interval_basis(scorer, rec))
    return rec


def _image_fields(scorer: Scorer, one: dict[str, np.ndarray]) -> dict:
    """A vision net's input size the plan is costed at: one size, or a resizing schedule's text
    with each phase's size, share of the epochs and step time (planner.resizing)."""
    if "vision" not in scorer.costs.net.meta:
        return {}
    if scorer.resize is None:
        return {"image_size": int(scorer.costs.net.meta["vision"]["image_size"])}
    phases = scorer.resize.schedule.phases
    totals = scorer.phase_totals(one)
    return {
        "image_size": scorer.resize.schedule.text,
        "image_phases": [
            {"image_size": ph.size, "fraction": float(ph.fraction), "iteration_ms": float(t[0] * 1e3)}
            for ph, t in zip(phases, totals, strict=True)
        ],
    }


def _binding(scorer: Scorer, rec: dict) -> list[str]:
    """The constraints within 5% of binding, and the search's own GPU cap when only money or a
    deadline bounds it and the plan uses all of it."""
    out = [n for n, v in rec["constraints"].items() if -0.05 < v <= 0 and n != "supported"]
    if scorer.limits.max_gpus is None and rec["gpus"] >= max(scorer.space.choices("gpus")):
        out.append("gpu_cap")
    return out


def _interval_basis(scorer: Scorer, rec: dict) -> dict:
    """What the plan's interval is: ``interval_kind`` held-out or in-sample (a profile fitted
    with --no-loso), ``interval_basis`` in words (widened when no stack was named)."""
    model = scorer.model
    if len(model.stacks) > 1:
        model = model.for_stack(rec["stack"])
    return {"interval_kind": model.interval_kind, "interval_basis": model.interval_basis}


def _epochs_fields(scorer: Scorer, m: dict) -> dict:
    """A CNN's epochs and what set them: the cited rule at this global batch (planner.epochs),
    else the fixed count (the request's --epochs, or the net's with no cited rule)."""
    if scorer.tokens is not None:
        return {}
    rule = scorer.epochs_rule
    fixed = (
        "fixed (--convergence fixed): --epochs or the net's own count"
        if scorer.convergence == "fixed"
        else "fixed: --epochs or the net's own count; no cited schedule by batch for this net and optimizer"
    )
    basis = rule.describe(int(m["global_batch"][0])) if rule is not None else fixed
    source = rule.source if rule is not None else ""
    return {"epochs": float(m["epochs"][0]), "epochs_basis": basis, "epochs_source": source}


def _owned_fields(scorer: Scorer, g: int, m: dict) -> dict:
    """An owned device's electricity: its price (USD per kWh) and the share of cost_usd it makes."""
    if scorer.gpu_caps is None or not np.isfinite(scorer.gpu_caps[g]):
        return {}
    usd_per_kwh = float(scorer.kwh_usd[g]) if scorer.kwh_usd is not None else 0.0
    return dict(
        electricity_usd_per_kwh=usd_per_kwh,
        electricity_cost_usd=_number(m["energy_kwh"][0] * usd_per_kwh),
    )


def _interval(scorer: Scorer, rec: dict) -> tuple[float, float] | None:
    """The 80% interval of the plan's stack (with several stacks searched, its own), wider on a
    GPU generation its profile has no run of (planner.metrics.model.UNSEEN_SD_LOG)."""
    model = scorer.model
    if model is not None and len(model.stacks) > 1:
        model = model.for_stack(rec["stack"])
    if model is None:
        return None
    return model.interval_for(str(catalog.device(rec["gpu"]).raw.get("generation", "")))


def _goodput_fields(scorer: Scorer, m: dict) -> dict:
    """Goodput (useful time over wall time, planner.goodput), the expected time lost to failures,
    checkpoints and restarts, the checkpoint interval assumed and the failure-free time."""
    rel = scorer.reliability
    out = dict(
        goodput_on=bool(rel.on),
        goodput=float(m["goodput"][0]),
        lost_hours=float(m["lost_s"][0] / 3600),
        failures=float(m["failures"][0]),
        useful_time_s=float(m["useful_s"][0]),
        useful_gpu_hours=float(m["gpus"][0] * m["useful_s"][0] / 3600),
        ckpt_write_s=float(m["ckpt_write_s"][0]),
        goodput_basis=rel.describe(),
    )
    interval = float(m["ckpt_interval_s"][0])
    out["ckpt_interval_s"] = interval if math.isfinite(interval) else None
    return out


def _transformer_fields(scorer: Scorer, m: dict) -> dict:
    """Tokens/s, MFU, HFU, memory per GPU and the pipeline's times of a transformer plan."""
    if "tokens_per_s" not in m:
        return {}
    seq = int(scorer.costs.net.meta["model"]["seq_len"])
    return dict(
        seq_len=seq,
        tokens_per_s=float(m["tokens_per_s"][0]),
        tokens_per_s_per_gpu=float(m["tokens_per_s"][0] / m["gpus"][0]),
        global_batch_tokens=int(m["global_batch"][0]) * seq,
        **_token_basis(scorer),
        memory_gb_per_gpu=float(m["memory_bytes"][0] / 1e9),
        **{k: float(m[k][0]) for k in ("mfu", "hfu") if k in m},
        **{
            f"{k}_ms": float(m[f"{k}_s"][0] * 1e3)
            for k in ("bubble", "tp_comm", "pp_comm", "ep_comm", "cp_comm")
            if f"{k}_s" in m
        },
    )


def _token_basis(scorer: Scorer) -> dict:
    """How many tokens the plan trains for and where that and its global batch come from."""
    t = scorer.tokens
    if t is None:
        return {}
    return dict(
        training_tokens=float(t.total * scorer.epochs),
        tokens_basis=t.basis,
        per_token_unit=t.unit,
        global_batch_source=t.batch_source,
    )


def _number(v) -> float | None:
    """A float, or None when unknown (NaN)."""
    return None if math.isnan(v) else float(v)


def _input_args(rec: dict) -> list[str]:
    """The sample's size a plan is costed at (a transformer's sequence, a vision net's image) and
    a transformer's attention kernel where not its spec's."""
    out = [f"--seq-len {rec['seq_len']}"] if "seq_len" in rec else []
    out += [f"--attention {rec['attention']}"] if rec.get("attention_source") == "--attention" else []
    return out + ([f"--image-size {shlex.quote(str(rec['image_size']))}"] if "image_size" in rec else [])


def estimate_command(scorer: Scorer, rec: dict) -> str:
    """The `planner estimate` call that reproduces this plan's iteration time: each axis's
    options, the model's options, then the options of axes that come last."""
    head = [a.estimate_args(rec) for a in AXES if not a.estimate_tail]
    tail = [a.estimate_args(rec) for a in AXES if a.estimate_tail]
    model = _model_args(scorer, rec)
    if scorer.convergence != "auto":  # the epochs rule the request named (planner.epochs)
        model.append(f"--convergence {scorer.convergence}")
    model.append(f"--conv-algorithm {scorer.costs.algorithm}")
    model += _input_args(rec)
    net = scorer.net_arg or scorer.costs.net.source.removesuffix(".json")
    parts = ["planner estimate", shlex.quote(net)]
    parts += [x for args in head for x in args] + model + [x for args in tail for x in args]
    if scorer.pipeline:
        parts.append("--pipeline")
    return " ".join(parts)


def _model_args(scorer: Scorer, rec: dict) -> list[str]:
    """The cost model's estimate options: the modern rules' profile, optimizer, loader and host,
    or a PALEO rule set and its PPP."""
    cm = scorer.model
    if cm is None or not cm.modern:
        return [
            f"--ppp-comp {scorer.ppp_comp}",
            f"--ppp-comm {scorer.ppp_comm}",
            f"--rules {scorer.costs.rules.name}",
        ]
    model = [f"--rules {cm.rules}", f"--optimizer {cm.optimizer}", f"--data-loader {cm.loader}"]
    if cm.hosts is not None:
        model += cm.hosts.args(list(scorer.space.choices("gpu")).index(rec["gpu"]), rec["gpus_per_node"])
    model += [f"--fabric {cm.fabric}"] if cm.fabric != "nonblocking" else []
    model += [f"--rank-order {cm.rank_order}"] if cm.rank_order != MEGATRON else []
    return model + ([f"--calibration {shlex.quote(cm.calibration)}"] if cm.calibration else [])
