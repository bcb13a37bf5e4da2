"""The parts of the master: each owns its state and calls the others by public methods.

`master_lite._master.Master` builds them, wires them and delegates its public methods to them
(docs/internals.md draws who calls whom):

* `MasterState` (_shared.py): store, event bus, loop, one transaction (`atomic`), long-poll
  change signals — infrastructure only, no domain state.
* `TrialLogs` (_logs.py): log lines of runs and of the master.
* `Views` (_views.py): experiments, trials and metrics as API JSON; experiment/trial events.
* `Contexts` (_contexts.py): experiment context tarballs.
* `Searchers` (_searchers.py): owns the live searchers; feeds them events, applies their ops.
* `Experiments` (_experiments.py): creation, actions, the experiment state machine, trial ends.
* `ExperimentEdits` (_editing.py): name, description, labels, scheduling resources; delete.
* `Runs` (_runs.py): owns the allocations; scheduling, launches, exits; with `Preemption`
  (_preemption.py: owns the grace timers) and `RunExits` (_run_exits.py: what an exit means).
* `Reports` (_reporting.py): metrics, progress, early exits, the searcher-operation protocol.
* `Checkpoints` (_checkpoints.py): checkpoint reports and reads.
* `trial_kernel` (_kernel_attach.py): where to attach to a kernel trial's kernel.
* `Models` (_models.py): the model registry (models, their versions, the checkpoints they keep).
* `Recovery` (_recovery.py): at start, reconcile the store with what still runs.
* `UnmanagedRuns` (_unmanaged.py): trials that train in a kernel (core_v2), with their leases.
* `build_parts` (_wiring.py) builds them all and wires the calls that go both ways.
"""

from master_lite._parts._checkpoints import Checkpoints
from master_lite._parts._contexts import Contexts
from master_lite._parts._editing import EDITABLE_RESOURCES, ExperimentEdits
from master_lite._parts._experiments import EXPERIMENT_ACTIONS, Experiments
from master_lite._parts._kernel_attach import trial_kernel
from master_lite._parts._logs import TrialLogs
from master_lite._parts._models import Models, check_model_name
from master_lite._parts._preemption import Preemption, RunEnded, RunSettings
from master_lite._parts._recovery import Recovery
from master_lite._parts._reporting import EARLY_EXIT_REASONS, Reports
from master_lite._parts._run_exits import RunExits
from master_lite._parts._runs import Runs
from master_lite._parts._searchers import Searchers
from master_lite._parts._shared import MasterState, searcher_module
from master_lite._parts._tensorboards import TensorBoards
from master_lite._parts._tokens import authenticate
from master_lite._parts._unmanaged import UnmanagedRuns
from master_lite._parts._views import Views
from master_lite._parts._wiring import Parts, build_parts

__all__ = [
    "trial_kernel",
    "EARLY_EXIT_REASONS",
    "EDITABLE_RESOURCES",
    "EXPERIMENT_ACTIONS",
    "Checkpoints",
    "Contexts",
    "ExperimentEdits",
    "Experiments",
    "MasterState",
    "Models",
    "Parts",
    "Preemption",
    "Recovery",
    "Reports",
    "RunEnded",
    "RunExits",
    "RunSettings",
    "Runs",
    "Searchers",
    "TensorBoards",
    "TrialLogs",
    "UnmanagedRuns",
    "Views",
    "authenticate",
    "build_parts",
    "check_model_name",
    "searcher_module",
]
