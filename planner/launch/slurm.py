"""Slurm: an sbatch script that starts one task per node, each running the engine's node
command (torchrun and the reference scripts unless another engine target is named).

Directives are sbatch's (``--nodes``, ``--ntasks-per-node``, ``--gres=gpu:N``, ``--exclusive``);
the first host of ``scontrol show hostnames`` is the rendezvous address and ``SLURM_NODEID`` the
node rank.
"""

from __future__ import annotations

from planner.launch.nodes import nccl_env
from planner.launch.plan import LaunchPlan
from planner.launch.target import LaunchOptions, Target

SCRIPT = "job.sbatch"


class Slurm(Target):
    name = "slurm"
    validator = "sbatch --test-only against a Slurm controller"
    scheduler = True

    def files(self, plan: LaunchPlan, opts: LaunchOptions, command: str = "") -> dict[str, str]:
        env = [f"export {k}={v}" for k, v in nccl_env(plan).items()]
        lines = [
            "#!/usr/bin/env bash",
            f"#SBATCH --job-name=planner-{plan.net}",
            f"#SBATCH --nodes={plan.nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gres=gpu:{plan.gpus_per_node}",
            "#SBATCH --exclusive",
            "#SBATCH --output=planner-%j.out",
            "set -euo pipefail",
            f"# plan: {plan.gpus} x {plan.device} ({plan.nodes} nodes x {plan.gpus_per_node}) over {plan.network}",
            *_domain(plan),
            'cd "${SLURM_SUBMIT_DIR:-.}"',
            'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
            f"export MASTER_PORT={opts.port}",
            *env,
            # one task per node; each takes its node rank from Slurm (no exec: a node command may
            # start with an environment assignment or be a compound command)
            'srun --kill-on-bad-exit=1 bash -c \'export NODE_RANK="$SLURM_NODEID"; '
            + command.replace("'", "'\\''")
            + "'",
        ]
        return {SCRIPT: "\n".join(lines) + "\n"}


def _domain(plan: LaunchPlan) -> list[str]:
    """A comment where the plan's NVLink domain spans several hosts (NCCL reaches the other
    hosts' GPUs of the domain over NVLink by itself: its multi-node NVLink support)."""
    domain = plan.nvlink_domain or plan.gpus_per_node
    if domain <= plan.gpus_per_node:
        return []
    return [f"# NVLink domain: {domain} GPUs = {domain // plan.gpus_per_node} hosts of {plan.gpus_per_node}"]
