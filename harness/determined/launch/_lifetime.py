"""Keep a launcher's process tree from outliving it.

torchrun starts each worker in a session of its own, so killing the trial's process group does
not reach the workers. Two safety nets close that gap:

* every worker (``wrap_rank``) asks the kernel for a signal when its parent dies
  (``PR_SET_PDEATHSIG``), and
* ``wrap_rank`` records its process group in ``$DET_LAUNCH_PGID_DIR`` so the launcher can kill
  whatever is left of each worker's group once torchrun has exited.
"""

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Iterable

PGID_DIR_ENV = "DET_LAUNCH_PGID_DIR"

_PR_SET_PDEATHSIG = 1


def signal_me_when_parent_dies(sig: int) -> bool:
    """Linux only; returns whether it took effect. Safe to call in a ``preexec_fn``."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def record_process_group(pgid_dir: str | None = None) -> None:
    """Called by a worker: tell the launcher which process group to clean up."""
    pgid_dir = pgid_dir or os.environ.get(PGID_DIR_ENV)
    if not pgid_dir or not os.path.isdir(pgid_dir):
        return
    try:
        with open(os.path.join(pgid_dir, str(os.getpgrp())), "w"):
            pass
    except OSError:
        pass


def kill_recorded_process_groups(pgid_dir: str) -> int:
    """Called by the launcher after torchrun exits; returns how many groups were still alive."""
    alive = 0
    try:
        names = os.listdir(pgid_dir)
    except OSError:
        return 0
    own_group = os.getpgrp()
    for name in names:
        if not name.isdigit() or int(name) in (own_group, 0, 1):
            continue
        try:
            os.killpg(int(name), signal.SIGKILL)
            alive += 1
        except (ProcessLookupError, PermissionError):
            pass
    return alive


class SignalForwarder:
    """Signal handler that passes the signals it catches on to a child process.

    A signal sent to a whole process group reaches a child in that group directly as well as
    through us; that is why torch_distributed puts torchrun in a group of its own (torchrun
    abandons its cleanup on a second SIGTERM). Other children get it twice, as in Determined.
    """

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def install(self, signals: Iterable[int]) -> None:
        for signum in signals:
            signal.signal(signum, self)

    def __call__(self, signum: int, _frame: object = None) -> None:
        try:
            self.proc.send_signal(signum)
        except ProcessLookupError:
            pass
