"""`Trial`: one trial of an experiment, its logs, metrics and checkpoints."""

from __future__ import annotations

import enum
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from determined.common import api
from determined.common.experimental import _util, checkpoint, metrics
from determined.common.experimental._trial_logs import FOLLOW_INTERVAL_S, PAGE, TrialLogs
from determined.common.experimental._util import OrderBy
from determined.common.states import TERMINAL_TRIAL_STATES

if TYPE_CHECKING:
    from determined.common.experimental import experiment


class TrialState(enum.Enum):
    """A trial's state (Determined's members and values); this master reports ACTIVE, PAUSED,
    the STOPPING_* states, COMPLETED, CANCELED and ERROR."""

    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_KILLED = "STATE_STOPPING_KILLED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    CANCELED = "STATE_CANCELED"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    QUEUED = "STATE_QUEUED"
    PULLING = "STATE_PULLING"
    STARTING = "STATE_STARTING"
    RUNNING = "STATE_RUNNING"


class TrialSortBy(enum.Enum):
    """A trial field to sort lists of trials by (Determined's values)."""

    ID = "SORT_BY_ID"
    START_TIME = "SORT_BY_START_TIME"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    BEST_VALIDATION_METRIC = "SORT_BY_BEST_VALIDATION_METRIC"
    LATEST_VALIDATION_METRIC = "SORT_BY_LATEST_VALIDATION_METRIC"
    BATCHES_PROCESSED = "SORT_BY_BATCHES_PROCESSED"
    DURATION = "SORT_BY_DURATION"
    RESTARTS = "SORT_BY_RESTARTS"
    CHECKPOINT_SIZE = "SORT_BY_CHECKPOINT_SIZE"
    LOG_RETENTION_DAYS = "SORT_BY_LOG_RETENTION_DAYS"


class TrialOrderBy(enum.Enum):
    """Deprecated in Determined in favour of `OrderBy`; the same values."""

    ASCENDING = "ORDER_BY_ASC"
    ASC = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"
    DESC = "ORDER_BY_DESC"


