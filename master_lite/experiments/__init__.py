"""Experiments and the state of their trials.

* `Experiments` (_experiments.py): creation, actions, the experiment state machine, trial ends;
  feeds the searcher its events and applies the operations it answers. `submit_experiment`
  (the API's) checks and writes the context in a worker thread.
* `checked_config`, `warm_start_checkpoint` (_creation.py): a new experiment's checks.
* `SearcherOperations` (_operations.py): applies what a searcher answers (Create, Stop...).
* `Searchers` (_searchers.py): owns the live searchers; events in, operations out.
* `ExperimentEdits` (_editing.py): name, description, labels, scheduling resources; delete.
* `JobQueue` (_job_queue.py): the job queue (`master.edits.job_queue`): list, reorder.
* `Forks` (_forks.py): fork an experiment, re-run or continue a trial (Determined's semantics).
* `RunExits` (_run_exits.py): what a run's exit means for its trial and experiment.
* `Recovery` (_recovery.py): at start, reconcile the store with what still runs.
"""

from master_lite.experiments._creation import checked_config, warm_start_checkpoint
from master_lite.experiments._editing import EDITABLE_RESOURCES, ExperimentEdits
from master_lite.experiments._experiments import EXPERIMENT_ACTIONS, Experiments
from master_lite.experiments._forks import Forks, trial_config
from master_lite.experiments._job_queue import JobQueue, job_id, parse_job_id
from master_lite.experiments._recovery import Recovery
from master_lite.experiments._run_exits import RunExits
from master_lite.experiments._searchers import Searchers

__all__ = [
    "EDITABLE_RESOURCES",
    "EXPERIMENT_ACTIONS",
    "ExperimentEdits",
    "Experiments",
    "Forks",
    "JobQueue",
    "Recovery",
    "RunExits",
    "Searchers",
    "checked_config",
    "job_id",
    "parse_job_id",
    "trial_config",
    "warm_start_checkpoint",
]
