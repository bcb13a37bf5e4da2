"""The searcher-driving side of the experiments part: one live searcher per experiment.

It feeds the searchers their events and applies the operations they answer (create a trial,
queue a validation, close, stop, shut down), saving each searcher's snapshot in the same
transaction, so a restarted master restores exactly what the store says it heard.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from determined.common.states import ExperimentState, TrialState
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.store import ExperimentRow

if TYPE_CHECKING:
    from master_lite.experiments._experiments import Experiments
    from master_lite.runs._runs import Runs

logger = logging.getLogger("master_lite")


class Searchers:
    """Owns the live searcher of every unfinished experiment."""

    def __init__(self, shared: MasterState, views: Views) -> None:
        self._shared = shared
        self._views = views
        self._searchers: dict[int, Any] = {}
        self._experiments: Experiments = None  # type: ignore[assignment]  # wired by connect
        self._runs: Runs = None  # type: ignore[assignment]

    def connect(self, *, experiments: Experiments, runs: Runs) -> None:
        """Wire the parts this one drives: each needs this one back, so both exist first."""
        self._experiments = experiments
        self._runs = runs

    # -- the searchers ------------------------------------------------------------------------
    def add(self, exp_id: int, searcher: Any) -> None:
        """Make `searcher` the live searcher of experiment `exp_id`."""
        self._searchers[exp_id] = searcher

    def get(self, exp_id: int) -> Any | None:
        """The live searcher of the experiment, if it has one."""
        return self._searchers.get(exp_id)

    def discard(self, exp_id: int) -> None:
        """Forget the experiment's searcher (the experiment was deleted)."""
        self._searchers.pop(exp_id, None)

    def restore(self, experiment: ExperimentRow, module: Any) -> None:
        """Bring back an unfinished experiment's searcher from its snapshot (or anew)."""
        if experiment.searcher_snapshot is not None:
            searcher = module.restore_searcher(experiment.config, experiment.searcher_snapshot)
        else:
            searcher = module.make_searcher(experiment.config)
        self._searchers[experiment.id] = searcher

    def _unmanaged_progress(self, exp_id: int) -> None:
        """A run in a kernel (core_v2) has no searcher: its experiment's progress is its trials'
        mean, as each reports it."""
        if not self._views.experiment_row(exp_id).config.get("unmanaged"):
            return
        trials = self._shared.store.trials.of_experiment(exp_id)
        if trials:
            mean = sum(float(t.progress or 0.0) for t in trials) / len(trials)
            self._shared.store.experiments.update(exp_id, progress=max(0.0, min(1.0, mean)))

    # -- events -------------------------------------------------------------------------------
    def event(self, exp_id: int, method: str, *args: Any) -> None:
        """Tell the experiment's searcher one event (`method(*args)`) and apply its answer."""
        self.events(exp_id, [(method, args)])

    def events(self, exp_id: int, calls: list[tuple[str, tuple]]) -> None:
        """Feed events to the searcher in order, then apply all their operations at once."""
        searcher = self._searchers.get(exp_id)
        if searcher is None:
            return
        ops: list = []
        with self._shared.atomic():
            for method, args in calls:
                try:
                    ops.extend(getattr(searcher, method)(*args) or [])
                except Exception as exc:  # a searcher error ends the experiment, like Determined's
                    self._apply_operations(exp_id, ops)
                    self._experiments.fail_experiment(exp_id, f"searcher error in {method}: {exc}")
                    return
            self._apply_operations(exp_id, ops)

    def save(self, exp_id: int) -> None:
        """Store the searcher's snapshot (and the experiment's progress that follows)."""
        searcher = self._searchers.get(exp_id)
        if searcher is None:
            return
        self._shared.store.experiments.save_searcher(exp_id, searcher.snapshot())
        self.update_progress(exp_id)

    def update_progress(self, exp_id: int) -> None:
        """The experiment's progress, as its searcher computes it from its trials'."""
        searcher = self._searchers.get(exp_id)
        if searcher is None:
            self._unmanaged_progress(exp_id)
            return
        trials = self._shared.store.trials.of_experiment(exp_id)
        per_trial = {
            t.request_id: (1.0 if t.state == TrialState.COMPLETED else float(t.progress or 0.0))
            for t in trials
        }
        try:
            progress = float(searcher.progress(per_trial))
        except Exception:  # only the progress bar depends on it: the experiment keeps running
            logger.warning(
                "experiment %d: the searcher's progress() failed; the experiment's "
                "progress stays at its last value",
                exp_id,
                exc_info=True,
            )
            return
        self._shared.store.experiments.update(exp_id, progress=max(0.0, min(1.0, progress)))

    # -- operations ---------------------------------------------------------------------------
    def _apply_operations(self, exp_id: int, ops: list) -> None:
        # Operations come from a searcher, so its package is loaded by now.
        from master_lite.searcher import Close, Create, Shutdown, Stop, ValidateAfter

        store = self._shared.store
        queue = list(ops)
        while queue:
            op = queue.pop(0)
            match op:
                case Create():
                    trial_id = self._create_trial(exp_id, op)
                    searcher = self._searchers[exp_id]
                    queue.extend(searcher.on_trial_created(op.request_id) or [])
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
                        self._experiments.stop_trial(trial)
                case Shutdown():
                    store.experiments.mark_searcher_shutdown(exp_id, failure=bool(op.failure))
                    self._experiments.maybe_finish_experiment(exp_id)
                case _:
                    raise ValueError(f"unknown searcher operation {op!r}")
        self.save(exp_id)

    def _create_trial(self, exp_id: int, op: Any) -> int:
        store = self._shared.store
        experiment = self._views.experiment_row(exp_id)
        state = (
            TrialState.ACTIVE if experiment.state == ExperimentState.ACTIVE else TrialState.PAUSED
        )
        # A warm start: the trial's first run gets the source as DET_LATEST_CHECKPOINT.
        checkpoint = getattr(op, "checkpoint", None) or experiment.warm_start_checkpoint
        trial_id = store.trials.create(
            experiment_id=exp_id,
            request_id=op.request_id,
            state=str(state),
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
        changes: dict[str, Any] = {"op_queue": queue}
        if trial.state == TrialState.COMPLETED:
            # It exited after running out of ops, and the searcher wants more (e.g. an ASHA
            # promotion): run it again from its latest checkpoint.
            changes.update(state=str(TrialState.ACTIVE), end_time=None, closed=0)
        store.trials.update(trial.id, **changes)
        self._shared.notify(("trial", trial.id))
        if trial.state == TrialState.COMPLETED:
            self._views.publish_trial(trial.id)
            self._runs.schedule_trial(trial.id)


__all__ = ["Searchers"]
