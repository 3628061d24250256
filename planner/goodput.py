"""Goodput parameters of a request (`--goodput`, `--failures-per-1k-gpu-hours`, `--ckpt-write-gbs`,
`--restart-min`, `--async-ckpt`), their cited defaults, and the metrics they add
(:mod:`costs.goodput` does the arithmetic).

With goodput on (the default), time to train is the expected wall time of a run that fails, saves
checkpoints and restarts; GPU-hours, cost, energy and CO2 follow it. Off, it is the failure-free
best case, and the answer says so.

Defaults, each read in its source:

* failure rate: 419 unexpected job interruptions in a 54-day snapshot of Llama 3 405B pre-training
  on 16,384 H100 (Grattafiori et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783,
  Section 3.3.4, https://arxiv.org/abs/2407.21783; figures as reported at
  https://direct.datacenterdynamics.com/en/news/meta-report-details-hundreds-of-gpu-and-hbm3-related-interruptions-to-llama-3-training-run
  and http://zksvwa.com/index-15249.html, read 2026-11-25: 466 interruptions, 47 planned, 419
  unexpected, "one failure every three hours"): 419 / (54 x 24 h x 16,384 GPUs) = 0.01973 per
  1,000 GPU-hours. Planned interruptions (maintenance) are not counted as failures.
* checkpoint write bandwidth: Meta's Tectonic file system behind the same run, "2 TB/s sustained,
  7 TB/s peak" (arXiv:2407.21783, Section 3.3.1; as summarised at
  https://ai-papers.xuzou.cn/papers/llama3_2024, read 2026-11-25): 2,000 GB/s in all.
* job relaunch (failure detection, diagnosis, node replacement and re-initialisation, before the
  reload): 10 min, from ByteDance's MegaScale production run of several weeks on more than 10,000
  GPUs (Jiang et al., "MegaScale: Scaling Large Language Model Training to More Than 10,000 GPUs",
  NSDI 2024, arXiv:2402.15627, Sections 3.5 and 6.3, https://arxiv.org/abs/2402.15627, read
  2026-11-25): "The average time required for detecting failure and executing diagnostic tests is
  less than 10 minutes", and its communication-group initialisation takes "under 30 seconds on more
  than 10,000 GPUs"; the bound is taken as the value. The other published figures bracket it:
  - Meta's A100 research clusters: "For the RSC clusters, [...] u0 ≈5 −20 mins", a restart
    overhead u0 of 5 to 20 min, "all initialization tasks that need to be performed after a restart
    that wouldn't otherwise be needed" (Kokolis et al., "Revisiting Reliability in Large-Scale
    Machine Learning Research Clusters", HPCA 2025, arXiv:2410.21680v2,
    https://arxiv.org/abs/2410.21680, read 2026-11-25);
  - ByteDance's ByteRobust: "the time cost of failover operations is often more than 10 minutes for
    the large model training at the scale of 10,000 GPUs" (failover there includes the reload and
    the lost work), and a full requeue, from request to resumed training, of 454 s on 2,048 GPUs to
    768 s on 16,384 (Wan et al., "Robust LLM Training Infrastructure at ByteDance", SOSP 2025,
    arXiv:2509.16293v4, Section 2.3 and Table 7, https://arxiv.org/abs/2509.16293, read 2026-11-25);
  - the Llama 3 run bounds it from above: "higher than 90% effective training time" over 466
    interruptions in 54 days leaves under 54 x 24 x 60 x 0.1 / 466 = 16.7 min per interruption for
    relaunch, reload, lost work and checkpoints together (arXiv:2407.21783, Section 3.3.4).
  `--restart-min` replaces it.
* asynchronous saves copy each GPU's shard to host memory over PCIe 4.0 x16, 31.5 GB/s per
  direction (PCI-SIG PCIe 4.0 base specification, as configs/networks.toml cites it; a PCIe 5
  host copies twice as fast), then write behind training (PyTorch DCP ``async_save``:
  https://pytorch.org/tutorials/recipes/distributed_async_checkpoint_recipe.html, read 2026-11-25:
  "Asynchronous checkpointing works by first copying models into internal CPU-buffers").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from costs import goodput as model
from planner.errors import BadInput

# 419 unexpected interruptions / (54 days x 24 h x 16,384 GPUs) x 1,000 (module docstring)
FAILURES_PER_1K_GPU_HOURS = 419 / (54 * 24 * 16_384) * 1_000
CKPT_WRITE_GBS = 2_000.0  # Tectonic, 2 TB/s sustained (arXiv:2407.21783, Section 3.3.1)
# MegaScale: detection and diagnosis "less than 10 minutes" on > 10,000 GPUs (module docstring)
RESTART_MIN = 10.0
HOST_COPY_BW = 31.5e9  # bytes/s: PCIe 4.0 x16, one direction (configs/networks.toml [pcie4])
MODES = ("on", "off")


@dataclass(frozen=True)
class Reliability:
    """A request's goodput parameters, SI units (validated)."""

    on: bool = True
    rate_per_gpu_s: float = FAILURES_PER_1K_GPU_HOURS / 1_000 / 3_600
    write_bw: float = CKPT_WRITE_GBS * 1e9  # bytes/s, all writers together
    relaunch_s: float = RESTART_MIN * 60.0  # before the reload (module docstring)
    relaunch_given: bool = False  # --restart-min set it (the answer names the option, not the source)
    async_save: bool = False

    def terms(self, train_s, gpus, ckpt_bytes) -> model.Goodput:
        """:func:`costs.goodput.goodput` of plans training ``train_s`` s on ``gpus`` GPUs."""
        return model.goodput(
            train_s,
            gpus,
            ckpt_bytes,
            rate_per_gpu_s=self.rate_per_gpu_s if self.on else 0.0,
            write_bw=self.write_bw,
            relaunch_s=self.relaunch_s,
            async_save=self.async_save,
            host_copy_bw=HOST_COPY_BW,
        )

    def describe(self) -> str:
        """One line on what the time to train includes."""
        if not self.on:
            return (
                "goodput off: time to train is the failure-free best case (no failures, checkpoints "
                "or restarts; --goodput on counts them)"
            )
        cited = not self.relaunch_given and math.isclose(self.relaunch_s, RESTART_MIN * 60.0)
        why = "MegaScale: detection and diagnosis under 10 min on > 10,000 GPUs" if cited else "--restart-min"
        relaunch = f"relaunch {self.relaunch_s / 60:g} min ({why}) plus the reload"
        rate = self.rate_per_gpu_s * 3.6e6
        given = not math.isclose(rate, FAILURES_PER_1K_GPU_HOURS)
        why = "--failures-per-1k-gpu-hours" if given else "Llama 3 405B's 419 in 54 days on 16,384 H100"
        bw = (
            "--ckpt-write-gbs"
            if self.write_bw != CKPT_WRITE_GBS * 1e9
            else "Llama 3's storage, 2 TB/s sustained"
        )
        return (
            f"failures {rate:.4g} per 1,000 GPU-hours ({why}), checkpoints at {self.write_bw / 1e9:,.0f} GB/s in "
            f"all ({bw}; {'asynchronous' if self.async_save else 'synchronous'}), restart = {relaunch}"
        )


