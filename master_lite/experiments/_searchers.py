"""The live searchers of the experiments part: one per unfinished experiment.

It feeds a searcher its events and hands back the operations it answers (create a trial, queue
a validation, close, stop, shut down); the experiments part applies them (`Experiments.events`)
and saves the searcher's snapshot in the same transaction, so a restarted master restores
exactly what the store says it heard. It never calls the experiments part back.
"""

from __future__ import annotations

import logging
from typing import Any

from determined.common.states import TrialState
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.store import ExperimentRow

logger = logging.getLogger("master_lite")


class SearcherFailed(Exception):
    """A searcher raised on an event; `ops`: what it answered to the events before."""

    def __init__(self, message: str, ops: list) -> None:
        super().__init__(message)
        self.ops = ops


class Searchers:
    """Owns the live searcher of every unfinished experiment."""

    def __init__(self, shared: MasterState, views: Views) -> None:
        self._shared = shared
        self._views = views
        self._searchers: dict[int, Any] = {}

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
            self._shared.store.experiments.set_progress(exp_id, mean)

    # -- events -------------------------------------------------------------------------------
    def feed(self, exp_id: int, calls: list[tuple[str, tuple]]) -> list:
        """Tell the experiment's searcher events in order (`(method, args)`); the operations it
        answers, for the experiments part to apply. SearcherFailed (with the operations answered
        before) when the searcher raises."""
        searcher = self._searchers.get(exp_id)
        if searcher is None:
            return []
        ops: list = []
        for method, args in calls:
            try:
                ops.extend(getattr(searcher, method)(*args) or [])
            except Exception as exc:  # a searcher error ends the experiment, like Determined's
                raise SearcherFailed(f"searcher error in {method}: {exc}", ops) from exc
        return ops

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
        self._shared.store.experiments.set_progress(exp_id, progress)


__all__ = ["SearcherFailed", "Searchers"]
