"""`SearcherOperations`: what a searcher's operations do to its experiment's trials.

The experiments part feeds a searcher its events; the operations it answers (Create,
ValidateAfter, Close, Stop, Shutdown) are applied here: new trials through the state owner,
queued validations (a completed trial the searcher promotes runs again), closing and stopping
trials, and the searcher's shutdown, which may end the experiment (the experiments part's rule,
given as `finish_experiment`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from determined.common.states import ExperimentState, TrialState
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.experiments._searchers import Searchers
from master_lite.runs._runs import Runs
from master_lite.store import TrialRow


class SearcherOperations:
    """Applies a searcher's operations to its experiment."""

    def __init__(
        self,
        shared: MasterState,
        *,
        views: Views,
        searchers: Searchers,
        runs: Runs,
        stop_trial: Callable[[TrialRow], None],
        finish_experiment: Callable[[int], None],
    ) -> None:
        self._shared = shared
        self._views = views
        self._searchers = searchers
        self._runs = runs
        self._stop_trial = stop_trial
        self._finish_experiment = finish_experiment

    def apply(self, exp_id: int, ops: list) -> None:
        """Apply the searcher's operations in order (a new trial's creation event may answer
        more, applied after), then save the searcher's snapshot. The caller holds the
        transaction."""
        # Operations come from a searcher, so its package is loaded by now.
        from master_lite.searcher import Close, Create, Shutdown, Stop, ValidateAfter

        store = self._shared.store
        queue = list(ops)
        while queue:
            op = queue.pop(0)
            match op:
                case Create():
                    trial_id = self._create_trial(exp_id, op)
                    queue.extend(
                        self._searchers.feed(exp_id, [("on_trial_created", (op.request_id,))])
                    )
                    self._runs.schedule_trial(trial_id)
                case ValidateAfter():
                    self._queue_validate_after(exp_id, op.request_id, int(op.length))
                case Close():
                    trial = store.trials.by_request(exp_id, op.request_id)
                    if trial is not None:
                        store.trials.mark_closed(trial.id)
                        self._shared.notify(("trial", trial.id))
                case Stop():
                    trial = store.trials.by_request(exp_id, op.request_id)
                    if trial is not None:
                        self._stop_trial(trial)
                case Shutdown():
                    store.experiments.mark_searcher_shutdown(exp_id, failure=bool(op.failure))
                    self._finish_experiment(exp_id)
                case _:
                    raise ValueError(f"unknown searcher operation {op!r}")
        self._searchers.save(exp_id)

    def _create_trial(self, exp_id: int, op: Any) -> int:
        experiment = self._views.experiment_row(exp_id)
        # A warm start: the trial's first run gets the source as DET_LATEST_CHECKPOINT.
        checkpoint = getattr(op, "checkpoint", None) or experiment.warm_start_checkpoint
        trial_id = self._shared.trial_states.create(
            paused=experiment.state != ExperimentState.ACTIVE,
            experiment_id=exp_id,
            request_id=op.request_id,
            hparams=op.hparams,
            seed=op.trial_seed,
            start_time=time.time(),
            latest_checkpoint=checkpoint,
        )
        self._views.publish_trial(trial_id)
        return trial_id

    def _queue_validate_after(self, exp_id: int, request_id: int, length: int) -> None:
        store = self._shared.store
        trial = store.trials.by_request(exp_id, request_id)
        if trial is None:
            return
        queue = list(trial.op_queue) + [length]
        if trial.state == TrialState.COMPLETED:
            # It exited after running out of ops, and the searcher wants more (e.g. an ASHA
            # promotion): run it again from its latest checkpoint.
            self._shared.trial_states.reopen(
                trial.id, allowed=frozenset({TrialState.COMPLETED}), op_queue=queue, closed=False
            )
        else:
            store.trials.set_op_queue(trial.id, queue)
        self._shared.notify(("trial", trial.id))
        if trial.state == TrialState.COMPLETED:
            self._views.publish_trial(trial.id)
            self._runs.schedule_trial(trial.id)


__all__ = ["SearcherOperations"]
