"""What a run's exit means for its trial: the exit semantics of Determined.

Decided by the allocation's *end intent* (docs/fault-tolerance.md):
* none, exit 0 -> COMPLETED (searcher: trial closed); exit != 0 -> restart from the latest
  checkpoint while restarts < max_restarts, else ERROR (searcher: exited early, ERRORED);
* "pause" -> PAUSED (resumed from its latest checkpoint on activate);
* "master-stop" -> PAUSED, resumed when the master starts again;
* "rebalance" (the scheduler preempted it, docs/scheduling.md) -> waits again (ACTIVE, its run
  QUEUED; `restarts` unchanged: not a failure) and resumes from its latest checkpoint;
* "cluster-lost" (no intent, but the runner says the run was lost with its Ray node or cluster,
  docs/distributed.md "Faults") -> the same as "rebalance";
* "stop" (searcher early-stop) -> COMPLETED;  "cancel"/"kill"/"kill-trial" -> CANCELED.

The runs part records the run's end and calls `run_ended` inside the same transaction.
"""

from __future__ import annotations

from determined.common.states import ExperimentState, TrialState
from master_lite._core._shared import MasterState, searcher_module
from master_lite._core._views import Views
from master_lite.experiments._experiments import Experiments
from master_lite.reports._logs import TrialLogs
from master_lite.runs._preemption import RunEnded
from master_lite.runs._runs import Runs
from master_lite.store import ExperimentRow, TrialRow


class RunExits:
    """Turns run ends (and runs that never started) into trial states and searcher events."""

    def __init__(
        self,
        shared: MasterState,
        *,
        views: Views,
        logs: TrialLogs,
        experiments: Experiments,
        runs: Runs,
    ) -> None:
        self._shared = shared
        self._views = views
        self._logs = logs
        self._experiments = experiments
        self._runs = runs

    def run_ended(self, ended: RunEnded) -> None:
        """The trial's next state after its run ended, then maybe the experiment's end."""
        self._handle_trial_exit(ended)
        trial = self._views.trial_row(ended.trial_id)
        self._experiments.maybe_finish_experiment(trial.experiment_id)

    def trial_failed_to_start(self, trial_id: int) -> None:
        """The trial's run could not be launched: it ends as ERROR."""
        trial = self._views.trial_row(trial_id)
        with self._shared.atomic():
            self._experiments.end_trial(trial, TrialState.ERROR, exit_code=None)
            self._experiments.event(
                trial.experiment_id,
                "on_trial_exited_early",
                trial.request_id,
                searcher_module().ExitedReason.ERRORED,
            )
            self._experiments.maybe_finish_experiment(trial.experiment_id)

    def _handle_trial_exit(self, ended: RunEnded) -> None:
        trial_id, intent, exit_code = ended.trial_id, ended.intent, ended.exit_code
        trial = self._views.trial_row(trial_id)
        experiment = self._views.experiment_row(trial.experiment_id)
        exp_id = experiment.id
        reasons = searcher_module().ExitedReason
        end_trial = self._experiments.end_trial
        if intent in ("kill", "cancel", "kill-trial"):
            end_trial(trial, TrialState.CANCELED, exit_code)
            if intent == "kill-trial" and experiment.state == ExperimentState.ACTIVE:
                self._experiments.event(
                    exp_id, "on_trial_exited_early", trial.request_id, reasons.USER_CANCELED
                )
        elif intent == "stop" or (exit_code == 0 and trial.early_exit):
            end_trial(trial, TrialState.COMPLETED, exit_code)
            if trial.early_exit != "INVALID_HP":  # the searcher already heard about it
                self._experiments.event(exp_id, "on_trial_closed", trial.request_id)
        elif intent in ("pause", "master-stop", "rebalance", "cluster-lost") or (
            exit_code == 0 and ended.acked and trial.op_queue
        ):
            # Out of ops when it asked, but the searcher has given it more since (a promotion
            # that came while it was exiting): run it again from its latest checkpoint.
            self._requeue_or_pause(trial, experiment)
        elif exit_code == 0:
            end_trial(trial, TrialState.COMPLETED, exit_code)
            if trial.early_exit != "INVALID_HP":
                self._experiments.event(exp_id, "on_trial_closed", trial.request_id)
        elif trial.early_exit == "INVALID_HP":
            end_trial(trial, TrialState.COMPLETED, exit_code)
        elif trial.restarts < int(experiment.config.get("max_restarts", 5)):
            self._shared.store.trials.record_restart(
                trial_id, restarts=trial.restarts + 1, exit_code=exit_code
            )
            self._logs.master_log(
                trial_id,
                f"trial {trial_id} failed (exit code {exit_code}); "
                f"restart {trial.restarts + 1} of "
                f"{experiment.config.get('max_restarts', 5)}",
            )
            self._views.publish_trial(trial_id)
            self._runs.schedule_trial(trial_id)
        else:
            end_trial(trial, TrialState.ERROR, exit_code)
            self._experiments.event(
                exp_id, "on_trial_exited_early", trial.request_id, reasons.ERRORED
            )

    def _requeue_or_pause(self, trial: TrialRow, experiment: ExperimentRow) -> None:
        if experiment.state == ExperimentState.ACTIVE and not self._shared.stopping:
            self._shared.trial_states.activate(trial.id)
            self._views.publish_trial(trial.id)
            self._runs.schedule_trial(trial.id)
        else:
            self._shared.trial_states.pause(trial.id)
            self._views.publish_trial(trial.id)
            # The experiment read PAUSED (run_state STOPPING) while this run drained: tell the
            # list its run_state now (None once the last stopping run is gone).
            self._views.publish_experiment(experiment.id)


__all__ = ["RunExits"]
