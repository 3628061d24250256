"""Optuna journal-file storages whose lock names its owner, so a lock left by a killed process
is taken over at once, and a wait on a live one is said on stderr, never silent.

Optuna's :class:`~optuna.storages.journal.JournalFileSymlinkLock` creates ``FILE.lock`` as a
symbolic link to the journal and, when the link exists, waits until it has not changed for a
grace period (30 s) before breaking it: a sweep killed while appending makes the next run wait
half a minute without a word. Here the link's target is the owner's tag (host:pid:start time,
:func:`planner.search.shared.owner`); a waiter that finds the owner dead on this host removes
the lock and says so in one line. A lock whose owner cannot be told (another host, or a lock
written by Optuna's own class) is waited on for the same grace period, saying so once.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from planner.search import shared

GRACE_S = 30.0  # Optuna's JournalFileSymlinkLock default grace period
_SAY_AFTER_S = 1.0  # a wait longer than this is reported (appends hold the lock for milliseconds)


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr, flush=True)


def storage(path: str):
    """A JournalStorage on ``path`` with an owner-named lock."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(path, lock_obj=owned_lock(path)))


def owned_lock(path: str):
    """The lock object of a journal file: Optuna's symlink lock, its link naming the owner."""
    from optuna.storages.journal import JournalFileSymlinkLock

    class OwnedSymlinkLock(JournalFileSymlinkLock):
        def acquire(self) -> bool:
            return acquire(self._lock_file)

        def release(self) -> None:
            try:
                os.unlink(self._lock_file)
            except FileNotFoundError:
                pass

    return OwnedSymlinkLock(path)


def holder(lock_file: str) -> str | None:
    """The lock's owner tag, or None when there is no lock."""
    try:
        return os.readlink(lock_file)
    except OSError:
        return None


def break_stale(lock_file: str, tag: str, why: str) -> None:
    """Remove a lock held by ``tag``, only if it still is (rename first, so a lock taken over
    meanwhile by a live process is put back rather than removed)."""
    aside = f"{lock_file}.stale.{os.getpid()}"
    try:
        os.rename(lock_file, aside)
    except OSError:
        return
    if holder(aside) == tag:
        os.unlink(aside)
        _note(f"removed the journal lock {lock_file} of {why}")
        return
    try:
        os.symlink(os.readlink(aside), lock_file)
    except OSError:
        pass
    os.unlink(aside)


def acquire(lock_file: str, grace_s: float = GRACE_S) -> bool:
    """Take the lock: create the link naming this process; a dead owner's lock is removed at
    once, an unknown owner's after ``grace_s`` without change; a wait is said once."""
    me = shared.owner()
    start, sleep, said = time.monotonic(), 0.001, False
    while True:
        try:
            os.symlink(me, lock_file)
            return True
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
        tag = holder(lock_file)
        if tag is None:
            continue  # released meanwhile
        try:
            alive = shared.owner_alive(tag)
        except ValueError:  # not host:pid:start, e.g. a link of Optuna's own lock
            alive = None
        waited = time.monotonic() - start
        if alive is False:
            break_stale(lock_file, tag, f"process {tag} (no longer running)")
            continue
        if alive is None and waited > grace_s:
            break_stale(
                lock_file, tag, f"'{tag}' (unchanged for {grace_s:.0f} s; its owner cannot be checked)"
            )
            start = time.monotonic()
            continue
        if not said and waited > _SAY_AFTER_S:
            who = f"process {tag}" if alive else f"'{tag}' (an owner on another host or of unknown kind)"
            _note(f"waiting for the journal lock {lock_file} held by {who}")
            said = True
        time.sleep(sleep)
        sleep = min(sleep * 2, 0.5)
