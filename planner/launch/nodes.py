"""What the scheduler targets share: the environment every node's command reads.

NCCL picks its inter-node transport itself; ``NCCL_IB_DISABLE`` (NCCL's environment variables,
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html, read 2026-11-24) keeps it on
InfiniBand verbs (0; also RoCE) or forces IP sockets (1), which is what the plan's network was
priced as.
"""

from __future__ import annotations

from planner.launch.plan import LaunchPlan

# planner networks whose links carry RDMA (InfiniBand, or RoCE as the catalog describes eth200/eth400)
RDMA = ("infiniband", "ib_edr", "ib_hdr", "ib_ndr", "eth200", "eth400")


def nccl_env(plan: LaunchPlan) -> dict[str, str]:
    """NCCL settings for the plan's network (none on one node)."""
    if plan.nodes == 1:
        return {}
    return {"NCCL_IB_DISABLE": "0" if plan.network in RDMA else "1", "NCCL_DEBUG": "WARN"}
