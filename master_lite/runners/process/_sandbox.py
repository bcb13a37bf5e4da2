"""The trial sandbox: process trials that run as the master's own Unix user start where the
master's secrets (`LaunchSpec.hidden`: the user token's directory, the store) are out of sight.

File modes cannot keep a process from files of its own uid, so the process runner starts such
a trial through `_sandbox_main.py` (a trampoline, see there): its own user, mount and PID
namespaces, with each hidden path covered and a fresh /proc (no process outside the trial can
be named, signalled or read through /proc). The network, /dev (GPUs) and every other path are
untouched, so a trial reaches its work dir, checkpoints, context and the master over loopback.

It needs unprivileged user namespaces (Linux; `kernel.unprivileged_userns_clone`, not blocked
by a container's seccomp profile or AppArmor). The runner probes once, on its first launch
that wants it; where the probe fails, trials start as before and one warning names the cause.
`MASTER_LITE_TRIAL_SANDBOX=0` turns it off. A run with `run_as` (another Unix user) needs none:
the other uid cannot read the master's 0700/0600 files anyway.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("master_lite")

SANDBOX_ENV = "MASTER_LITE_TRIAL_SANDBOX"
SCRIPT = str(Path(__file__).with_name("_sandbox_main.py"))
_PROBE_TIMEOUT_S = 20.0


def sandbox_argv(hidden: Sequence[str | os.PathLike], *, watch_parent: bool = False) -> list[str]:
    """The trampoline's argv up to and including `--` (the trial's argv follows);
    `watch_parent`: the namespace ends when the trampoline's parent does (for kernels)."""
    argv = [sys.executable, "-I", "-S", SCRIPT]
    if watch_parent:
        argv.append("--watch-parent")
    for path in hidden:
        argv += ["--hide", os.fspath(path)]
    return [*argv, "--"]


def _wanted() -> bool:
    return os.environ.get(SANDBOX_ENV, "").strip().lower() not in ("0", "false", "no", "off")


class Sandbox:
    """Whether this machine can sandbox trials (probed once), and the argv prefix that does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._available: bool | None = None

    def _probe(self) -> bool:
        if not sys.platform.startswith("linux"):
            reason = f"{sys.platform} has no Linux namespaces"
        else:
            try:
                result = subprocess.run(
                    [*sandbox_argv(())[:-1], "--probe"],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=_PROBE_TIMEOUT_S,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = str(exc)
            else:
                if result.returncode == 0:
                    return True
                reason = result.stderr.strip() or f"exit status {result.returncode}"
        log.warning(
            "trials that run as the master's user are not sandboxed (%s): their code can read "
            "the user token and the store (docs/reliability.md, 'Threat model'); allow "
            "unprivileged user namespaces, or run trials as another user (run_as)",
            reason,
        )
        return False

    def prefix(
        self, hidden: Sequence[str | os.PathLike], *, watch_parent: bool = False
    ) -> list[str]:
        """The argv prefix that sandboxes a run hiding `hidden`; [] where there is nothing to
        hide, it is turned off ($MASTER_LITE_TRIAL_SANDBOX=0) or the platform cannot.
        `watch_parent`: see `sandbox_argv`."""
        if not hidden or not _wanted():
            return []
        with self._lock:
            if self._available is None:
                self._available = self._probe()
            available = self._available
        return sandbox_argv(hidden, watch_parent=watch_parent) if available else []


__all__ = ["SANDBOX_ENV", "Sandbox", "sandbox_argv"]