def of_request(req) -> Reliability:
    """The validated goodput parameters of an optimize request (bounds: planner.request.bounds)."""
    mode = getattr(req, "goodput", "on")
    if mode not in MODES:
        raise BadInput(f"--goodput must be one of {', '.join(MODES)}, got {mode!r}")
    rate = req.failures_per_1k_gpu_hours
    gbs = req.ckpt_write_gbs
    return Reliability(
        on=mode == "on",
        rate_per_gpu_s=(FAILURES_PER_1K_GPU_HOURS if rate is None else float(rate)) / 1_000 / 3_600,
        write_bw=(CKPT_WRITE_GBS if gbs is None else float(gbs)) * 1e9,
        relaunch_s=(RESTART_MIN if req.restart_min is None else float(req.restart_min)) * 60.0,
        relaunch_given=req.restart_min is not None,
        async_save=bool(req.async_ckpt),
    )


def metrics(rel: Reliability, train_s, gpus, ckpt_bytes) -> dict[str, np.ndarray]:
    """The goodput columns of a Scorer's metrics: ``goodput``, ``lost_s`` (expected time lost to
    failures, checkpoints and restarts), ``ckpt_interval_s``, ``failures``, ``wall_s``."""
    t = rel.terms(train_s, gpus, ckpt_bytes)
    return {
        "goodput": t.goodput,
        "wall_s": t.wall_s,
        "lost_s": t.lost_s,
        "ckpt_interval_s": t.interval_s,
        "failures": t.failures,
        "ckpt_write_s": t.write_s,
    }
