"""The experiments part: creating experiments, their actions and their state machine.

Trials end here too (`end_trial`, `stop_trial`, `kill_trial`): what ends a trial decides what
its experiment becomes. The experiment's searcher is fed here (`event`, `events`); its
operations are applied by `SearcherOperations` (_operations.py: create, stop, close trials;
shut down). Runs are asked for through the runs part; reads and events go through the views;
every state change is a named transition of the state owner (`shared.trial_states`, ...).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from determined.common.states import (
    TERMINAL_EXPERIMENT_STATES,
    TERMINAL_TRIAL_STATES,
    ExperimentState,
    TrialState,
)
from master_lite import errors
from master_lite._core._auth import OWNER_ID
from master_lite._core._shared import MasterState, searcher_module
from master_lite._core._views import Views
from master_lite.experiments._creation import checked_config, warm_start_checkpoint
from master_lite.experiments._operations import SearcherOperations
from master_lite.experiments._searchers import SearcherFailed, Searchers
from master_lite.experiments._trial_api import check_trial_api
from master_lite.reports._logs import TrialLogs
from master_lite.runs._contexts import Contexts
from master_lite.runs._runs import Runs
from master_lite.runs._scheduling import check_resource_pool
from master_lite.store import TrialRow
from master_lite.workspaces import place_experiment

EXPERIMENT_ACTIONS = ("pause", "activate", "cancel", "kill", "archive", "unarchive")


class Experiments:
    """Experiment creation, actions (pause, activate, cancel, kill, archive) and ends."""

    def __init__(
        self,
        shared: MasterState,
        *,
        views: Views,
        contexts: Contexts,
        searchers: Searchers,
        runs: Runs,
        logs: TrialLogs,
        collect_garbage: Callable[[], None],
    ) -> None:
        self._shared = shared
        self._views = views
        self._contexts = contexts
        self._searchers = searchers
        self._runs = runs
        self._logs = logs
        self._collect_garbage = collect_garbage  # checkpoint GC of finished experiments
        self._operations = SearcherOperations(
            shared,
            views=views,
            searchers=searchers,
            runs=runs,
            stop_trial=self.stop_trial,
            finish_experiment=self.maybe_finish_experiment,
        )

    # -- creation -----------------------------------------------------------------------------
    def create_experiment(
        self,
        config: dict | str,
        context: bytes | None,
        *,
        activate: bool = True,
        archived: bool = False,
        notebook: dict | None = None,
        parent_id: int | None = None,
        owner_id: int = OWNER_ID,
        project_id: int | None = None,
    ) -> dict:
        """Check and expand the config, store the context, start the searcher; the JSON (on
        the calling thread: the API's `submit_experiment` checks the context in a worker)."""
        expanded, original_text, searcher = self._checked_config(config, parent_id)
        context_hash = self._checked_context(expanded, context)
        return self._create(
            expanded,
            original_text,
            searcher,
            context_hash,
            None if context is None else len(context),
            activate=activate,
            archived=archived,
            notebook=notebook,
            parent_id=parent_id,
            owner_id=owner_id,
            project_id=project_id,
        )

    def _checked_config(
        self, config: dict | str, parent_id: int | None = None
    ) -> tuple[dict, str, Any]:
        # A fork gets its parent's secrets back for stars; stars with no source are refused.
        parent = self._views.experiment_row(parent_id).config if parent_id is not None else None
        expanded, original_text, searcher = checked_config(
            config,
            root_dir=self._shared.root_dir,
            runner=self._runs.runner,
            parent_config=parent,
            storage_roots=self._shared.storage_roots,
        )
        check_resource_pool(expanded, self._runs.scheduler)
        # A warm start that does not exist fails before any file work (`_create` asks again).
        warm_start_checkpoint(self._shared.store, expanded.get("searcher") or {})
        return expanded, original_text, searcher

    def _checked_context(self, expanded: dict, context: bytes | None) -> str | None:
        """The context checked (and the Trial/Native API checks that read it) and stored; its
        hash (None without one). Blocking: the API runs it in a worker thread."""
        check_trial_api(expanded, context, size_limit=self._contexts.size_limit)
        return None if context is None else self._contexts.check_and_write(context)

    async def submit_experiment(
        self,
        config: dict | str,
        context: bytes | None,
        *,
        activate: bool = True,
        archived: bool = False,
        notebook: dict | None = None,
        parent_id: int | None = None,
        owner_id: int = OWNER_ID,
        project_id: int | None = None,
    ) -> dict:
        """`create_experiment` for the API: the context is checked (unpacked into a scratch
        directory) and written in a worker thread, so that a context of many files never
        stalls the loop; the config is checked first and the rows are written on the loop."""
        expanded, original_text, searcher = self._checked_config(config, parent_id)
        context_hash = await asyncio.to_thread(self._checked_context, expanded, context)
        if context is not None and (self._shared.stopping or self._shared.closed):
            raise errors.Conflict("the master is stopping: submit the experiment again")
        return self._create(
            expanded,
            original_text,
            searcher,
            context_hash,
            None if context is None else len(context),
            activate=activate,
            archived=archived,
            notebook=notebook,
            parent_id=parent_id,
            owner_id=owner_id,
            project_id=project_id,
        )

    def _create(
        self,
        expanded: dict,
        original_text: str,
        searcher: Any,
        context_hash: str | None,
        context_size: int | None,
        *,
        activate: bool,
        archived: bool,
        notebook: dict | None,
        parent_id: int | None,
        owner_id: int = OWNER_ID,
        project_id: int | None = None,
    ) -> dict:
        """Store the experiment whose config and context were checked (on the loop thread)."""
        pools = self._runs.scheduler.pools  # naming no pool: its workspace's default, if any
        project_id = place_experiment(self._shared.store, expanded, project_id, parent_id, pools)
        warm_start = warm_start_checkpoint(self._shared.store, expanded.get("searcher") or {})
        if context_hash is not None and context_size is not None:
            self._contexts.record(context_hash, context_size)
        # The experiment, its first trials and the searcher's snapshot appear together.
        with self._shared.atomic():
            exp_id = self._shared.experiment_states.create(
                paused=not activate,
                name=str(expanded.get("name") or "Experiment"),
                description=expanded.get("description") or "",
                labels=list(expanded.get("labels") or []),
                archived=bool(archived),
                config=expanded,
                original_config=original_text,
                context_hash=context_hash,
                notebook=notebook,
                parent_id=parent_id,
                start_time=time.time(),
                warm_start_checkpoint=warm_start,
                owner_id=owner_id,  # the submitter (docs/team.md)
                project_id=project_id,
            )
            self._searchers.add(exp_id, searcher)
            self._views.publish_experiment(exp_id)
            self.event(exp_id, "initial_operations")
            self._searchers.save(exp_id)
        return self._views.get_experiment(exp_id, with_config=False)

    def get_experiment_context(self, exp_id: int) -> bytes:
        """The context tarball the experiment was submitted with."""
        row = self._views.experiment_row(exp_id)
        if not row.context_hash:
            raise errors.NotFound(f"experiment {exp_id} has no context")
        return self._contexts.read(row.context_hash)

    # -- actions ------------------------------------------------------------------------------
    def experiment_action(self, exp_id: int, action: str) -> dict:
        """Apply a user's action (one of EXPERIMENT_ACTIONS); the experiment's JSON after it."""
        if action not in EXPERIMENT_ACTIONS:
            raise errors.InvalidRequest(
                f"unknown experiment action {action!r}; expected one of "
                f"{', '.join(EXPERIMENT_ACTIONS)}"
            )
        experiment = self._views.experiment_row(exp_id)
        state = ExperimentState(experiment.state)
        terminal = state in TERMINAL_EXPERIMENT_STATES
        if action in ("archive", "unarchive"):
            if not terminal:
                raise errors.Conflict(
                    f"experiment {exp_id} is {state}: only finished experiments "
                    f"can be {action}d (cancel it first)"
                )
            self._shared.store.experiments.set_archived(exp_id, action == "archive")
            self._views.publish_experiment(exp_id)
        elif (
            terminal
            or state in (ExperimentState.STOPPING_CANCELED, ExperimentState.STOPPING_ERROR)
            and action != "kill"
        ):
            if not (action == "cancel" and state == ExperimentState.STOPPING_CANCELED):
                raise errors.Conflict(f"cannot {action} experiment {exp_id}: it is {state}")
        elif action in ("pause", "activate") and experiment.config.get("unmanaged"):
            raise errors.Conflict(
                f"cannot {action} experiment {exp_id}: it trains in a Jupyter kernel "
                "(core_v2), which the master does not run; stop it in the kernel, or kill it"
            )
        elif action == "pause":
            if state == ExperimentState.ACTIVE:
                with self._shared.atomic():
                    self._pause_experiment(exp_id)
        elif action == "activate":
            if state == ExperimentState.PAUSED:
                with self._shared.atomic():
                    self._activate_experiment(exp_id)
        elif action in ("cancel", "kill"):
            with self._shared.atomic():
                self._stop_experiment(exp_id, kill=(action == "kill"))
        return self._views.get_experiment(exp_id, with_config=False)

    def _live_trials(self, exp_id: int) -> list[TrialRow]:
        return [
            t
            for t in self._shared.store.trials.of_experiment(exp_id)
            if t.state not in TERMINAL_TRIAL_STATES
        ]

    def _pause_experiment(self, exp_id: int) -> None:
        self._shared.experiment_states.pause(exp_id)
        for trial in self._live_trials(exp_id):
            allocation_id = self._runs.allocation_id_of(trial.id)
            if allocation_id is not None:
                self._runs.preempt(allocation_id, "pause")
            else:
                self._runs.cancel_request(trial.id)
                self._shared.trial_states.pause(trial.id)
                self._views.publish_trial(trial.id)
        # Published once the runs were asked to stop, so the event says STOPPING (run_state)
        # while they drain; the last one's exit publishes it again (`RunExits`).
        self._views.publish_experiment(exp_id)
        self._runs.run_scheduler()

    def _activate_experiment(self, exp_id: int) -> None:
        self._shared.experiment_states.activate(exp_id)
        self._views.publish_experiment(exp_id)
        for trial in self._live_trials(exp_id):
            if self._runs.is_running(trial.id):
                continue  # still draining after the pause: it is requeued when it exits
            if trial.state == TrialState.PAUSED:
                self._shared.trial_states.activate(trial.id)
                self._views.publish_trial(trial.id)
            self._runs.schedule_trial(trial.id)

    def _stop_experiment(self, exp_id: int, *, kill: bool) -> None:
        self._shared.experiment_states.stop(exp_id, ExperimentState.STOPPING_CANCELED)
        self._views.publish_experiment(exp_id)
        for trial in self._live_trials(exp_id):
            allocation_id = self._runs.allocation_id_of(trial.id)
            if allocation_id is None:
                self._runs.cancel_request(trial.id)
                self.end_trial(trial, TrialState.CANCELED, None)
                continue
            stopping = TrialState.STOPPING_KILLED if kill else TrialState.STOPPING_CANCELED
            self._shared.trial_states.stop(trial.id, stopping)
            self._views.publish_trial(trial.id)
            if kill:
                self._runs.kill(
                    allocation_id, "kill", f"killed by the user (experiment {exp_id} kill)"
                )
            else:
                self._runs.preempt(allocation_id, "cancel")
        self.maybe_finish_experiment(exp_id)
        self._runs.run_scheduler()

    # -- trials' ends -------------------------------------------------------------------------
    def kill_trial(self, trial_id: int) -> dict:
        """Kill the trial's run (or cancel it if it does not run); the trial's JSON."""
        trial = self._views.trial_row(trial_id)
        if trial.state in TERMINAL_TRIAL_STATES:
            return self._views.get_trial(trial_id)
        allocation_id = self._runs.allocation_id_of(trial.id)
        if allocation_id is not None:
            self._shared.trial_states.stop(trial.id, TrialState.STOPPING_KILLED)
            self._runs.kill(
                allocation_id, "kill-trial", f"killed by the user (trial {trial_id} kill)"
            )
            return self._views.get_trial(trial_id)
        with self._shared.atomic():  # the trial's end and the searcher's hearing of it, together
            self._runs.cancel_request(trial.id)
            self.end_trial(trial, TrialState.CANCELED, None)
            experiment = self._views.experiment_row(trial.experiment_id)
            if experiment.state == ExperimentState.ACTIVE:
                reason = searcher_module().ExitedReason.USER_CANCELED
                self.event(experiment.id, "on_trial_exited_early", trial.request_id, reason)
            self.maybe_finish_experiment(trial.experiment_id)
        return self._views.get_trial(trial_id)

    def stop_trial(self, trial: TrialRow) -> None:
        """Searcher early-stop: the run is preempted and its exit means COMPLETED."""
        if trial.state in TERMINAL_TRIAL_STATES:
            return
        store = self._shared.store
        store.trials.request_stop(trial.id)
        allocation_id = self._runs.allocation_id_of(trial.id)
        if allocation_id is not None:
            self._shared.trial_states.stop(trial.id, TrialState.STOPPING_COMPLETED)
            self._runs.preempt(allocation_id, "stop")
            self._shared.notify(("trial", trial.id))
            self._views.publish_trial(trial.id)
            return
        self._runs.cancel_request(trial.id)
        self.end_trial(trial, TrialState.COMPLETED, exit_code=None)
        self.event(trial.experiment_id, "on_trial_closed", trial.request_id)
        self.maybe_finish_experiment(trial.experiment_id)

    def end_trial(self, trial: TrialRow, state: TrialState, exit_code: int | None) -> None:
        """Give the trial its final `state` (and exit code), and tell whoever waits."""
        companions: dict[str, Any] = {} if exit_code is None else {"exit_code": exit_code}
        self._shared.trial_states.end(trial.id, state, end_time=time.time(), **companions)
        self._shared.notify(("trial", trial.id))
        self._views.publish_trial(trial.id)

    # -- the experiment's state machine -------------------------------------------------------
    def maybe_finish_experiment(self, exp_id: int) -> None:
        """End the experiment if nothing of it runs or will run any more."""
        store = self._shared.store
        experiment = self._views.experiment_row(exp_id)
        state = experiment.state
        if state in (ExperimentState.COMPLETED, ExperimentState.CANCELED, ExperimentState.ERROR):
            return
        trials = store.trials.of_experiment(exp_id)
        running = [t for t in trials if self._runs.is_running(t.id)]
        if state in (ExperimentState.STOPPING_CANCELED, ExperimentState.STOPPING_ERROR):
            if running:
                return
            for trial in trials:
                if trial.state not in TERMINAL_TRIAL_STATES:
                    self._runs.cancel_request(trial.id)
                    self.end_trial(trial, TrialState.CANCELED, None)
            final = (
                ExperimentState.CANCELED
                if state == ExperimentState.STOPPING_CANCELED
                else ExperimentState.ERROR
            )
            self._end_experiment(exp_id, final)
            return
        if experiment.config.get("unmanaged"):  # no searcher: it ends with its last trial
            if trials and all(t.state in TERMINAL_TRIAL_STATES for t in trials):
                ends = {t.state for t in trials}
                final = (
                    ExperimentState.ERROR
                    if TrialState.ERROR in ends
                    else ExperimentState.CANCELED
                    if TrialState.CANCELED in ends
                    else ExperimentState.COMPLETED
                )
                self._end_experiment(exp_id, final)
            return
        if not experiment.searcher_shutdown:
            return
        unfinished = [t for t in trials if t.state not in TERMINAL_TRIAL_STATES]
        if unfinished:
            return
        failed = bool(experiment.searcher_failure) or (
            bool(trials) and all(t.state == TrialState.ERROR for t in trials)
        )
        self._end_experiment(exp_id, ExperimentState.ERROR if failed else ExperimentState.COMPLETED)

    def fail_experiment(self, exp_id: int, message: str) -> None:
        """Kill every run of the experiment and end it as ERROR (`message` says why)."""
        for trial in self._shared.store.trials.of_experiment(exp_id):
            if trial.state in TERMINAL_TRIAL_STATES:
                continue
            self._logs.master_log(trial.id, message)
            allocation_id = self._runs.allocation_id_of(trial.id)
            if allocation_id is not None:
                self._runs.kill(
                    allocation_id,
                    "kill",
                    f"killed by the master (the experiment failed: {message})",
                )
        self._shared.experiment_states.stop(exp_id, ExperimentState.STOPPING_ERROR)
        self._views.publish_experiment(exp_id)
        self.maybe_finish_experiment(exp_id)

    def _end_experiment(self, exp_id: int, final: ExperimentState) -> None:
        self._shared.experiment_states.end(exp_id, final, end_time=time.time())
        self._views.publish_experiment(exp_id)
        # Once this change has committed: GC deletes files no rollback could bring back.
        self._shared.loop.call_soon(self._collect_garbage)

    # -- the searcher's events and operations -------------------------------------------------
    def event(self, exp_id: int, method: str, *args: Any) -> None:
        """Tell the experiment's searcher one event (`method(*args)`) and apply its answer."""
        self.events(exp_id, [(method, args)])

    def events(self, exp_id: int, calls: list[tuple[str, tuple]]) -> None:
        """Feed events to the experiment's searcher in order, then apply all its operations at
        once, with its snapshot, in one transaction. A searcher that raises ends the experiment
        as ERROR (like Determined's), after what it answered before is applied."""
        if self._searchers.get(exp_id) is None:
            return
        with self._shared.atomic():
            try:
                ops = self._searchers.feed(exp_id, calls)
            except SearcherFailed as failed:
                self._operations.apply(exp_id, failed.ops)
                self.fail_experiment(exp_id, str(failed))
                return
            self._operations.apply(exp_id, ops)

    def update_progress(self, exp_id: int) -> None:
        """The experiment's progress, as its searcher computes it from its trials'."""
        self._searchers.update_progress(exp_id)


__all__ = ["EXPERIMENT_ACTIONS", "Experiments"]
