"""`Experiment`'s reads of what an experiment produced: its trials and its checkpoints.

A base class of `determined.common.experimental.experiment.Experiment` (which keeps the
attributes, the lifecycle actions and the waits); nothing here is public by itself.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from determined.common import api
from determined.common.experimental import _util, checkpoint, trial
from determined.common.experimental._util import OrderBy

_TRIAL_SORT_FIELDS: dict[trial.TrialSortBy, str] = {
    trial.TrialSortBy.ID: "id",
    trial.TrialSortBy.START_TIME: "start_time",
    trial.TrialSortBy.END_TIME: "end_time",
    trial.TrialSortBy.STATE: "state",
    trial.TrialSortBy.BEST_VALIDATION_METRIC: "searcher_metric",
    trial.TrialSortBy.BATCHES_PROCESSED: "steps_completed",
    trial.TrialSortBy.RESTARTS: "restarts",
}


class ExperimentReads:
    """`Experiment`'s trial and checkpoint listings."""

    # Provided by `Experiment`; declared for the type checker only.
    _id: int
    _session: api.Session
    searcher: dict[str, Any]

    if TYPE_CHECKING:

        @property
        def id(self) -> int: ...

        def reload(self) -> None: ...

    # -- trials ------------------------------------------------------------------------------

    def iter_trials(
        self,
        sort_by: trial.TrialSortBy = trial.TrialSortBy.ID,
        order_by: OrderBy = OrderBy.ASCENDING,
        limit: int | None = None,
    ) -> Iterator[trial.Trial]:
        """The experiment's trials, sorted; by id they are read page by page.

        Args:
            sort_by: a `TrialSortBy` (ID, START_TIME, END_TIME, STATE, BEST_VALIDATION_METRIC,
                LATEST_VALIDATION_METRIC, BATCHES_PROCESSED, RESTARTS).
            order_by: `OrderBy.ASC` or `OrderBy.DESC`.
            limit: the page size of each request (default: everything at once).

        Returns:
            An iterator of `Trial`.

        Raises:
            NotImplementedError: a sort this master has no data for (DURATION,
                CHECKPOINT_SIZE, LOG_RETENTION_DAYS).
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        descending = order_by.value == OrderBy.DESC.value
        path = f"/experiments/{self._id}/trials"
        if sort_by == trial.TrialSortBy.ID:
            offset = 0
            while True:
                page = self._session.get(
                    path,
                    {"order_by": "-id" if descending else "id", "limit": limit, "offset": offset},
                )
                for t in page["trials"]:
                    yield trial.Trial._from_json(t, self._session)
                offset += len(page["trials"])
                if limit is None or not page["trials"] or offset >= int(page["total"]):
                    return
        if sort_by == trial.TrialSortBy.LATEST_VALIDATION_METRIC:
            metric = self._searcher_metric()

            def value(t: dict) -> Any:
                return ((t.get("latest_validation") or {}).get("metrics") or {}).get(metric)

        elif sort_by in _TRIAL_SORT_FIELDS:
            field = _TRIAL_SORT_FIELDS[sort_by]

            def value(t: dict) -> Any:
                return t.get(field)

        else:
            raise NotImplementedError(
                f"Experiment.list_trials(sort_by={sort_by}): this master has no such data"
            )
        trials = self._session.get(path)["trials"]
        for t in sorted(
            trials,
            key=lambda t: _util.sort_key_nulls_last(value(t), descending),
            reverse=descending,
        ):
            yield trial.Trial._from_json(t, self._session)

    def list_trials(
        self,
        sort_by: trial.TrialSortBy = trial.TrialSortBy.ID,
        order_by: OrderBy = OrderBy.ASCENDING,
    ) -> list[trial.Trial]:
        """All the experiment's trials, sorted.

        Args:
            sort_by: a `TrialSortBy` (see `iter_trials`).
            order_by: `OrderBy.ASC` or `OrderBy.DESC`.

        Returns:
            A list of `Trial`.

        Raises:
            NotImplementedError: a sort this master has no data for.
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        return list(self.iter_trials(sort_by, order_by))

    def get_trials(
        self,
        sort_by: trial.TrialSortBy = trial.TrialSortBy.ID,
        order_by: OrderBy = OrderBy.ASCENDING,
    ) -> list[trial.Trial]:
        """Deprecated in Determined (FutureWarning): the same as `list_trials`.

        Args:
            sort_by: a `TrialSortBy`.
            order_by: `OrderBy.ASC` or `OrderBy.DESC`.

        Returns:
            A list of `Trial`.
        """
        warnings.warn(
            "Experiment.get_trials() has been deprecated and will be removed in a future version."
            "Please call Experiment.list_trials() instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.list_trials(sort_by, order_by)

    # -- checkpoints -------------------------------------------------------------------------

    def _searcher_metric(self) -> str:
        if not self.searcher:
            self.reload()
        metric = self.searcher.get("metric")
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"experiment {self.id} has no searcher.metric")
        return metric

    def list_checkpoints(
        self,
        sort_by: str | checkpoint.CheckpointSortBy | None = None,
        order_by: OrderBy | None = None,
        max_results: int | None = None,
    ) -> list[checkpoint.Checkpoint]:
        """The experiment's COMPLETED checkpoints, sorted.

        Set both `sort_by` and `order_by`, or neither: then they are sorted by the searcher
        metric, best first (by the searcher's `smaller_is_better`).

        Args:
            sort_by: a `CheckpointSortBy`, or the name of a validation metric.
            order_by: `OrderBy.ASC` or `OrderBy.DESC`.
            max_results: at most this many (default all).

        Returns:
            A list of `Checkpoint`; those without the sort value (no validation at their step)
            last.

        Raises:
            AssertionError: only one of sort_by and order_by is set.
            ValueError: sort_by is of another type, or the searcher has no metric.
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        answer = self._session.get(f"/experiments/{self._id}/checkpoints", {"state": "COMPLETED"})
        found = [checkpoint.Checkpoint._from_json(c, self._session) for c in answer["checkpoints"]]
        if not self.searcher:
            self.reload()
        return checkpoint.sort_checkpoints(found, sort_by, order_by, self.searcher, max_results)

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> checkpoint.Checkpoint:
        """The experiment's checkpoint with the best validation metric (deprecated in
        Determined: FutureWarning; use `list_checkpoints(..., max_results=1)`).

        Args:
            sort_by: the validation metric; default the searcher metric.
            smaller_is_better: the direction for `sort_by`; default the searcher's.

        Returns:
            The best `Checkpoint`.

        Raises:
            AssertionError: the experiment has no COMPLETED checkpoint (as in Determined).
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        warnings.warn(
            "Experiment.top_checkpoint() has been deprecated and will be removed in a future "
            "version.Please call Experiment.list_checkpoints(...,max_results=1) instead.",
            FutureWarning,
            stacklevel=2,
        )
        found = self.list_checkpoints(*self._order(sort_by, smaller_is_better), max_results=1)
        if not found:
            raise AssertionError(f"No checkpoints found for experiment {self.id}")
        return found[0]

    def top_n_checkpoints(
        self, limit: int, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> list[checkpoint.Checkpoint]:
        """The best checkpoint of each of the `limit` best trials (deprecated in Determined:
        FutureWarning).

        Args:
            limit: at most this many checkpoints.
            sort_by: the validation metric; default the searcher metric.
            smaller_is_better: the direction for `sort_by`; default the searcher's.

        Returns:
            A list of `Checkpoint`, from distinct trials, best first.

        Raises:
            AssertionError: the experiment has no COMPLETED checkpoint.
            determined.common.api.errors.NotFoundException: no experiment has this id.
        """
        warnings.warn(
            "Experiment.top_n_checkpoints() has been deprecated and will be removed in a future "
            "version.Please call Experiment.list_checkpoints(...,max_results=n) instead.",
            FutureWarning,
            stacklevel=2,
        )
        ordered = self.list_checkpoints(*self._order(sort_by, smaller_is_better))
        if not ordered:
            raise AssertionError(f"No checkpoint found for experiment {self.id}")
        seen: set[int] = set()
        best = []
        for c in ordered:
            assert c.training is not None
            if c.training.trial_id not in seen:
                seen.add(c.training.trial_id)
                best.append(c)
        return best[:limit]

    def _order(
        self, sort_by: str | None, smaller_is_better: bool | None
    ) -> tuple[str | None, OrderBy | None]:
        if sort_by is None:
            return None, None
        if smaller_is_better is None:
            if not self.searcher:
                self.reload()
            smaller_is_better = self.searcher.get("smaller_is_better", True) is not False
        return sort_by, OrderBy.ASC if smaller_is_better else OrderBy.DESC
