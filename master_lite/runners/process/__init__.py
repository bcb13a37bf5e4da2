"""The process runner: each trial run as a local process group (pre-started interpreters for
`python3 <script.py>`), and finding the processes a previous master left behind."""

from master_lite.runners.process._orphans import (
    end_orphaned_runs,
    find_runs_by_token,
    proc_available,
)
from master_lite.runners.process._prestart import SparePool, plain_python_launch
from master_lite.runners.process._runner import (
    PYTHON,
    LocalRunner,
    account_environment,
    entrypoint_argv,
    kill_orphaned_group,
    local_argv,
    process_environment,
    process_group_alive,
)
from master_lite.runners.process._sandbox import SANDBOX_ENV, Sandbox

__all__ = [
    "end_orphaned_runs",
    "find_runs_by_token",
    "proc_available",
    "LocalRunner",
    "PYTHON",
    "account_environment",
    "local_argv",
    "process_environment",
    "SparePool",
    "entrypoint_argv",
    "kill_orphaned_group",
    "plain_python_launch",
    "process_group_alive",
    "SANDBOX_ENV",
    "Sandbox",
]