class Trial(TrialLogs):
    """One trial, as the master knows it.

    Usually obtained from `client.get_trial(id)` or `Experiment.list_trials()`.

    Attributes:
        id: the trial's id.
        experiment_id: its experiment's id.
        hparams: its hyperparameters, name -> value.
        state: a `TrialState`.
        summary_metrics: None (this master keeps no per-metric aggregates; see
            `latest_training`, `latest_validation`, `best_validation`).
        steps_completed: the steps of its latest report (ours).
        latest_training, latest_validation, best_validation: `{steps_completed, metrics,
            report_time}` or None (ours).
        exit_summary: the last run's exit in words, None after a clean exit (ours).

    All attributes are cached; `reload()` reads them again.
    """

    def __init__(self, trial_id: int, session: api.Session) -> None:
        """A trial by id; its attributes stay None until `reload()`.

        Args:
            trial_id: the trial's id.
            session: a session to the master.
        """
        self.id = trial_id
        self._session = session
        self.experiment_id: int | None = None
        self.hparams: dict[str, Any] | None = None
        self.summary_metrics: dict[str, Any] | None = None
        self.state: TrialState | None = None
        self.steps_completed: int | None = None
        self.latest_training: dict[str, Any] | None = None
        self.latest_validation: dict[str, Any] | None = None
        self.best_validation: dict[str, Any] | None = None
        self.exit_summary: str | None = None

    def _hydrate(self, trial: dict) -> None:
        self.experiment_id = int(trial["experiment_id"])
        self.hparams = dict(trial.get("hparams") or {})
        self.state = TrialState(_util.state_value(trial.get("state")))
        self.steps_completed = trial.get("steps_completed")
        self.latest_training = trial.get("latest_training")
        self.latest_validation = trial.get("latest_validation")
        self.best_validation = trial.get("best_validation")
        self.exit_summary = trial.get("exit_summary")

    @classmethod
    def _from_json(cls, trial: dict, session: api.Session) -> Trial:
        made = cls(int(trial["id"]), session)
        made._hydrate(trial)
        return made

    def reload(self) -> None:
        """Read the trial's attributes from the master again.

        Raises:
            determined.common.api.errors.NotFoundException: no trial has this id.
        """
        self._hydrate(self._session.get(f"/trials/{self.id}")["trial"])

    def _terminal(self) -> bool:
        state = self._session.get(f"/trials/{self.id}")["trial"]["state"]
        return state in TERMINAL_TRIAL_STATES

    # -- actions -----------------------------------------------------------------------------

    def kill(self) -> None:
        """Kill the trial (its experiment goes on with the other trials).

        Raises:
            determined.common.api.errors.NotFoundException: no trial has this id.
            determined.common.api.errors.APIException: the trial's state does not allow it.
        """
        self._hydrate(self._session.post(f"/trials/{self.id}/kill")["trial"])

    # -- checkpoints -------------------------------------------------------------------------

    def _searcher(self) -> dict[str, Any]:
        if self.experiment_id is None:
            self.reload()
        answer = self._session.get(f"/experiments/{self.experiment_id}")
        return dict(answer["experiment"].get("searcher") or {})

    def _completed_checkpoints(self) -> list[checkpoint.Checkpoint]:
        if self.experiment_id is None:
            self.reload()
        answer = self._session.get(
            f"/experiments/{self.experiment_id}/checkpoints", {"state": "COMPLETED"}
        )
        return [
            checkpoint.Checkpoint._from_json(c, self._session)
            for c in answer["checkpoints"]
            if int(c["trial_id"]) == self.id
        ]

    def list_checkpoints(
        self,
        sort_by: str | checkpoint.CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[checkpoint.Checkpoint]:
        """The trial's COMPLETED checkpoints, sorted.

        Set both `sort_by` and `order_by`, or neither: then they are sorted by the experiment's
        searcher metric, best first (by its `smaller_is_better`).

        Args:
            sort_by: a `CheckpointSortBy`, or the name of a validation metric.
            order_by: `OrderBy.ASC` or `OrderBy.DESC`.
            max_results: at most this many (default all).

        Returns:
            The checkpoints; those without the sort value (no validation at their step) last.

        Raises:
            AssertionError: only one of sort_by and order_by is set.
            ValueError: sort_by is of another type, or the searcher has no metric.
            determined.common.api.errors.NotFoundException: no trial has this id.
        """
        return checkpoint.sort_checkpoints(
            self._completed_checkpoints(), sort_by, order_by, self._searcher(), max_results
        )

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> checkpoint.Checkpoint:
        """The trial's checkpoint with the best validation metric (deprecated in Determined:
        FutureWarning; use `list_checkpoints(..., max_results=1)`).

        Args:
            sort_by: the validation metric; default the experiment's searcher metric.
            smaller_is_better: the direction for `sort_by`; default the searcher's.

        Returns:
            The best checkpoint.

        Raises:
            ValueError: the trial has no COMPLETED checkpoint.
            determined.common.api.errors.NotFoundException: no trial has this id.
        """
        warnings.warn(
            "Trial.top_checkpoint() has been deprecated and will be removed in a future "
            "version.Please call Trial.list_checkpoints(...,max_results=1) instead.",
            FutureWarning,
            stacklevel=2,
        )
        found = self.list_checkpoints(
            *checkpoint.metric_order(sort_by, smaller_is_better, self._searcher), max_results=1
        )
        if not found:
            raise ValueError(f"No checkpoints found for criteria (trial {self.id}).")
        return found[0]

    def select_checkpoint(
        self,
        latest: bool = False,
        best: bool = False,
        uuid: str | None = None,
        sort_by: str | None = None,
        smaller_is_better: bool | None = None,
    ) -> checkpoint.Checkpoint:
        """The latest, the best or a named checkpoint of the trial (deprecated in Determined:
        FutureWarning).

        Args:
            latest: the checkpoint of the most steps.
            best: the best by `sort_by` / `smaller_is_better` (default: the searcher's).
            uuid: this checkpoint.
            sort_by: the validation metric for `best`.
            smaller_is_better: the direction for `best`; set with sort_by.

        Returns:
            The checkpoint.

        Raises:
            AssertionError: not exactly one of latest, best and uuid; or sort_by without best.
            ValueError: no checkpoint matches.
            determined.common.api.errors.NotFoundException: no trial or checkpoint has this id.
        """
        warnings.warn(
            "Trial.select_checkpoint() has been deprecated and will be removed in a future "
            "version.Please call Trial.list_checkpoints() instead.",
            FutureWarning,
            stacklevel=2,
        )
        if sum((bool(latest), bool(best), uuid is not None)) != 1:
            raise AssertionError("Exactly one of latest, best, or uuid must be set")
        if (sort_by is None) != (smaller_is_better is None):
            raise AssertionError("sort_by and smaller_is_better must be set together")
        if sort_by is not None and not best:
            raise AssertionError(
                "`sort_by` and `smaller_is_better` parameters can only be used with `best`"
            )
        if uuid is not None:
            answer = self._session.get(f"/checkpoints/{uuid}")["checkpoint"]
            return checkpoint.Checkpoint._from_json(answer, self._session)
        found = checkpoint.rank_checkpoints(
            self._completed_checkpoints(),
            latest=latest,
            sort_by=sort_by,
            smaller_is_better=smaller_is_better,
            searcher=self._searcher,
        )
        if not found:
            raise ValueError("No checkpoints found for criteria.")
        return found[0]

    # -- metrics -----------------------------------------------------------------------------

    def iter_metrics(self, group: str) -> Iterator[metrics.TrialMetrics]:
        """The trial's metric reports of one group, in report order; while the trial runs, new
        reports are yielded as they arrive until it ends (as Determined's stream does).

        Args:
            group: "training", "validation", or any group the trial reported.

        Returns:
            An iterator of `TrialMetrics`.

        Raises:
            determined.common.api.errors.NotFoundException: no trial has this id.
        """
        return iter_trial_metrics(self._session, [self.id], group)

    def stream_metrics(self, group: str) -> Iterable[metrics.TrialMetrics]:
        """Deprecated in Determined (FutureWarning): the same as `iter_metrics`.

        Args:
            group: the metric group.

        Returns:
            An iterator of `TrialMetrics`.
        """
        warnings.warn(
            "Trial.stream_metrics() has been deprecated and will be removed in a future "
            "version. Please call Trial.iter_metrics() instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.iter_metrics(group)

    def get_experiment(self) -> experiment.Experiment:
        """The trial's experiment.

        Returns:
            An `Experiment`.

        Raises:
            determined.common.api.errors.NotFoundException: the trial or experiment is gone.
        """
        from determined.common.experimental import experiment

        if self.experiment_id is None:
            self.reload()
        assert self.experiment_id is not None
        answer = self._session.get(f"/experiments/{self.experiment_id}")
        return experiment.Experiment._from_json(answer["experiment"], self._session)

    def __repr__(self) -> str:
        return f"Trial(id={self.id})"


def iter_trial_metrics(
    session: api.Session, trial_ids: list[int], group: str
) -> Iterator[metrics.TrialMetrics]:
    """The metric reports of one group of several trials, following them until every one has
    ended (Determined's `iter_trials_metrics`).

    Args:
        session: a session to the master.
        trial_ids: the trials.
        group: the metric group.

    Returns:
        An iterator of `TrialMetrics`, each trial's in report order, trial after trial while
        they are already finished; interleaved by arrival while they run.

    Raises:
        determined.common.api.errors.NotFoundException: a trial id is unknown.
    """
    after_ids = dict.fromkeys(trial_ids, 0)
    running = list(trial_ids)
    while True:
        still_running = []
        for trial_id in running:
            state = session.get(f"/trials/{trial_id}")["trial"]["state"]
            while True:
                reports = session.get(
                    f"/trials/{trial_id}/metrics",
                    {"group": group, "after_id": after_ids[trial_id], "limit": PAGE},
                )["metrics"]
                for report in reports:
                    yield metrics.TrialMetrics._from_json(report)
                if reports:
                    after_ids[trial_id] = max(int(r["id"]) for r in reports)
                if len(reports) < PAGE:
                    break
            if state not in TERMINAL_TRIAL_STATES:
                still_running.append(trial_id)
        if not still_running:
            return
        running = still_running
        time.sleep(FOLLOW_INTERVAL_S)
