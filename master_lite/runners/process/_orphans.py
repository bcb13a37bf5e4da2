"""Finding and ending the trial processes a previous master left behind.

A master that was SIGKILLed (or crashed) leaves its trial processes running: they sit in their
own process groups, so nothing kills them with the master. The next master cannot re-attach to
them (their stdout/stderr pipes went with the old process and their `DET_MASTER` may name a port
that is gone), so it ends them and resumes their trials from their latest checkpoints.

Which processes are ours is decided by the session token in their environment: each run gets a
fresh random `DET_SESSION_TOKEN` and the store keeps its sha256 until the run ends. A process
whose token hashes to one of those is certainly a run of *this* root dir's master — unlike a pid,
a pgid or an allocation id (`trial-1.1` exists under every master), which can be reused.
Launchers' child processes inherit the environment, so the whole tree is found.

What the master does with them at start is the recovery part's (`experiments/_recovery.py`).
The hash rule is the master's (`_core/_auth.hash_token`); the caller passes it in, so the
runners import nothing of the master.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

PROC = Path("/proc")
TOKEN_VARIABLE = b"DET_SESSION_TOKEN="


def proc_available() -> bool:
    return (PROC / "self" / "environ").exists()


def _environ(pid: int) -> list[bytes]:
    try:
        return (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # gone, or not ours to read
        return []


def find_runs_by_token(
    token_hashes: dict[str, str], *, hash_token: Callable[[str], str]
) -> dict[str, list[int]]:
    """Live processes whose `DET_SESSION_TOKEN` hashes (by `hash_token`) to a key of
    `token_hashes` (token hash -> allocation id), grouped by allocation id."""
    found: dict[str, list[int]] = {}
    if not token_hashes:
        return found
    me = os.getpid()
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        for variable in _environ(int(entry.name)):
            if variable.startswith(TOKEN_VARIABLE):
                token = variable[len(TOKEN_VARIABLE) :].decode(errors="replace")
                allocation_id = token_hashes.get(hash_token(token))
                if allocation_id is not None and not _is_zombie(int(entry.name)):
                    found.setdefault(allocation_id, []).append(int(entry.name))
                break
    return found


def _is_zombie(pid: int) -> bool:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return True  # gone
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("Z", "X")


def kill_processes(pids: Iterable[int]) -> None:
    """SIGKILL each process and its process group (the run's launcher may have spawned more)."""
    for pid in pids:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def wait_gone(pids: Iterable[int], timeout: float = 10.0) -> list[int]:
    """Wait until the processes are dead (zombies count: they no longer run); returns survivors.

    Waiting matters: a resumed run must not start while the old one may still write a
    checkpoint into the same storage."""
    remaining = list(pids)
    deadline = time.monotonic() + timeout
    while remaining and time.monotonic() < deadline:
        remaining = [pid for pid in remaining if not _is_zombie(pid)]
        if remaining:
            time.sleep(0.05)
    return remaining


def end_orphaned_runs(
    token_hashes: dict[str, str], *, hash_token: Callable[[str], str], timeout: float = 10.0
) -> dict[str, list[int]]:
    """Kill every process of the given runs and wait for them; returns what was killed."""
    found = find_runs_by_token(token_hashes, hash_token=hash_token)
    pids = [pid for group in found.values() for pid in group]
    kill_processes(pids)
    wait_gone(pids, timeout)
    return found


__all__ = [
    "end_orphaned_runs",
    "find_runs_by_token",
    "kill_processes",
    "proc_available",
    "wait_gone",
]
