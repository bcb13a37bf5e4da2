"""Runs: the allocations of trials, their launches and exits.

* `Runs` (_runs.py): owns the allocations; scheduling, launches, exits; `allocation_id_for`.
* `Preemption` (_preemption.py): owns the grace timers of runs asked to stop.
* `Contexts` (_contexts.py): experiment context tarballs a run unpacks.
* _environment.py: what a run's process gets (argv, environment, files).
* `authenticate` (_tokens.py): which trial a run's token speaks for.
* `trial_kernel` (_kernel_attach.py): where to attach to a kernel trial's kernel.
* `TrialAccounts` (_accounts.py): which Unix account runs a trial (run_trials_as), its dirs.
"""

from master_lite.runs._accounts import (
    TrialAccounts,
    check_reachable,
    default_trial_python,
    open_root,
)
from master_lite.runs._contexts import Contexts
from master_lite.runs._kernel_attach import trial_kernel
from master_lite.runs._preemption import Preemption, RunEnded, RunSettings
from master_lite.runs._runs import Runs, allocation_id_for
from master_lite.runs._tokens import authenticate

__all__ = [
    "Contexts",
    "TrialAccounts",
    "check_reachable",
    "default_trial_python",
    "open_root",
    "Preemption",
    "RunEnded",
    "RunSettings",
    "Runs",
    "allocation_id_for",
    "authenticate",
    "trial_kernel",
]
