"""SkyPilot: a task YAML (resources, nodes, the run command) for `sky launch`.

SkyPilot runs ``run`` on every node with ``SKYPILOT_NODE_RANK``, ``SKYPILOT_NUM_NODES`` and
``SKYPILOT_NODE_IPS`` (the head first) set (SkyPilot docs, "Distributed multi-node jobs").
Accelerator names are SkyPilot's (``sky show-gpus``); clouds its cloud registry's.
"""

from __future__ import annotations

import yaml

from planner.errors import BadInput
from planner.launch.nodes import nccl_env
from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target

TASK = "sky_task.yaml"
# planner device -> SkyPilot accelerator name, as SkyPilot's catalog lists them
# (skypilot-org/skypilot-catalog, catalogs/v8/common/accelerators.csv, commit
# 001ca549aad50db24c5670b5438bea0573a2b6c0, read 2026-11-24)
ACCELERATORS = {
    "H100_SXM": "H100",
    "H200": "H200",
    "B200": "B200",
    "GH200": "GH200",
    "A100_40GB": "A100",
    "A100_80GB": "A100-80GB",
    "V100_16GB": "V100",
    "V100_32GB": "V100-32GB",
    "T4": "T4",
    "L4": "L4",
    "A10G": "A10G",
    "L40S": "L40S",
    "MI300X": "MI300X",
}
# planner price provider -> SkyPilot cloud (sky.utils.registry.CLOUD_REGISTRY; tests check each)
CLOUDS = {
    "aws": "aws",
    "azure": "azure",
    "gcp": "gcp",
    "lambda": "lambda",
    "runpod": "runpod",
    "nebius": "nebius",
    "digitalocean": "do",
    "oracle": "oci",
}


class SkyPilot(Target):
    name = "skypilot"
    validator = "SkyPilot's task loader (sky.Task.from_yaml)"
    scheduler = True

    def refusal(self, plan: LaunchPlan) -> str | None:
        if plan.device not in ACCELERATORS:
            return (
                f"SkyPilot has no accelerator name for {plan.device} here (have: {', '.join(ACCELERATORS)})"
            )
        return None

    def task(self, plan: LaunchPlan, opts: LaunchOptions, command: str) -> dict:
        resources: dict = {"accelerators": f"{ACCELERATORS[plan.device]}:{plan.gpus_per_node}"}
        if opts.provider:
            providers = [p.strip() for p in opts.provider.split(",")]
            bad = [p for p in providers if p not in CLOUDS]
            if bad:
                raise BadInput(f"--provider {bad[0]} is not a SkyPilot cloud (valid: {', '.join(CLOUDS)})")
            if len(providers) == 1:
                resources["cloud"] = CLOUDS[providers[0]]
            else:
                resources["any_of"] = [{"cloud": CLOUDS[p]} for p in providers]
        if opts.pricing == "spot":
            resources["use_spot"] = True
        run = "\n".join(
            [
                "export NNODES=$SKYPILOT_NUM_NODES",
                "export NODE_RANK=$SKYPILOT_NODE_RANK",
                'export MASTER_ADDR="$(echo "$SKYPILOT_NODE_IPS" | head -n 1)"',
                command,
            ]
        )
        return {
            "name": f"planner-{plan.net}",
            "num_nodes": plan.nodes,
            "resources": resources,
            "workdir": ".",
            "envs": {"MASTER_PORT": str(opts.port), **nccl_env(plan)},
            "run": run + "\n",
        }

    def files(self, plan: LaunchPlan, opts: LaunchOptions, command: str = "") -> dict[str, str]:
        return {TASK: yaml.dump(self.task(plan, opts, command), Dumper=_Literal, sort_keys=False)}


class _Literal(yaml.SafeDumper):
    """Writes multi-line strings (the run script) as YAML literal blocks."""


_Literal.add_representer(
    str,
    lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None),
)
