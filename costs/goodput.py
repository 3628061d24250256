"""Goodput at scale: failures, checkpoints and restarts, vectorised over plans (SI units).

A synchronous job stops whenever any of its GPUs fails, so its mean time between failures is
``M = 1 / (rate x GPUs)`` with ``rate`` in failures per GPU-second. It saves a checkpoint every
``tau`` seconds of training: the model's weights, fp32 master weights and optimizer states (the
bytes per parameter of :func:`costs.llm.memory.state_bytes` without the gradients, which are not
saved), the whole model once, written in parallel by the data-parallel shards at the storage's
aggregate write bandwidth. A synchronous save blocks training for the whole write; an
asynchronous one (PyTorch DCP ``async_save``, Megatron-Core's asynchronous save) blocks only
while each GPU copies its shard to host memory, and the write then runs behind training, so the
last durable checkpoint lags by the write time.

The interval is Daly's (2006) higher-order optimum for the blocking time ``d``; Young's (1974)
first-order ``sqrt(2 d M)`` is its leading term. The expected wall time of ``T`` seconds of
training with Poisson failures, restart time ``R`` (reload plus relaunch, itself exposed to
failures) and segments of ``tau + d`` is Daly's complete model

    W = M exp(R / M) (exp((tau + d) / M) - 1) T / tau

whose first-order expansion is the familiar account: checkpoint overhead ``T d / tau`` plus, per
failure, half a segment of lost work and the restart. Goodput is ``T / W``.

Sources: J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM
17(9), 1974 (doi:10.1145/361147.361115); J. T. Daly, "A higher order estimate of the optimum
checkpoint interval for restart dumps", Future Generation Computer Systems 22(3), 2006
(doi:10.1016/j.future.2004.11.016; its Fig. 3-5 examples, M = 24 h, 6 h, 15 min with a 5 min dump,
give 117, 57 and 9.1 min, which :func:`daly_interval` reproduces; read 2026-11-25).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from costs.llm.memory import state_bytes


def job_mtbf_s(rate_per_gpu_s, gpus) -> np.ndarray:
    """Mean time between failures of a job (s) whose every GPU fails at ``rate_per_gpu_s``
    (failures per GPU-second): any failure stops a synchronous job, so the rates add."""
    return 1.0 / (np.asarray(rate_per_gpu_s, dtype=float) * np.asarray(gpus, dtype=float))


def checkpoint_bytes(params, elem, optimizer: str) -> np.ndarray:
    """Bytes of one checkpoint of ``params`` parameters trained with ``elem``-byte weights:
    weights, fp32 master weights and optimizer states, saved once (gradients are not saved)."""
    elem = np.asarray(elem, dtype=float)
    return state_bytes(params, elem, optimizer, np.zeros(np.shape(elem), dtype=int), 1) - params * elem


def young_interval(d, mtbf) -> np.ndarray:
    """Young's (1974) first-order optimum checkpoint interval (s): sqrt(2 d M)."""
    return np.sqrt(2.0 * np.asarray(d, dtype=float) * np.asarray(mtbf, dtype=float))


def daly_interval(d, mtbf) -> np.ndarray:
    """Daly's (2006) higher-order optimum checkpoint interval (s) for a blocking save of ``d``
    seconds and a mean time between failures ``mtbf``: sqrt(2 d M) (1 + sqrt(d / 2M) / 3 +
    d / 18M) - d while d < 2M, else M."""
    d = np.asarray(d, dtype=float)
    m = np.asarray(mtbf, dtype=float)
    x = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    return np.where(d < 2.0 * m, tau, m)


def expected_wall_s(train_s, tau, d, restart_s, mtbf) -> np.ndarray:
    """Expected wall time (s) of ``train_s`` seconds of failure-free training: Daly's complete
    model with segments of ``tau + d`` and restarts of ``restart_s`` (module docstring)."""
    return np.exp(_log_wall(train_s, tau, d, restart_s, mtbf))


def _log_wall(train_s, tau, d, restart_s, mtbf) -> np.ndarray:
    """log of :func:`expected_wall_s`, finite where the wall time itself would overflow."""
    m = np.asarray(mtbf, dtype=float)
    x = (np.asarray(tau, dtype=float) + d) / m
    # log(expm1(x)): expm1 keeps the small-rate limit exact (W -> T (1 + d / tau) as M grows)
    log_em1 = np.where(x > 30.0, x, np.log(np.expm1(np.minimum(x, 30.0))))
    return np.log(m) + restart_s / m + log_em1 + np.log(np.asarray(train_s, dtype=float) / tau)


@dataclass(frozen=True)
class Goodput:
    """Per-plan goodput terms: seconds, counts and the useful share of wall time."""

    goodput: np.ndarray  # useful time / wall time, in (0, 1]
    wall_s: np.ndarray  # expected wall time with failures, checkpoints and restarts
    lost_s: np.ndarray  # wall_s - useful time: checkpoints, recomputed work, restarts
    interval_s: np.ndarray  # training time between checkpoints (Daly)
    failures: np.ndarray  # expected failures during the run
    mtbf_s: np.ndarray  # job mean time between failures
    write_s: np.ndarray  # one checkpoint's write at the storage bandwidth
    blocking_s: np.ndarray  # training time one checkpoint stops (the write, or the host copy)
    restart_s: np.ndarray  # one restart: relaunch plus reload


def goodput(
    train_s,
    gpus,
    ckpt_bytes,
    *,
    rate_per_gpu_s: float,
    write_bw: float,
    relaunch_s: float = 0.0,
    async_save: bool = False,
    host_copy_bw: float = np.inf,
) -> Goodput:
    """Goodput of plans that train ``train_s`` seconds without failures on ``gpus`` GPUs,
    saving ``ckpt_bytes`` per checkpoint at ``write_bw`` bytes/s in all (reloads read at the
    same rate). ``async_save``: each GPU copies its 1/``gpus`` share to host memory at
    ``host_copy_bw`` bytes/s, the only blocking part, and a failure also loses the write in flight."""
    train_s = np.asarray(train_s, dtype=float)
    gpus = np.asarray(gpus, dtype=float)
    size = np.asarray(ckpt_bytes, dtype=float)
    write = size / write_bw
    restart = relaunch_s + write  # relaunch, then read the last checkpoint back
    if async_save:
        blocking = size / gpus / host_copy_bw
        restart = restart + write  # the last durable checkpoint lags by one write
    else:
        blocking = write
    if rate_per_gpu_s <= 0:  # no failures: no checkpoint is needed, nothing is lost
        inf = np.full(np.shape(train_s), np.inf)
        zero = np.zeros(np.shape(train_s))
        return Goodput(
            zero + 1.0, train_s, zero, inf, zero, inf, write + zero, blocking + zero, restart + zero
        )
    mtbf = job_mtbf_s(rate_per_gpu_s, gpus)
    tau = np.maximum(daly_interval(blocking, mtbf), 1e-9)
    if async_save:  # one write in flight at a time: the next save waits for the last to land
        tau = np.maximum(tau, write)
    log_wall = np.maximum(_log_wall(train_s, tau, blocking, restart, mtbf), np.log(train_s))
    good = np.minimum(np.exp(np.log(train_s) - log_wall), 1.0)  # in logs: W may overflow
    wall = np.maximum(np.exp(log_wall), train_s)  # exact when nothing is lost
    return Goodput(good, wall, wall - train_s, tau, wall / mtbf, mtbf, write, blocking, restart)
