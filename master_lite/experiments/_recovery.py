"""The recovery part: at start, reconcile what the store says with what still runs.

Allocations still marked running in the store belong to the previous master. Their processes,
if still alive, are found by their session token and killed — we cannot re-attach to their
pipes — and their trials are resumed from their latest checkpoints, with each searcher restored
from its snapshot (docs/fault-tolerance.md).
"""

from __future__ import annotations

from determined.common.states import ExperimentState, TrialState
from master_lite._core import _auth
from master_lite._core._shared import MasterState, searcher_module
from master_lite.experiments._experiments import Experiments
from master_lite.experiments._searchers import Searchers
from master_lite.reports._logs import TrialLogs
from master_lite.runners import kill_orphaned_group, process_group_alive
from master_lite.runners.process import end_orphaned_runs, proc_available
from master_lite.runs._runs import Runs
from master_lite.store import ExperimentRow


class Recovery:
    """What `Master.start()` does with the state a previous master left."""

    def __init__(
        self,
        shared: MasterState,
        *,
        logs: TrialLogs,
        searchers: Searchers,
        experiments: Experiments,
        runs: Runs,
    ) -> None:
        self._shared = shared
        self._logs = logs
        self._searchers = searchers
        self._experiments = experiments
        self._runs = runs

    def recover(self) -> None:
        """End orphaned runs, restore the searchers and resume or end every unfinished trial."""
        self.end_orphaned_runs()
        module = None
        for experiment in self._shared.store.experiments.unfinished():
            if experiment.config.get("unmanaged"):
                continue  # trains in a kernel: its lease decides (UnmanagedRuns.start)
            module = module or searcher_module()
            self._searchers.restore(experiment, module)
            with self._shared.atomic():
                self._recover_trials(experiment)

    def end_orphaned_runs(self) -> None:
        """Kill what the previous master left running and end its allocations in the store."""
        store = self._shared.store
        unfinished = store.allocations.unfinished()
        killed: dict[str, list[int]] = {}
        if unfinished and proc_available():
            killed = end_orphaned_runs(
                store.allocations.token_owners(), hash_token=_auth.hash_token
            )
        for allocation in unfinished:
            if not proc_available() and allocation.pgid and process_group_alive(allocation.pgid):
                if kill_orphaned_group(allocation.pgid, allocation.id):
                    killed[allocation.id] = [allocation.pgid]
            intent = allocation.end_intent or "master-stop"
            store.allocations.end(allocation.id, intent=intent)
            found = (
                f"; its processes {killed[allocation.id]} were killed"
                if allocation.id in killed
                else ""
            )
            self._logs.master_log(
                allocation.trial_id,
                f"{allocation.id} was running when the "
                f"master stopped{found}: it will resume from its latest checkpoint",
            )
        store.allocations.revoke_all_tokens()

    def _recover_trials(self, experiment: ExperimentRow) -> None:
        exp_id = experiment.id
        store = self._shared.store
        for trial in store.trials.of_experiment(exp_id):
            state = trial.state
            if state == TrialState.STOPPING_COMPLETED:
                self._experiments.end_trial(trial, TrialState.COMPLETED, None)
                self._experiments.event(exp_id, "on_trial_closed", trial.request_id)
            elif state in (TrialState.STOPPING_CANCELED, TrialState.STOPPING_KILLED):
                self._experiments.end_trial(trial, TrialState.CANCELED, None)
            elif state == TrialState.STOPPING_ERROR:
                self._experiments.end_trial(trial, TrialState.ERROR, None)
            elif state == TrialState.PAUSED and experiment.state == ExperimentState.ACTIVE:
                self._shared.trial_states.activate(trial.id)
                self._runs.schedule_trial(trial.id)
            elif state == TrialState.ACTIVE:
                if experiment.state == ExperimentState.PAUSED:
                    self._shared.trial_states.pause(trial.id)
                else:
                    self._runs.schedule_trial(trial.id)
        self._experiments.maybe_finish_experiment(exp_id)


__all__ = ["Recovery"]
