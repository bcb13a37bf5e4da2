"""The reports part: what trial runs report and ask (metrics, progress, early exits, ops).

Each report is stored and heard by the searcher in one transaction; events go out after it.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from determined.common.states import TERMINAL_TRIAL_STATES
from master_lite import errors
from master_lite._core import _metric_format, _serialize
from master_lite._core._shared import MasterState, searcher_module
from master_lite._core._views import Views

EARLY_EXIT_REASONS = {
    "EXITED_REASON_INVALID_HP": "INVALID_HP",
    "INVALID_HP": "INVALID_HP",
    "EXITED_REASON_USER_REQUESTED_STOP": "USER_REQUESTED_STOP",
    "USER_REQUESTED_STOP": "USER_REQUESTED_STOP",
}


class SearcherEvents(Protocol):
    """What reports tell an experiment's searcher (`master_lite.experiments.Experiments` feeds
    it and applies its answer); a protocol, so this package never imports the experiments."""

    def event(self, exp_id: int, method: str, *args: Any) -> None: ...

    def events(self, exp_id: int, calls: list[tuple[str, tuple]]) -> None: ...

    def update_progress(self, exp_id: int) -> None: ...


class Reports:
    """Ingests trial reports and answers the searcher-operation protocol of trial runs."""

    def __init__(self, shared: MasterState, *, views: Views, searchers: SearcherEvents) -> None:
        self._shared = shared
        self._views = views
        self._searchers = searchers
        # (searcher.metric, smaller_is_better) per experiment: configs never change.
        self._searcher_metric_cache: dict[int, tuple[str | None, bool]] = {}

    def report_metrics(self, trial_id: int, reports: list[dict]) -> int:
        """Store a run's metric reports and tell the searcher its validations; returns how many were
        accepted."""
        trial = self._views.trial_row(trial_id)
        rows = _metric_format.normalize_metric_reports(
            reports, trial_id=trial.id, default_run_id=trial.run_id
        )
        if not rows:
            return 0
        accepted = len(rows)
        metric_name, smaller_is_better = self._searcher_metric(trial.experiment_id)
        latest: dict[str, int] = {}  # "training" / "validation" -> the newest report's id
        best_id: int | None = trial.best_validation_id
        # Stored and heard by the searcher in one transaction: after a crash either both
        # happened or neither did (the resumed run reports it again).
        with self._shared.atomic():
            # A resumed run redoing steps an earlier run reported replaces those reports
            # instead of duplicating them (docs/fault-tolerance.md).
            ids, superseded = self._shared.store.insert_current_metrics(trial.id, rows)
            rows = [row for row, metric_id in zip(rows, ids, strict=False) if metric_id is not None]
            for metric_id, row in zip([i for i in ids if i is not None], rows, strict=False):
                row["id"] = metric_id
                if row["group"] in ("training", "validation"):
                    latest[row["group"]] = metric_id
            if trial.best_validation_id in superseded:  # rare: recount from scratch
                best_id = self._best_validation_id(trial.id, metric_name, smaller_is_better)
            elif any(row["group"] == "validation" for row in rows):
                best_value = None
                if best_id is not None:
                    best_row = self._shared.store.metrics.by_id(best_id)
                    best_value = (
                        _metric_format.comparable_metric_value(best_row["metrics"], metric_name)
                        if best_row
                        else None
                    )
                for row in rows:
                    value = (
                        _metric_format.comparable_metric_value(row["metrics"], metric_name)
                        if row["group"] == "validation"
                        else None
                    )
                    if value is not None and (
                        best_value is None
                        or (value < best_value if smaller_is_better else value > best_value)
                    ):
                        best_id, best_value = row["id"], value
            self._shared.store.trials.record_metrics(
                trial.id,
                steps_completed=max(
                    [trial.steps_completed] + [row["steps_completed"] for row in rows]
                ),
                latest_training_id=latest.get("training"),
                latest_validation_id=latest.get("validation"),
                best_validation_id=best_id,
                best_changed=best_id != trial.best_validation_id,
            )
            validations = [
                ("on_validation_reported", (trial.request_id, row["metrics"]))
                for row in rows
                if row["group"] == "validation"
            ]
            if validations:
                self._searchers.events(trial.experiment_id, validations)
        if self._shared.events.has_subscribers("metric"):
            for row in rows:
                self._shared.events.publish("metric", _serialize.metric_json(row))
        self._views.publish_trial(trial.id)
        # The experiment's best validation is derived from its trials' best: listeners of
        # experiment events (the sidebar's list) must hear when it moves.
        if best_id != trial.best_validation_id:
            self._views.publish_experiment(trial.experiment_id)
        return accepted

    def _searcher_metric(self, experiment_id: int) -> tuple[str | None, bool]:
        """(searcher.metric, smaller_is_better) of an experiment. Read once per experiment, not
        per report (an experiment's config never changes once created)."""
        cache = self._searcher_metric_cache
        cached = cache.get(experiment_id)
        if cached is None:
            config = self._views.experiment_row(experiment_id).config
            searcher_config = config.get("searcher") or {}
            cached = (
                searcher_config.get("metric"),
                bool(searcher_config.get("smaller_is_better", True)),
            )
            cache[experiment_id] = cached
        return cached

    def _best_validation_id(
        self, trial_id: int, metric_name: str | None, smaller_is_better: bool
    ) -> int | None:
        """The trial's current validation report with the best searcher metric (the earliest
        of equals)."""
        best_id, best_value = None, None
        for row in self._shared.store.metrics.validations(trial_id):
            value = _metric_format.comparable_metric_value(row["metrics"], metric_name)
            if value is not None and (
                best_value is None
                or (value < best_value if smaller_is_better else value > best_value)
            ):
                best_id, best_value = row["id"], value
        return best_id

    def report_progress(self, trial_id: int, progress: float) -> None:
        """The trial's progress (clamped to 0..1), and the experiment's that follows."""
        trial = self._views.trial_row(trial_id)
        try:
            value = float(progress)
        except (TypeError, ValueError) as exc:
            raise errors.InvalidRequest(f"progress: expected a number, got {progress!r}") from exc
        if not math.isfinite(value):
            raise errors.InvalidRequest(f"progress: expected a finite number, got {progress!r}")
        self._shared.store.trials.set_progress(trial.id, value)
        self._searchers.update_progress(trial.experiment_id)
        self._views.publish_trial(trial.id)
        self._views.publish_experiment(trial.experiment_id)

    def set_runner_state(self, trial_id: int, state: str) -> None:
        """What the trial's run says it is doing (free text shown with the trial)."""
        trial = self._views.trial_row(trial_id)
        self._shared.store.trials.set_runner_state(trial.id, state)
        self._views.publish_trial(trial.id)

    def report_early_exit(self, trial_id: int, reason: str) -> None:
        """The run exits early: invalid hyperparameters (the searcher hears it) or a user's stop."""
        trial = self._views.trial_row(trial_id)
        normalized = EARLY_EXIT_REASONS.get(str(reason))
        if normalized is None:
            raise errors.InvalidRequest(
                f"reason: unknown early exit reason {reason!r}; expected "
                "EXITED_REASON_INVALID_HP or "
                "EXITED_REASON_USER_REQUESTED_STOP"
            )
        if trial.early_exit:
            raise errors.InvalidRequest(
                f"trial {trial_id} already reported an early exit ({trial.early_exit})"
            )
        self._shared.store.trials.set_early_exit(trial.id, normalized)
        if normalized == "INVALID_HP":
            self._searchers.event(
                trial.experiment_id,
                "on_trial_exited_early",
                trial.request_id,
                searcher_module().ExitedReason.INVALID_HP,
            )

    # -- searcher operations (≤0.37 protocol) -------------------------------------------------
    async def next_operation(self, trial_id: int, timeout: float) -> dict:
        """The trial's current op, or `{completed: true}` when it has none.

        Searchers answer every event at once (a Create comes with its first ValidateAfter, a
        completed op with the promotion or nothing), so an empty queue means "nothing for you
        now": the process exits (after acknowledging, see the harness's `operations()`) and
        frees its slots. If the searcher later hands the trial another op (an ASHA promotion)
        the master starts it again from its latest checkpoint. `timeout` is accepted for the
        long-poll contract; no answer needs to wait."""
        trial = self._views.trial_row(trial_id)
        if trial.stop_requested:  # early-stopped: whatever was queued will not run
            return {"completed": True, "op": None}
        if trial.op_queue and trial.state not in TERMINAL_TRIAL_STATES:
            return {
                "completed": False,
                "op": {"validateAfter": {"length": str(trial.op_queue[0])}},
            }
        return {"completed": True, "op": None}

    def complete_operation(self, trial_id: int, length: int, metric: Any) -> None:
        """The run finished the queued operation of `length` with this searcher metric."""
        trial = self._views.trial_row(trial_id)
        try:
            length = int(length)
        except (TypeError, ValueError) as exc:
            raise errors.InvalidRequest(f"op.length: expected an integer, got {length!r}") from exc
        if length not in trial.op_queue:
            raise errors.InvalidRequest(
                f"trial {trial_id} has no pending operation of length {length} "
                f"(pending: {trial.op_queue or 'none'})"
            )
        if isinstance(metric, str) and metric in ("NaN", "Infinity", "-Infinity"):
            metric = float(metric)  # strict JSON's form of a diverged metric (Determined's too)
        if isinstance(metric, bool) or not isinstance(metric, (int, float)):
            raise errors.InvalidRequest(f"searcherMetric: expected a number, got {metric!r}")
        queue = list(trial.op_queue)
        queue.remove(length)
        with self._shared.atomic():  # the op is done exactly when the searcher has heard of it
            self._shared.store.trials.set_op_queue(trial.id, queue)
            self._searchers.event(
                trial.experiment_id,
                "on_validation_completed",
                trial.request_id,
                float(metric),
                length,
            )
        self._shared.notify(("trial", trial.id))


__all__ = ["EARLY_EXIT_REASONS", "Reports"]
