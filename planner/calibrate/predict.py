"""Predict measured runs with the evaluator: one vectorised call per net.

Each run becomes one data-parallel plan (its device, precision, GPUs, GPUs per node, batch per
GPU, scheme, gradient accumulation, the device's own link inside a node and the run's network
between nodes); a transformer is costed at the run's sequence length and attention kernel.
:class:`RunTable` does the per-run work once (catalog look-ups, net costs, plan columns), so a
calibration can re-score every run for each trial parameter vector cheaply. Runs split by tensor or pipeline parallelism become
plans of the LLM evaluator (modern rules); :func:`predictable` sets them aside under PALEO's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from costs.comm import schemes as comm
from costs.comm.ranks import MEGATRON
from costs.hardware import PRECISIONS
from costs.llm.context import CP_COMM
from costs.llm.memory import RECOMPUTE
from costs.llm.pipeline import SCHEDULES
from costs.model import Breakdown, Plans, plans
from costs.modern.evaluator import Options
from costs.rules import get_rules
from planner import catalog
from planner.calibrate.measurements import Run

# (net costs, plans, devices, links) -> Breakdown; the rule set's evaluator with its parameters
Evaluate = Callable[..., Breakdown]


def predictable(runs: Sequence[Run], rules: str = "modern") -> tuple[list[Run], str]:
    """The runs the rule set can predict, and a one-line note on those it cannot ('' if none):
    tensor, pipeline and expert parallelism are modelled by the modern rules only (costs.llm.evaluator)."""
    if get_rules(rules).modern:
        return list(runs), ""
    kept = [r for r in runs if not r.model_parallel]
    skipped = len(runs) - len(kept)
    note = f"{skipped} model-parallel runs skipped: rules {rules} do not model TP/PP/EP/CP" if skipped else ""
    return kept, note


@dataclass(frozen=True)
class _NetGroup:
    rows: np.ndarray  # indices into the run list
    costs: object
    plans: Plans
    transformer: bool  # trains with Adam (GPT, BERT, Llama); the CNNs with SGD and momentum
    loader: dict  # evaluator arguments of the runs' data loaders (loader_rate, decode_s); {} if none
    order: str = MEGATRON  # the runs' rank order (costs.comm.ranks)


class RunTable:
    """Measured runs prepared for repeated scoring under one rule set."""

    def __init__(self, runs: Sequence[Run], rules: str, algorithm: str = "gemm"):
        self.runs = tuple(runs)
        self.rules = rules
        device_keys = sorted({r.device for r in self.runs})
        link_keys = sorted({r.network for r in self.runs} | {self._intra(d) for d in device_keys})
        self.devices = catalog.device_table(device_keys)
        self.links = catalog.link_table(link_keys)
        self.device_keys, self.link_keys = tuple(device_keys), tuple(link_keys)
        self.measured = np.array([r.samples_per_s for r in self.runs], dtype=float)
        self.sources = tuple(r.source for r in self.runs)
        groups = []
        keys = [(r.net, r.seq_len or 0, r.rank_order, r.attention) for r in self.runs]
        for net, seq, order, attention in dict.fromkeys(keys):
            rows = np.array([i for i, k in enumerate(keys) if k == (net, seq, order, attention)])
            # seq 0 and attention None: the spec's own
            costs = catalog.net_costs(net, rules, algorithm, seq or None, None, attention)
            plans_ = self._plans(costs, [self.runs[i] for i in rows])
            loader = _loader_kwargs([self.runs[i] for i in rows])
            groups.append(_NetGroup(rows, costs, plans_, "model" in costs.net.meta, loader, order))
        self.groups = tuple(groups)
        self._memo: dict[int, tuple] = {}  # per group: (what its prediction depends on, prediction)

    @staticmethod
    def _intra(device: str) -> str:
        return catalog.device(device).device.intra_link or "pcie3"

    def _plans(self, costs, runs: list[Run]) -> Plans:
        col = lambda f, t=np.int64: np.array([f(r) for r in runs], dtype=t)  # noqa: E731
        return plans(
            costs.n_layers,
            device=col(lambda r: self.device_keys.index(r.device)),
            batch=col(lambda r: r.batch_per_gpu),
            workers=col(lambda r: r.gpus),
            gpus_per_node=col(lambda r: r.gpus_per_node),
            scheme=col(lambda r: comm.SCHEME_NAMES.index(r.scheme)),
            network=col(lambda r: self.link_keys.index(r.network)),
            intra_link=col(lambda r: self.link_keys.index(self._intra(r.device))),
            precision=col(lambda r: PRECISIONS.index(r.precision)),
            accumulation=col(lambda r: r.accumulation),
            tp=col(lambda r: r.tp),
            pp=col(lambda r: r.pp),
            interleave=col(lambda r: r.interleave),
            ep=col(lambda r: r.ep),
            zero=col(lambda r: r.zero),
            sp=col(lambda r: r.sp, bool),
            recompute=col(lambda r: RECOMPUTE.index(r.recompute or "none")),
            tp_overlap=col(lambda r: r.tp_overlap, bool),
            cp=col(lambda r: r.cp),
            cp_comm=col(lambda r: CP_COMM.index(r.cp_comm)),
            schedule=col(lambda r: SCHEDULES.index(r.pp_schedule)),
            ep_overlap=col(lambda r: r.ep_overlap, bool),
        )

    def __len__(self) -> int:
        return len(self.runs)

    def subset(self, mask: np.ndarray) -> RunTable:
        """The runs where ``mask`` is true (re-prepared; cheap, net costs are cached)."""
        return RunTable([r for r, keep in zip(self.runs, mask) if keep], self.rules)

    def samples_per_s(self, evaluate: Evaluate, transformer_options=None, **options) -> np.ndarray:
        """Predicted samples per second of every run, in run order, under
        ``evaluate(costs, plans, devices, links, **options)`` (one call per net); a transformer's
        runs take ``options=transformer_options`` where given (their optimizer is Adam).

        A net's runs are re-scored only when a parameter they depend on changed since the last
        call (its devices' and links' efficiencies, the overheads, the other options): a fit's
        numerical Jacobian perturbs one parameter at a time, and most touch a few nets."""
        out = np.empty(len(self.runs))
        for g in self.groups:
            opts = {**options, **g.loader}
            if g.transformer and transformer_options is not None:
                opts = {**opts, "options": transformer_options}
            if g.order != MEGATRON:  # a rank order other than the default: the runs' own
                opts = {**opts, "options": replace(opts.get("options") or Options(), rank_order=g.order)}
            key = (evaluate, _relevant(g.plans, opts))
            hit = self._memo.get(id(g))
            if hit is None or hit[0] != key:
                hit = (key, evaluate(g.costs, g.plans, self.devices, self.links, **opts).throughput)
                self._memo[id(g)] = hit
            out[g.rows] = hit[1]
        return out


def _loader_kwargs(runs: list[Run]) -> dict:
    """The evaluator arguments of the runs' data loaders as their sources state them
    (planner.loaders): samples/s per node (a GPU's rate x the GPUs of a node the run uses) and
    GPU seconds per sample decoding on the SMs; {} when no run has an input bound."""
    from planner import loaders

    got = [loaders.per_device(r.data_loader, r.device, r.cpu_cores_per_gpu) for r in runs]
    rate = np.array([g[0] for g in got]) * np.array([min(r.gpus_per_node, r.gpus) for r in runs])
    decode = np.array([g[1] for g in got])
    out = {}
    if np.isfinite(rate).any():
        out["loader_rate"] = rate
    if (decode > 0).any():
        out["decode_s"] = decode
    return out


def _relevant(plans: Plans, options: dict) -> tuple:
    """What a group's prediction depends on: the efficiency rows of its devices and links, the
    overheads, and every other option (compared by value)."""
    out = []
    for name, value in options.items():
        if name != "efficiency":
            out.append((name, repr(value)))
            continue
        dev = np.unique(plans.device)
        links = np.unique(np.concatenate([plans.network, plans.intra_link]))
        rows = [value.gemm[dev], value.vector[dev], value.memory[dev], value.link[links]]
        rows += [x[dev] for x in (value.multiplier, value.winograd, value.attention) if x is not None]
        scalars = (value.kernel_min_s, value.host_per_kernel_s, value.iteration_s)
        out.append((name, b"".join(np.ascontiguousarray(r).tobytes() for r in rows), scalars))
    return tuple(out)
