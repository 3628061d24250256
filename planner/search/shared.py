"""Several workers on one Optuna study, with an exact trial count and crash recovery.

A study is *done* when it has exactly ``n`` COMPLETE trials. Workers (processes, Slurm array
tasks) claim trials in batches with :func:`claim`:

* Stale trials are failed first: RUNNING trials whose owner process is dead (same host: its
  pid no longer runs with the recorded start time) or that have run longer than
  ``stale_after`` seconds (scoring a batch takes milliseconds, so only a killed worker leaves
  a trial RUNNING that long). A killed worker thus loses only its trials in flight.
* Trial numbers are assigned by the storage, in order. Of all COMPLETE and RUNNING trials,
  the ``n`` lowest-numbered are the study's; a worker that finds one of its fresh trials beyond
  them fails it at once (it is never scored), so concurrent workers never overshoot ``n`` and a
  failed trial is never counted.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket

STALE_AFTER_S = 120.0


def __getattr__(name: str):
    """Optuna's trial states on first use (PEP 562): importing Optuna costs a tenth of a second,
    which a command that enumerates its space and runs no study does not pay."""
    if name not in ("TrialState", "COMPLETE", "LIVE"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from optuna.trial import TrialState

    return {
        "TrialState": TrialState,
        "COMPLETE": (TrialState.COMPLETE,),
        "LIVE": (TrialState.COMPLETE, TrialState.RUNNING),
    }[name]


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), '' where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


_OWNER: dict[int, str] = {}


def owner() -> str:
    """This process's tag, host:pid:start; computed per process (a forked child gets its own)."""
    pid = os.getpid()
    if pid not in _OWNER:
        _OWNER[pid] = f"{socket.gethostname()}:{pid}:{_start_time(pid)}"
    return _OWNER[pid]


def owner_alive(owner: str) -> bool | None:
    """True/False for a process of this host; None when it cannot be told (another host)."""
    try:
        host, pid, start = owner.rsplit(":", 2)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    return bool(start) and _start_time(int(pid)) == start


def reap(study, stale_after: float = STALE_AFTER_S) -> int:
    """Fail the study's stale RUNNING trials (see the module docstring); return how many."""
    from optuna.trial import TrialState

    now = _dt.datetime.now()
    me = owner()
    failed = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        tag = t.user_attrs.get("owner")
        if tag == me:
            continue
        age = (now - t.datetime_start).total_seconds() if t.datetime_start else 0.0
        if (tag is not None and owner_alive(tag) is False) or age > stale_after:
            try:
                study.tell(t.number, state=TrialState.FAIL)
                failed += 1
            except Exception:  # another worker reaped it first
                pass
    return failed


def claim(study, n: int, batch: int, stale_after: float = STALE_AFTER_S):
    """Up to ``batch`` new trials for this worker; [] when others hold the rest; None when done."""
    from optuna.trial import TrialState

    reap(study, stale_after)
    live_states = (TrialState.COMPLETE, TrialState.RUNNING)
    live = study.get_trials(deepcopy=False, states=live_states)
    complete = sum(t.state == TrialState.COMPLETE for t in live)
    if complete >= n:
        return None
    k = min(batch, n - len(live))
    if k <= 0:
        return []
    asked = [study.ask() for _ in range(k)]
    for t in asked:
        t.set_user_attr("owner", owner())
    numbers = sorted(t.number for t in study.get_trials(deepcopy=False, states=live_states))
    keep = set(numbers[:n])
    kept = []
    for t in asked:
        if t.number in keep:
            kept.append(t)
        else:
            t.set_user_attr("surplus", True)
            study.tell(t, state=TrialState.FAIL)
    return kept


def complete_count(study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
