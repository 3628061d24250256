"""The Evaluator and Metrics stages: plans scored by costs/, then metrics, objectives and
constraint values, all vectorised.

global_batch    = samples per optimizer step (GPUs x batch per GPU x microbatches), from costs/
time_to_train_s = epochs x ceil(dataset / global batch) x iteration (optimizer step) time (under
                  a resizing schedule, planner.resizing, the step time averaged over its phases
                  by their shares of the epochs); the
                  epochs follow the global batch where a cited rule covers the net
                  (planner.epochs), else they are the request's or the net's fixed count;
                  with goodput on (planner.goodput) the expected wall time of that training
                  with failures, checkpoints and restarts (useful_s: the failure-free time)
cost_usd        = GPUs x time_to_train_s / 3600 x price per GPU-hour (billed per second), plus
                  energy_kwh x electricity price for owned GPUs (a rented GPU's price includes power);
                  GPUs are billed for the wall time, failures included
throughput      = samples per second (maximised, so its objective value is negated)
memory          = bytes needed on one GPU (see planner.metrics.memory)
energy_kwh      = energy at the meter to train (costs.energy: board power while computing, a share
                  of it otherwise, node overhead, PUE); co2_kg = that x grid intensity
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from costs.goodput import checkpoint_bytes
from costs.hardware import ELEMENT_SIZE, PRECISIONS, DeviceTable, LinkTable
from costs.model import evaluate
from planner import catalog
from planner.energy import Energy, servers
from planner.goodput import Reliability
from planner.goodput import metrics as goodput_metrics
from planner.metrics import memory
from planner.metrics.limits import Limits
from planner.metrics.model import CostModel
from planner.metrics.objectives import METRIC, OBJECTIVES, SENSE  # noqa: F401 (re-exported)
from planner.resizing import Resized, blend
from planner.space.space import Space

if TYPE_CHECKING:
    from planner.request.optimize import Problem


@dataclass
class Scorer:
    """Scores index arrays of a :class:`Space`; everything costly is built once."""

    space: Space
    costs: object  # costs.specs.coefficients.NetCosts
    devices: DeviceTable
    links: LinkTable
    prices: np.ndarray  # (gpus in space,) or (gpus, per-node choices) USD per GPU-hour, NaN when unknown
    limits: Limits
    epochs: float
    dataset_size: int
    optimizer: str = "momentum"
    ppp_comp: float = 0.62
    ppp_comm: float = 0.72
    pipeline: bool = False
    evaluated: int = 0
    model: CostModel | None = None  # None: PALEO's rule set of ``costs`` with no options
    price_sources: tuple[str, ...] = ()  # per GPU of the space: where its price comes from
    energy: Energy | None = None  # None: the cited defaults of configs/energy.toml
    board_w: np.ndarray | None = None  # (gpus in space,) board power W, NaN when unknown
    gpu_caps: np.ndarray | None = None  # (gpus in space,) most GPUs a plan may use (owned), inf: any
    tokens: object = None  # planner.request.tokens.Tokens of a transformer request, else None
    net_arg: str | None = None  # the net as the request names it (zoo name or file path)
    kwh_usd: np.ndarray | None = None  # (gpus in space,) USD per kWh added to cost (owned), else 0
    epochs_rule: object = None  # planner.epochs.EpochsRule: epochs by global batch; None: ``epochs``
    reliability: Reliability | None = None  # goodput parameters; None: planner.goodput's defaults
    # progressive resizing (planner.resizing): the net at each phase's size; ``costs`` is then the
    # net at the largest size; None: one size
    resize: Resized | None = None
    convergence: str = "auto"  # --convergence as asked (planner.epochs.CHOICES); the rule is ``epochs_rule``

    def __post_init__(self) -> None:
        self._kwargs = self.model.kwargs(self.devices, self.links) if self.model else {}
        if self.energy is None:
            self.energy = catalog.energy_defaults()
        if self.board_w is None:
            self.board_w = _board_power(self.devices.names)
        if self.reliability is None:
            self.reliability = Reliability()
        n = len(self.resize.costs) if self.resize else 0
        self._phase_models = self.resize.models(self.model) if n and self.model else [None] * n

    def price_of(self, g, gpus_per_node) -> np.ndarray:
        """USD per GPU-hour of plans on device rows ``g`` in nodes of ``gpus_per_node`` GPUs."""
        prices = np.asarray(self.prices, dtype=float)
        if prices.ndim == 1:
            return prices[g]
        return prices[g, np.searchsorted(self.space.choices("per_node"), gpus_per_node)]

    def price_source_of(self, g: int, gpus_per_node: int) -> str | None:
        """Where the price of device row ``g`` in nodes of ``gpus_per_node`` comes from."""
        if g >= len(self.price_sources):
            return None
        src = self.price_sources[g]
        sizes = self.space.choices("per_node")
        return src if isinstance(src, str) else src[int(np.searchsorted(sizes, gpus_per_node))]

    @property
    def efficiency(self):
        """The modern rules' efficiencies of this scorer's tables (None under PALEO's rules)."""
        return self._kwargs.get("efficiency")

    def evaluate(self, cols: dict[str, np.ndarray], **override):
        """(plans, breakdown) of index columns; ``override`` replaces evaluator arguments (e.g.
        another ``efficiency`` for a sensitivity analysis)."""
        p = self.space.to_plans(cols, ppp_comp=self.ppp_comp, ppp_comm=self.ppp_comm, pipeline=self.pipeline)
        if not self.resize:
            return p, self._evaluate_at(self.costs, self.model, cols, p, override)
        # a resizing schedule: one evaluator call per phase, blended by the phases' shares
        parts = [
            self._evaluate_at(c, m, cols, p, override) for c, m in zip(self.resize.costs, self._phase_models)
        ]
        return p, blend(parts, self.resize.weights)

    def phase_totals(self, cols: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Step time (s) of each plan of ``cols`` in each phase of the resizing schedule."""
        p = self.space.to_plans(cols, ppp_comp=self.ppp_comp, ppp_comm=self.ppp_comm, pipeline=self.pipeline)
        return [
            self._evaluate_at(c, m, cols, p, {}).total for c, m in zip(self.resize.costs, self._phase_models)
        ]

    def _evaluate_at(self, costs, model: CostModel | None, cols, p, override: dict):
        """The breakdown of plans ``p`` of the net ``costs`` under ``model``."""
        if model is not None and len(model.stacks) > 1 and not override and len(p):
            return self._by_stack(costs, model, cols)
        kw = {**self._kwargs, **(model.plan_kwargs(p) if model else {}), **override}
        return evaluate(costs, p, self.devices, self.links, **kw)

    def _stack_kwargs_all(self) -> list[dict]:
        """The evaluator arguments of each searched stack (its profile's efficiencies), once."""
        if not hasattr(self, "_stack_kwargs"):
            self._stack_kwargs = [
                self.model.for_stack(name).kwargs(self.devices, self.links) for name in self.model.stacks
            ]
        return self._stack_kwargs

    def efficiency_of(self, cols: dict[str, np.ndarray]):
        """The efficiencies the first plan of ``cols`` is scored with: its stack's profile."""
        if self.model is None or len(self.model.stacks) < 2:
            return self.efficiency
        return self._stack_kwargs_all()[int(cols["stack"][0])].get("efficiency")

    def _by_stack(self, costs, model: CostModel, cols: dict[str, np.ndarray]):
        """Plans of several stacks: each stack's plans scored with its own profile."""
        from planner.metrics.by_stack import evaluate_by_stack

        self._stack_kwargs_all()

        def to_plans(sub):
            return self.space.to_plans(
                sub, ppp_comp=self.ppp_comp, ppp_comm=self.ppp_comm, pipeline=self.pipeline
            )

        return evaluate_by_stack(
            evaluate,
            costs,
            cols,
            to_plans,
            self.devices,
            self.links,
            lambda i: self._stack_kwargs[i],
            model.plan_kwargs,
        )

    def metrics(self, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every reported number of every plan (arrays), see the module docstring."""
        p, r = self.evaluate(cols)
        self.evaluated += len(p)
        prec = np.asarray(PRECISIONS)[p.precision]
        mem = r.memory
        if mem is None:
            param_bytes = np.array([memory.bytes_per_param(x, self.optimizer) for x in PRECISIONS])
            mem = memory.per_gpu(r.local_params, r.activation_bytes, param_bytes[p.precision])
        k = p.workers.astype(float)
        global_batch = np.rint(r.samples).astype(np.int64)  # whole samples (exact in float64)
        epochs = self.epochs_at(global_batch)
        iters = epochs * np.ceil(self.dataset_size / global_batch)
        total = r.total
        useful = iters * total
        ckpt = checkpoint_bytes(float(self.costs.total_params), ELEMENT_SIZE[p.precision], self.optimizer)
        good = goodput_metrics(self.reliability, useful, p.workers, ckpt)
        ttt = good.pop("wall_s")  # expected wall time: failures, checkpoints and restarts
        nodes = p.workers // p.gpus_per_node
        g = cols["gpu"]
        hosts = servers(p.workers, p.gpus_per_node)  # a 72-GPU NVLink domain: 9 servers' power
        power = self.energy.metrics(self.board_w[g], p.workers, hosts, total, r.compute, iters)
        # the lost time runs at the training's power (recomputed steps; a restart's idle GPUs
        # are counted alike, an upper bound)
        power = {k: v / good["goodput"] for k, v in power.items()}
        caps = self.gpu_caps[g] if self.gpu_caps is not None else np.full(len(p), np.inf)
        cost = ttt / 3600.0 * k * self.price_of(g, p.gpus_per_node)
        if self.kwh_usd is not None and self.kwh_usd.any():  # owned GPUs: their electricity
            rate = self.kwh_usd[g]
            cost = cost + np.where(rate > 0, power["energy_kwh"] * rate, 0.0)
        return {
            "gpus": p.workers,
            "per_node": p.gpus_per_node,
            "nodes": nodes,
            "batch_per_worker": p.batch,
            "global_batch": global_batch,
            "split": p.split,
            "precision_name": prec,
            "forward_s": r.forward,
            "backward_s": r.backward,
            "update_s": r.update,
            "sync_s": r.sync,
            "act_comm_s": r.act_comm,
            "compute_s": r.compute,
            "comm_s": r.comm,
            "overhead_s": getattr(r, "overhead", np.zeros(len(p))) + getattr(r, "input_stall", 0.0),
            "input_s": getattr(r, "input_stall", np.zeros(len(p))),
            "iteration_s": total,
            "throughput_samples_s": global_batch / total,
            "time_to_train_s": ttt,
            "useful_s": useful,
            **good,
            "epochs": epochs,
            "cost_usd": cost,
            **power,
            "gpu_cap": caps,
            "memory_bytes": mem,
            "device_memory_bytes": self.devices.memory_bytes[cols["gpu"]],
            "accumulation": p.accumulation,
            **self._transformer_metrics(p, r, global_batch / total),
        }

    def _transformer_metrics(self, p, r, samples_s: np.ndarray) -> dict[str, np.ndarray]:
        """Tokens/s, MFU (PaLM's model FLOPs utilisation: training FLOPs without recomputation
        over the precision's dense peak) and HFU (with it), for transformer plans."""
        seq = (self.costs.net.meta.get("model") or {}).get("seq_len")
        if seq is None:
            return {}
        out = {"tokens_per_s": samples_s * seq}
        model_flops = getattr(r, "model_flops", None)
        if model_flops is not None:
            peak = self.devices.peak[p.device, p.precision] * p.workers
            out["mfu"] = model_flops / r.total / peak
            out["hfu"] = r.hardware_flops / r.total / peak
            out["bubble_s"] = r.bubble
            out["tp_comm_s"] = r.tp_comm
            out["pp_comm_s"] = r.pp_comm
            out["ep_comm_s"] = r.ep_comm
            out["cp_comm_s"] = r.cp_comm
        return out

    @classmethod
    def of(cls, problem: Problem, space: Space) -> Scorer:
        """The scorer of a validated request over its space (device and link tables built once)."""
        req = problem.request
        return cls(
            space,
            problem.costs,
            catalog.device_table(problem.gpus),
            catalog.link_table([problem.network.key] + [i.device.intra_link for i in problem.devices]),
            problem.prices,
            problem.limits,
            problem.epochs,
            problem.dataset_size,
            req.optimizer,
            req.ppp_comp,
            req.ppp_comm,
            req.pipeline,
            model=problem.model,
            price_sources=problem.price_sources,
            energy=problem.energy,
            gpu_caps=problem.gpu_caps,
            tokens=problem.tokens,
            net_arg=req.net,
            kwh_usd=problem.kwh_usd,
            epochs_rule=problem.epochs_rule,
            reliability=problem.reliability,
            resize=problem.resize,
            convergence=req.convergence,
        )

    def epochs_at(self, global_batch) -> np.ndarray:
        """Epochs to train at each global batch (samples): the cited rule's, else the fixed count."""
        if self.epochs_rule is None:
            return np.full(np.shape(global_batch), float(self.epochs))
        return self.epochs_rule.epochs(global_batch)

    def objective_values(self, m: dict[str, np.ndarray], objectives: tuple[str, ...]) -> np.ndarray:
        """(n_objectives, plans) values to minimise."""
        return np.vstack([SENSE[o] * m[METRIC[o]] for o in objectives])


def _board_power(keys) -> np.ndarray:
    """Board power (W) of each device key (devices.toml tdp_w), NaN when the catalog has none."""
    known = catalog.devices()
    return np.array([known[k].raw.get("tdp_w", np.nan) if k in known else np.nan for k in keys], dtype=float)
