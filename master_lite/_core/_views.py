"""The read model every part shares: experiments, trials and metrics as API JSON.

Nothing here changes state; every other part publishes experiment and trial events through
`publish_experiment` / `publish_trial`, so one place decides what an event carries.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from master_lite import errors
from master_lite._core import _metric_format, _serialize
from master_lite._core._secrets import redact_config
from master_lite._core._shared import MasterState
from master_lite.store import MIN_DATAPOINTS, TRIAL_ORDERS, ExperimentRow, MetricsQuery, TrialRow


class Views:
    """Experiment, trial and metric reads, and the experiment/trial events."""

    def __init__(self, shared: MasterState) -> None:
        self._shared = shared
        # The live allocation of a trial (the runs part owns them); wired by `connect`.
        self._allocation_of: Callable[[int], dict | None] = lambda trial_id: None
        self._kernel_kept: Callable[[int, int], bool] = lambda trial_id, run_id: False
        # Why a waiting trial waits (the scheduler's reason); wired by `connect`.
        self._wait_reason_of: Callable[[int], str | None] = lambda trial_id: None
        self._experiment_wait_reason_of: Callable[[int], str | None] = lambda exp_id: None

    def connect(
        self,
        *,
        allocation_of: Callable[[int], dict | None],
        kernel_kept: Callable[[int, int], bool] | None = None,
        wait_reason_of: Callable[[int], str | None] | None = None,
        experiment_wait_reason_of: Callable[[int], str | None] | None = None,
    ) -> None:
        """Wire the runs part's `allocation_of_trial` and `kernel_kept` (built after this
        part)."""
        self._allocation_of = allocation_of
        if kernel_kept is not None:
            self._kernel_kept = kernel_kept
        if wait_reason_of is not None:
            self._wait_reason_of = wait_reason_of
        if experiment_wait_reason_of is not None:
            self._experiment_wait_reason_of = experiment_wait_reason_of

    # -- rows ---------------------------------------------------------------------------------
    def experiment_row(self, exp_id: int) -> ExperimentRow:
        """The experiment's stored row; NotFound if there is none."""
        row = self._shared.store.experiments.get(int(exp_id))
        if row is None:
            raise errors.NotFound(f"experiment {exp_id} not found")
        return row

    def trial_row(self, trial_id: int) -> TrialRow:
        """The trial's stored row; NotFound if there is none."""
        row = self._shared.store.trials.get(int(trial_id))
        if row is None:
            raise errors.NotFound(f"trial {trial_id} not found")
        return row

    # -- experiments --------------------------------------------------------------------------
    def _experiment_json(self, row: ExperimentRow, *, with_config: bool) -> dict:
        out = _serialize.experiment_json(
            row,
            num_trials=self._shared.store.trials.count(row.id),
            best_validation=self._best_validation(row),
            with_config=with_config,
        )
        out.update(self._run_and_wait(row))
        owner = self._shared.store.users.get(row.owner_id)
        out.update(_serialize.owner_json(row.owner_id, owner.username if owner else None))
        out.update(
            _serialize.place_json(row.project_id, self._shared.store.projects.place(row.project_id))
        )
        return out

    def _experiment_run_state(self, row: ExperimentRow) -> str | None:
        """What an ACTIVE experiment is doing, as Determined (0.2x+) reports it in place of
        ACTIVE: "RUNNING" while one of its trials holds slots (an unmanaged experiment: has an
        ACTIVE trial), else "QUEUED". "STOPPING" while a PAUSED experiment (or an ACTIVE one
        whose runs the master asked to stop for a pause or its own shutdown) still has a run
        that has not exited: the experiment reads PAUSED at once, but it is not paused until
        its trials really stop (the views show PAUSING then). None in every other state."""
        if row.state not in ("ACTIVE", "PAUSED"):
            return None
        unmanaged = bool(row.config.get("unmanaged"))
        running = False
        for trial in self._shared.store.trials.of_experiment(row.id):
            allocation = None if unmanaged else self._allocation_of(trial.id)
            if _serialize.stop_reason(allocation) in ("pause", "master-stop"):
                return "STOPPING"
            if trial.state == "ACTIVE" and (unmanaged or allocation is not None):
                running = True
        if row.state == "PAUSED":
            return None
        return "RUNNING" if running else "QUEUED"

    def list_experiments(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        archived: bool | None = None,
        **place: Any,
    ) -> list[dict]:
        """Experiments matching the filters, as API JSON (without configs): a few queries for
        all of them (bench_reads.py: two per experiment and every config decoded made a list
        of 2,000 take 140 ms). `place`: `project_id`, `workspace_id`, `user_ids` (owners)."""
        given = {key: value for key, value in place.items() if value is not None}
        listing = self._shared.store.experiments.listing(
            state=state, name=name, archived=archived, **given
        )
        names = self._shared.store.users.names()
        places = self._shared.store.projects.names()
        return [
            {
                **_serialize.experiment_json(
                    row,
                    num_trials=num_trials,
                    best_validation=self._best_of(row.config, [json.loads(m) for m in best]),
                    with_config=False,
                ),
                # As in one experiment's JSON (only ACTIVE ones ask their trials).
                **self._run_and_wait(row),
                **_serialize.owner_json(row.owner_id, names.get(row.owner_id)),
                **_serialize.place_json(row.project_id, places),
            }
            for row, num_trials, best in listing
        ]

    def _run_and_wait(self, row: ExperimentRow) -> dict:
        """`run_state`, and `wait_reason` (the scheduler's words) while it is QUEUED."""
        run_state = self._experiment_run_state(row)
        reason = self._experiment_wait_reason_of(row.id) if run_state == "QUEUED" else None
        return {"run_state": run_state, "wait_reason": reason}

    def get_experiment(self, exp_id: int, *, with_config: bool = True) -> dict:
        """One experiment as API JSON."""
        return self._experiment_json(self.experiment_row(exp_id), with_config=with_config)

    def get_experiment_config(self, exp_id: int) -> dict:
        """The experiment's expanded config, its secrets redacted (`_secrets.py`)."""
        return redact_config(self.experiment_row(exp_id).config)  # secrets never leave

    def best_validation(self, exp_id: int) -> float | None:
        """The best searcher metric any trial of the experiment validated."""
        return self._best_validation(self.experiment_row(exp_id))

    def _best_validation(self, experiment: ExperimentRow) -> float | None:
        if not (experiment.config.get("searcher") or {}).get("metric"):
            return None
        rows = self._shared.store.metrics.best_validations(experiment.id)
        return self._best_of(experiment.config, [r["metrics"] for r in rows])

    @staticmethod
    def _best_of(config: dict, best_metrics: list[dict]) -> float | None:
        """The best searcher metric among the trials' best validation `metrics`."""
        searcher_config = config.get("searcher") or {}
        metric_name = searcher_config.get("metric")
        if not metric_name:
            return None
        values = [
            v
            for v in (
                _metric_format.comparable_metric_value(metrics, metric_name)
                for metrics in best_metrics
            )
            if v is not None
        ]
        if not values:
            return None
        return min(values) if searcher_config.get("smaller_is_better", True) else max(values)

    # -- trials -------------------------------------------------------------------------------
    def _metric_name(self, exp_id: int) -> str | None:
        config = self.experiment_row(exp_id).config
        return (config.get("searcher") or {}).get("metric")

    def _trials_json(
        self,
        *,
        experiment_id: int | None = None,
        trial_ids: list[int] | None = None,
        metric_name: str | None,
        order: str = "id",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict]:
        """Trials with their latest/best metric summaries: one query for all of them
        (bench_api_read_latency.py: per-trial queries and per-row decoding made 1,000 trials
        take hundreds of milliseconds)."""
        trials = []
        for row, (
            hparams,
            latest_training,
            latest_validation,
            best_validation,
            start_time,
            end_time,
            notebook_error,
        ) in self._shared.store.trials.rows_with_summaries(
            experiment_id=experiment_id,
            trial_ids=trial_ids,
            order=order,
            limit=limit,
            offset=offset,
        ):
            row["hparams"] = hparams
            row["notebook_error"] = notebook_error
            # Only a failed run keeps its kernel: the one runner call per ERROR trial.
            row["kernel_kept"] = row["state"] == "ERROR" and self._kernel_kept(
                row["id"], row["run_id"]
            )
            trials.append(
                _serialize.trial_json_from_summaries(
                    row,
                    allocation=self._allocation_of(row["id"]),
                    latest_training=latest_training,
                    latest_validation=latest_validation,
                    best_validation=best_validation,
                    searcher_metric=_metric_format.metric_value(
                        latest_validation["metrics"] if latest_validation else None, metric_name
                    ),
                    start_time=start_time,
                    end_time=end_time,
                    wait_reason=self._wait_reason_of(row["id"]),
                )
            )
        return trials

    def list_trials(self, exp_id: int) -> list[dict]:
        """Every trial of the experiment, as API JSON."""
        metric_name = self._metric_name(exp_id)  # NotFound for an unknown experiment
        return self._trials_json(experiment_id=int(exp_id), metric_name=metric_name)

    def trials_page(
        self, exp_id: int, *, limit: int | None = None, offset: int = 0, order_by: str = "id"
    ) -> dict:
        """`{trials, total}`: the trials of an experiment from `offset` on, at most `limit`, in
        `order_by` order: "id", "-id", or "best" (best searcher metric first, by the
        experiment's smaller_is_better; trials without a validation last, then by id)."""
        experiment = self.experiment_row(exp_id)
        searcher = experiment.config.get("searcher") or {}
        metric_name = searcher.get("metric")
        if order_by not in (*TRIAL_ORDERS, "best"):
            message = f"order_by: {order_by!r} is not one of {', '.join((*TRIAL_ORDERS, 'best'))}"
            raise errors.InvalidRequest(message, [message])
        store = self._shared.store
        total = store.trials.count(int(exp_id))
        if order_by != "best":
            trials = self._trials_json(
                experiment_id=int(exp_id),
                metric_name=metric_name,
                order=order_by,
                limit=limit,
                offset=offset,
            )
            return {"trials": trials, "total": total}
        # The best value sits in stored JSON that SQLite's JSON functions may reject (NaN):
        # order in Python on the best reports alone, then build only the page's trials.
        sign = 1.0 if searcher.get("smaller_is_better", True) else -1.0

        def best_first(item: tuple[int, str | None]) -> tuple:
            trial_id, metrics = item
            # NaN/Infinity (a diverged run): no order, as no value.
            value = _metric_format.comparable_metric_value(
                json.loads(metrics) if metrics else None, metric_name
            )
            return (value is None, 0.0 if value is None else sign * value, trial_id)

        ordered = sorted(store.trials.best_validation_metrics(exp_id), key=best_first)
        end = None if limit is None else offset + limit
        page = [trial_id for trial_id, _ in ordered[offset:end]]
        position = {trial_id: index for index, trial_id in enumerate(page)}
        trials = []
        for start in range(0, len(page), 500):
            chunk = page[start : start + 500]
            trials += self._trials_json(trial_ids=chunk, metric_name=metric_name)
        return {"trials": sorted(trials, key=lambda trial: position[trial["id"]]), "total": total}

    def get_trial(self, trial_id: int) -> dict:
        """One trial as API JSON."""
        row = self.trial_row(trial_id)
        [trial] = self._trials_json(
            trial_ids=[row.id], metric_name=self._metric_name(row.experiment_id)
        )
        return trial

    def trial_notebook(self, trial_id: int) -> tuple[str, bytes]:
        """The executed notebook of a papermill notebook trial's latest run: (file name, bytes).

        `determined.exec.notebook` writes it next to the run dirs, `trials/<id>/<stem>.run-<n>.ipynb`.
        """
        self.trial_row(trial_id)
        trial_dir = self._shared.root_dir / "trials" / str(trial_id)
        notebooks = sorted(trial_dir.glob("*.ipynb"), key=lambda p: p.stat().st_mtime)
        if not notebooks:
            raise errors.NotFound(
                f"trial {trial_id} has no executed notebook "
                f"(only notebook entrypoints such as 'train.ipynb' have one)"
            )
        return notebooks[-1].name, notebooks[-1].read_bytes()

    # -- metric reads (answered by store._queries, which builds the JSON inside SQLite) -------
    def get_metrics(self, query: MetricsQuery) -> list[dict]:
        """`get_metrics_json` decoded: the list of metric reports."""
        return json.loads(self.get_metrics_json(query))

    def get_metrics_json(self, query: MetricsQuery) -> str:
        """The current metric reports `query` asks for, as the JSON text of the list (what the
        API sends); its trial or experiment must exist, its `trial_ids` be the experiment's."""
        if query.trial_id is not None:
            self.trial_row(query.trial_id)
        if query.experiment_id is not None:
            self.experiment_row(query.experiment_id)
            if query.trial_ids is not None:
                checked = self._trials_of_experiment(query.experiment_id, query.trial_ids)
                query = dataclasses.replace(query, trial_ids=tuple(checked))
        elif query.trial_ids is not None:
            raise errors.InvalidRequest("trial_ids: only with experiment_id")
        if query.max_datapoints is not None and query.max_datapoints < MIN_DATAPOINTS:
            message = (
                f"max_datapoints: must be at least {MIN_DATAPOINTS} (the first "
                f"and the last report), got {query.max_datapoints}"
            )
            raise errors.InvalidRequest(message, [message])
        return self._shared.store.metrics.reports_json(query)

    def _trials_of_experiment(self, exp_id: int, trial_ids: Sequence[int]) -> list[int]:
        """`trial_ids` without repeats, each checked to be a trial of experiment `exp_id`."""
        wanted = sorted({int(t) for t in trial_ids})
        found = self._shared.store.trials.ids_in_experiment(exp_id, wanted)
        missing = [t for t in wanted if t not in found]
        if missing:
            message = (
                f"trial_ids: {', '.join(map(str, missing))} "
                f"{'is not a trial' if len(missing) == 1 else 'are not trials'} of "
                f"experiment {exp_id} (GET /experiments/{exp_id}/trials lists them)"
            )
            raise errors.InvalidRequest(message, [message])
        return wanted

    # -- events -------------------------------------------------------------------------------
    def publish_experiment(self, exp_id: int) -> None:
        """Tell experiment subscribers its current JSON (skipped when nobody listens)."""
        if self._shared.events.has_subscribers("experiment"):
            self._shared.events.publish(
                "experiment", self.get_experiment(exp_id, with_config=False)
            )

    def publish_trial(self, trial_id: int) -> None:
        """Tell trial subscribers its current JSON (skipped when nobody listens)."""
        if self._shared.events.has_subscribers("trial"):
            self._shared.events.publish("trial", self.get_trial(trial_id))


__all__ = ["Views"]
