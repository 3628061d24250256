"""Every launch target, by name, and writing a plan's files for several of them at once."""

from __future__ import annotations

from planner.errors import BadInput
from planner.launch.accelerate import Accelerate
from planner.launch.deepspeed import DeepSpeed
from planner.launch.megatron import Megatron
from planner.launch.nemo import Nemo
from planner.launch.plan import LaunchPlan
from planner.launch.skypilot import SkyPilot
from planner.launch.slurm import Slurm
from planner.launch.target import LaunchOptions, Refused, Target
from planner.launch.torchrun import Torchrun
from planner.launch.torchtitan import Torchtitan

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (Torchrun(), Slurm(), SkyPilot(), Megatron(), Nemo(), Torchtitan(), DeepSpeed(), Accelerate())
}
DEFAULT_ENGINE = "torchrun"


def parse_targets(text: str, option: str = "--target") -> list[Target]:
    """The targets of a comma-separated list, each known, none twice."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in TARGETS]
    if bad or not names:
        raise BadInput(f"{option} '{bad[0] if bad else text}' (valid: {', '.join(TARGETS)})")
    return [TARGETS[n] for n in dict.fromkeys(names)]


def engine_for(targets: list[Target]) -> Target:
    """The engine a scheduler wraps: the first engine target named, else torchrun."""
    engines = [t for t in targets if not t.scheduler]
    return engines[0] if engines else TARGETS[DEFAULT_ENGINE]


def emit(plan: LaunchPlan, targets: list[Target], opts: LaunchOptions) -> dict[str, str]:
    """Every file of every target for ``plan`` (file name -> text); raises :class:`Refused`
    naming the first target that cannot run it. Schedulers wrap the engine's node command
    and bring its files along."""
    for t in targets:
        t.check(plan)
    files: dict[str, str] = {}
    engine = engine_for(targets)
    for t in targets:
        if t.scheduler:
            why = engine.refusal(plan)
            if why:  # name the engine, and how to choose another
                raise Refused(
                    f"--target {t.name} wraps {engine.name}, which cannot run this plan: {why}; "
                    "name the engine with it, e.g. --target megatron,slurm"
                )
            files.update(engine.files(plan, opts))
            files.update(t.files(plan, opts, command=engine.node_command(plan, opts)))
        else:
            files.update(t.files(plan, opts))
    return files
