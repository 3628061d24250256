"""The interface every launch target implements, and what they share.

A target answers two questions about a :class:`~planner.launch.plan.LaunchPlan`: can it run the
plan (:meth:`Target.refusal`: None, or one sentence saying which rule of the tool forbids it),
and which files run it (:meth:`Target.files`: file name -> text). An *engine* (torchrun with the
reference scripts, Megatron-LM, NeMo, torchtitan, DeepSpeed, accelerate) also gives the
command each node runs (:meth:`Target.node_command`), which a *scheduler* (Slurm, SkyPilot)
wraps. Node commands read ``$NNODES``, ``$NODE_RANK``, ``$MASTER_ADDR`` and ``$MASTER_PORT``,
which the scheduler's file sets.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from costs.comm.ranks import MEGATRON
from planner.errors import BadInput
from planner.launch.plan import LaunchPlan


class Refused(BadInput):
    """A target cannot run the plan (exit 2, like every bad input)."""


@dataclass(frozen=True)
class LaunchOptions:
    """What a plan does not say: where (``provider``: a SkyPilot cloud; ``pricing``: spot or
    not), and the engine a scheduler wraps (``engine``: a target name)."""

    provider: str | None = None
    pricing: str = "on-demand"
    engine: str | None = None
    port: int = 29500


class Target:
    """One launch target; subclasses set ``name``, ``validator`` and the methods below."""

    name: str = ""
    validator: str = ""  # the tool's own code that checks the files (tests run it)
    scheduler: bool = False  # wraps an engine's node command instead of training itself
    # search-axis choices the engine takes (option text of `planner optimize`); absent: any,
    # but for the pipeline schedule (costs.llm.pipeline.SCHEDULES), 1F1B alone (:meth:`takes`)
    axes: dict[str, tuple[str, ...]] = {}
    # the rank orders (costs.comm.ranks.ORDERS) it writes; a pipeline in another is refused
    rank_orders: tuple[str, ...] = (MEGATRON,)

    def takes(self) -> dict[str, tuple[str, ...]]:
        """The search-axis choices the engine takes: :attr:`axes`, 1F1B unless it names schedules."""
        return {"pp_schedule": ("1f1b",), **self.axes}

    def refusal(self, plan: LaunchPlan) -> str | None:
        """Why this target cannot run ``plan`` (one sentence citing the tool's rule), or None."""
        return None

    def couple(self, options: dict[str, str]) -> dict[str, str]:
        """The axis options (name -> option text, after :attr:`axes` narrowed them) kept to one
        region the engine runs whole, where its rules couple two axes; default: unchanged."""
        return options

    def files(self, plan: LaunchPlan, opts: LaunchOptions) -> dict[str, str]:
        """File name -> content of the files that run ``plan``; call only without a refusal."""
        raise NotImplementedError

    def node_command(self, plan: LaunchPlan, opts: LaunchOptions) -> str:
        """The shell command every node runs (engines only)."""
        raise NotImplementedError(f"{self.name} is not an engine")

    def check(self, plan: LaunchPlan) -> None:
        """Raise :class:`Refused` when this target cannot run ``plan``."""
        why = self.refusal(plan)
        schedules = self.takes()["pp_schedule"]
        if not why and plan.pp_schedule not in schedules and not self.scheduler:
            why = f"it runs no {plan.pp_schedule} pipeline schedule (it runs: {', '.join(schedules)})"
        if not why and plan.pp > 1 and plan.rank_order not in self.rank_orders and not self.scheduler:
            why = f"planner writes its pipelines in rank order {', '.join(self.rank_orders)} only, not {plan.rank_order}"
        if why:
            raise Refused(f"--target {self.name} cannot run this plan: {why}")


def torchrun_prefix(plan: LaunchPlan, opts: LaunchOptions) -> str:
    """torchrun's rendezvous for one process per GPU on every node (PyTorch's torchrun: --nnodes,
    --nproc-per-node, --node-rank, --master-addr, --master-port)."""
    return (
        f"torchrun --nnodes {plan.nodes} --nproc-per-node {plan.gpus_per_node} "
        '--node-rank "$NODE_RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"'
    )


def shell_script(lines: list[str]) -> str:
    """A bash script that stops at the first failing command."""
    return "#!/usr/bin/env bash\nset -euo pipefail\n" + "\n".join(lines) + "\n"


def args_text(args: list[str]) -> str:
    """Command-line arguments one option per line (values quoted for the shell)."""
    out, i = [], 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append(f"{args[i]} {shlex.quote(args[i + 1])}")
            i += 2
        else:
            out.append(args[i])
            i += 1
    return "\n".join(out) + "\n"


def precision_flag(plan: LaunchPlan) -> str:
    """The mixed-precision dtype the engines take (fp8 trains its master weights in bf16)."""
    return {"fp16": "fp16", "bf16": "bf16", "fp8": "bf16"}.get(plan.precision, "fp32")
