"""The Master facade: every use case the REST handlers need, as plain methods.

All methods run on the event loop thread (tornado's IOLoop is an asyncio loop). Returned dicts
are exactly the JSON objects of docs/rest-api.md.

Recovery after a master restart (`start`, see docs/fault-tolerance.md): allocations still marked
running in the store belong to the previous master. Their processes, if still alive, are found by
their session token and killed — we cannot re-attach to their pipes — and their trials are
resumed from their latest checkpoints, with the searcher restored from its snapshot. Every state
change commits in one transaction with the searcher events it causes, so the store is never
half-way through one. Work since the last checkpoint is redone; the redone metric reports
replace the earlier ones, so nothing acknowledged is lost or duplicated.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from determined.common import context as context_mod
from determined.common import expconf
from determined.common.states import (
    TERMINAL_EXPERIMENT_STATES,
    TERMINAL_TRIAL_STATES,
    CheckpointState,
    ExperimentState,
    TrialState,
)
from master_lite import _auth, _reports, _serialize, errors
from master_lite._events import EventBus
from master_lite._gc import CheckpointCollector
from master_lite._lifecycle import TrialLifecycle, searcher_module
from master_lite._logwriter import LogWriter
from master_lite._recovery import MasterRecovery
from master_lite._trial_reports import TrialReports
from master_lite.scheduler import (
    GPU,
    LocalRunner,
    PortAllocator,
    RayCluster,
    RayRunner,
    Runner,
    Scheduler,
    discover_gpus,
    fake_gpus,
)
from master_lite.store import MIN_DATAPOINTS, TRIAL_ORDERS, Store

EXPERIMENT_ACTIONS = ("pause", "activate", "cancel", "kill", "archive", "unarchive")


class Master(TrialReports, TrialLifecycle, MasterRecovery):
    def __init__(
        self,
        root_dir: str | os.PathLike,
        *,
        cpu_slots: int = 2,
        gpus: list[GPU] | int | None = None,
        context_size_limit: int = context_mod.DEFAULT_LIMIT_BYTES,
        resource_manager: str = "local",
        user_token: str | None = None,
        preemption_grace_seconds: float = 30.0,
        terminate_grace_seconds: float = 10.0,
        cluster_id: str = "master-lite",
        ray_address: str | None = None,
        runner_class: type[Runner] | None = None,
    ) -> None:
        if resource_manager not in ("local", "ray"):
            raise ValueError(
                f"resource_manager: expected 'local' or 'ray', got {resource_manager!r}"
            )
        self.resource_manager = resource_manager
        # A runner of the deployment's own (containers, kernels) instead of the built-in one
        # `resource_manager` names: constructed with log_sink= and on_exit= by start().
        self.runner_class = runner_class
        self.root_dir = Path(root_dir).absolute()
        self.user_token = user_token or _auth.new_user_token()
        self.context_size_limit = context_size_limit
        self.preemption_grace_seconds = preemption_grace_seconds
        self.terminate_grace_seconds = terminate_grace_seconds
        self.cluster_id = cluster_id
        self.ray_cluster = None
        if resource_manager == "ray":
            # Ray places runs on its nodes' GPUs; the scheduler only counts the cluster's slots.
            self.ray_cluster = RayCluster.connect(ray_address)
            ray_slots = self.ray_cluster.slots()
            gpus = []
            cpu_slots = ray_slots.count
        elif gpus is None:
            gpus = discover_gpus()
        elif isinstance(gpus, int):
            gpus = fake_gpus(gpus)
        self.gpus: list[GPU] = list(gpus)
        slot_ids = [g.index for g in self.gpus] if self.gpus else list(range(cpu_slots))
        self.scheduler = Scheduler(slot_ids)
        self.ports = PortAllocator()
        self.events = EventBus(experiment_of_trial=self._experiment_of_trial)
        self.master_url = ""
        self.store: Store = None  # type: ignore[assignment]  # opened by start()
        self.runner: Runner = None  # type: ignore[assignment]  # made by start()
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._searchers: dict[int, Any] = {}
        self._allocations: dict[str, dict] = {}
        self._trial_allocation: dict[int, str] = {}
        self._changed: dict[tuple, asyncio.Event] = {}
        self._grace_timers: dict[str, asyncio.TimerHandle] = {}
        self._stopping = False
        self._closed = True
        self._atomic_depth = 0
        self._scheduling_deferred = False

    def _experiment_of_trial(self, trial_id: int) -> int | None:
        if self.store is None:
            return None
        return self.store.trials.experiment_of(trial_id)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, master_url: str) -> None:
        # jsonschema takes seconds to import on a busy machine; import it beside the start, not
        # inside the first request that validates a body (a user's first submission).
        threading.Thread(
            target=expconf.prepare_validator, name="prepare-validators", daemon=True
        ).start()
        self.master_url = master_url.rstrip("/")
        self._loop = asyncio.get_running_loop()
        self.events.attach(self._loop)
        for sub in ("contexts", "trials", "checkpoints"):
            (self.root_dir / sub).mkdir(parents=True, exist_ok=True)
        self.store = Store(self.root_dir / "master.db")
        self.checkpoint_gc = CheckpointCollector(self.store, on_deleted=self._checkpoint_deleted)
        self._log_writer = LogWriter(self._store_logs)
        # Exits arrive on a waiter thread; they go through the log writer so that they reach
        # the loop only after the run's last lines are stored.
        if self.runner_class is not None:
            self.runner = self.runner_class(
                log_sink=self._log_writer.submit, on_exit=self._exit_observed
            )
        elif self.ray_cluster is not None:
            self.runner = RayRunner(
                self.ray_cluster,
                log_sink=self._log_writer.submit,
                on_exit=self._exit_observed,
                use_gpus=self.ray_cluster.slots().kind == "gpu",
            )
        else:
            self.runner = LocalRunner(log_sink=self._log_writer.submit, on_exit=self._exit_observed)
        self._closed = False
        self._stopping = False
        self._recover()

    async def stop(self, pause_running: bool = True) -> None:
        """Preempt every run (they checkpoint and exit as PAUSED) and close the store."""
        if self._closed:
            return
        self._stopping = True
        for allocation_id in list(self._allocations):
            if pause_running:
                self._preempt(allocation_id, "master-stop")
            else:
                self._kill_allocation(
                    allocation_id, "master-stop", "killed by the master (it was shutting down)"
                )
        deadline = (
            self._loop.time() + self.preemption_grace_seconds + self.terminate_grace_seconds + 5
        )
        while self._allocations and self._loop.time() < deadline:
            await asyncio.sleep(0.05)
        for allocation_id in list(self._allocations):  # still there: out of patience
            self._kill_allocation(
                allocation_id,
                "master-stop",
                "killed by the master (it was shutting down, and the run "
                "did not exit after the preemption signal)",
            )
        while self._allocations and self._loop.time() < deadline + 5:
            await asyncio.sleep(0.05)
        for timer in self._grace_timers.values():
            timer.cancel()
        self._grace_timers.clear()
        self.runner.close()  # e.g. the local runner's pre-started interpreters
        self._log_writer.close()
        self._closed = True
        self.store.close()

    # -- authentication -----------------------------------------------------------------------
    def authenticate(self, token: str | None) -> _auth.Principal | None:
        if not token:
            return None
        if _auth.tokens_equal(token, self.user_token):
            return _auth.UserPrincipal()
        row = self.store.get("trial_tokens", _auth.hash_token(token), key_column="token_hash")
        if row is None:
            return None
        trial = self.store.get("trials", row["trial_id"])
        if trial is None:  # a token outlives its trial only until the trial's row is gone
            return None
        return _auth.TrialPrincipal(
            trial_id=row["trial_id"],
            experiment_id=trial["experiment_id"],
            allocation_id=row["allocation_id"],
        )

    # -- experiments --------------------------------------------------------------------------
    def create_experiment(
        self,
        config: dict | str,
        context: bytes | None,
        *,
        activate: bool = True,
        archived: bool = False,
        notebook: dict | None = None,
        parent_id: int | None = None,
    ) -> dict:
        if isinstance(config, str):
            original_text = config
            try:
                config = expconf.load(config, source="config")
            except expconf.InvalidConfig as exc:
                raise errors.InvalidRequest(
                    f"invalid experiment config: {exc}", list(exc.errors)
                ) from exc
            except ValueError as exc:
                raise errors.InvalidRequest(f"invalid experiment config: {exc}") from exc
        elif isinstance(config, dict):
            original_text = json.dumps(config)
        else:
            raise errors.InvalidRequest("config: expected a YAML/JSON string or an object")
        try:
            expconf.check(config)
        except expconf.InvalidConfig as exc:
            problems = list(exc.errors)
            raise errors.InvalidRequest(
                f"invalid experiment config: {len(problems)} error(s): " + "; ".join(problems),
                problems,
            ) from exc
        expanded = expconf.apply_defaults(
            config,
            default_checkpoint_storage={
                "type": "shared_fs",
                "host_path": str(self.root_dir / "checkpoints"),
                "storage_path": ".",
            },
        )
        context_hash = None
        if context is not None:
            context_hash = self._verify_context(context, context_mod)
        module = searcher_module()
        try:
            searcher = module.make_searcher(expanded)
        except ValueError as exc:
            raise errors.InvalidRequest(f"searcher: {exc}", [f"searcher: {exc}"]) from exc
        warm_start = self._warm_start_checkpoint(expanded.get("searcher") or {})
        if context_hash is not None and context is not None:
            self._save_context(context_hash, context)
        state = ExperimentState.ACTIVE if activate else ExperimentState.PAUSED
        # The experiment, its first trials and the searcher's snapshot appear together.
        with self._atomic():
            exp_id = self.store.insert(
                "experiments",
                name=str(expanded.get("name") or "Experiment"),
                description=expanded.get("description") or "",
                labels=list(expanded.get("labels") or []),
                state=str(state),
                archived=int(bool(archived)),
                config=expanded,
                original_config=original_text,
                context_hash=context_hash,
                notebook=notebook,
                parent_id=parent_id,
                start_time=time.time(),
                warm_start_checkpoint=warm_start,
            )
            self._searchers[exp_id] = searcher
            self._publish_experiment(exp_id)
            self._searcher_event(exp_id, "initial_operations")
            self._save_searcher(exp_id)
        return self.get_experiment(exp_id, with_config=False)

    def _warm_start_checkpoint(self, searcher_config: dict) -> str | None:
        """The checkpoint every trial of a new experiment starts from, checked now: a source
        that does not exist is an error at creation, naming the field."""
        uuid = searcher_config.get("source_checkpoint_uuid")
        trial_id = searcher_config.get("source_trial_id")
        if uuid is not None and trial_id is not None:
            message = (
                "searcher.source_trial_id and searcher.source_checkpoint_uuid: set at "
                "most one (the warm start comes from one checkpoint)"
            )
            raise errors.InvalidRequest(message, [message])
        if uuid is not None:
            row = self.store.get("checkpoints", str(uuid), key_column="uuid")
            if row is None or row["state"] != CheckpointState.COMPLETED:
                why = "does not exist" if row is None else f"is {row['state']}"
                message = (
                    f"searcher.source_checkpoint_uuid: checkpoint {uuid} {why} "
                    "(pick one from `det checkpoint list`)"
                )
                raise errors.InvalidRequest(message, [message])
            return str(uuid)
        if trial_id is not None:
            trial = self.store.get("trials", int(trial_id))
            if trial is None:
                message = f"searcher.source_trial_id: trial {trial_id} does not exist"
                raise errors.InvalidRequest(message, [message])
            latest = trial["latest_checkpoint"]
            row = self.store.get("checkpoints", latest, key_column="uuid") if latest else None
            if (
                row is None
                or row["trial_id"] != trial["id"]
                or row["state"] != CheckpointState.COMPLETED
            ):
                message = (
                    f"searcher.source_trial_id: trial {trial_id} has no checkpoint to "
                    "start from (it never reported one, or it was deleted)"
                )
                raise errors.InvalidRequest(message, [message])
            return str(latest)
        return None

    def _verify_context(self, data: bytes, context_mod: Any) -> str:
        if len(data) > self.context_size_limit:
            raise errors.TooLarge(
                f"context is {len(data)} bytes, over the limit of {self.context_size_limit} "
                "bytes: list large files in .detignore or raise the master's context size limit"
            )
        with tempfile.TemporaryDirectory(prefix="context-check-") as scratch:
            try:
                context_mod.unpack(data, scratch, limit_bytes=self.context_size_limit)
            except context_mod.ContextTooLarge as exc:
                raise errors.TooLarge(f"context: {exc}") from exc
            except context_mod.ContextError as exc:
                raise errors.InvalidRequest(f"context: {exc}", [f"context: {exc}"]) from exc
        return context_mod.content_hash(data)

    def _save_context(self, context_hash: str, data: bytes) -> None:
        path = self.root_dir / "contexts" / f"{context_hash}.tar.gz"
        if not path.exists():
            partial = path.with_suffix(".partial")
            partial.write_bytes(data)
            os.replace(partial, path)
        self.store.contexts.add(context_hash, str(path), len(data))

    def _read_context(self, context_hash: str) -> bytes:
        row = self.store.get("contexts", context_hash, key_column="hash")
        if row is None:
            raise errors.NotFound(f"context {context_hash} not found")
        return Path(row["path"]).read_bytes()

    def _experiment_row(self, exp_id: int) -> dict:
        row = self.store.get("experiments", int(exp_id))
        if row is None:
            raise errors.NotFound(f"experiment {exp_id} not found")
        return row

    def _experiment_json(self, row: dict, *, with_config: bool) -> dict:
        num_trials = self.store.trials.count(row["id"])
        return _serialize.experiment_json(
            row,
            num_trials=num_trials,
            best_validation=self._best_validation(row),
            with_config=with_config,
        )

    def list_experiments(
        self, *, state: str | None = None, name: str | None = None, archived: bool | None = None
    ) -> list[dict]:
        rows = self.store.experiments.matching(state=state, name=name, archived=archived)
        return [self._experiment_json(row, with_config=False) for row in rows]

    def get_experiment(self, exp_id: int, *, with_config: bool = True) -> dict:
        return self._experiment_json(self._experiment_row(exp_id), with_config=with_config)

    def get_experiment_config(self, exp_id: int) -> dict:
        return self._experiment_row(exp_id)["config"]

    def get_experiment_context(self, exp_id: int) -> bytes:
        row = self._experiment_row(exp_id)
        if not row["context_hash"]:
            raise errors.NotFound(f"experiment {exp_id} has no context")
        return self._read_context(row["context_hash"])

    def experiment_action(self, exp_id: int, action: str) -> dict:
        if action not in EXPERIMENT_ACTIONS:
            raise errors.InvalidRequest(
                f"unknown experiment action {action!r}; expected one of "
                f"{', '.join(EXPERIMENT_ACTIONS)}"
            )
        experiment = self._experiment_row(exp_id)
        state = ExperimentState(experiment["state"])
        terminal = state in TERMINAL_EXPERIMENT_STATES
        if action in ("archive", "unarchive"):
            if not terminal:
                raise errors.Conflict(
                    f"experiment {exp_id} is {state}: only finished experiments "
                    f"can be {action}d (cancel it first)"
                )
            self.store.update("experiments", exp_id, archived=int(action == "archive"))
            self._publish_experiment(exp_id)
        elif (
            terminal
            or state in (ExperimentState.STOPPING_CANCELED, ExperimentState.STOPPING_ERROR)
            and action != "kill"
        ):
            if not (action == "cancel" and state == ExperimentState.STOPPING_CANCELED):
                raise errors.Conflict(f"cannot {action} experiment {exp_id}: it is {state}")
        elif action == "pause":
            if state == ExperimentState.ACTIVE:
                with self._atomic():
                    self._pause_experiment(exp_id)
        elif action == "activate":
            if state == ExperimentState.PAUSED:
                with self._atomic():
                    self._activate_experiment(exp_id)
        elif action in ("cancel", "kill"):
            with self._atomic():
                self._stop_experiment(exp_id, kill=(action == "kill"))
        return self.get_experiment(exp_id, with_config=False)

    def _live_trials(self, exp_id: int) -> list[dict]:
        return [
            t
            for t in self.store.trials.of_experiment(exp_id)
            if t["state"] not in TERMINAL_TRIAL_STATES
        ]

    def _pause_experiment(self, exp_id: int) -> None:
        self._set_experiment_state(exp_id, ExperimentState.PAUSED)
        for trial in self._live_trials(exp_id):
            allocation_id = self._trial_allocation.get(trial["id"])
            if allocation_id is not None:
                self._preempt(allocation_id, "pause")
            else:
                self.scheduler.cancel(f"trial-{trial['id']}")
                self.store.update("trials", trial["id"], state=str(TrialState.PAUSED))
                self._publish_trial(trial["id"])
        self._run_scheduler()

    def _activate_experiment(self, exp_id: int) -> None:
        self._set_experiment_state(exp_id, ExperimentState.ACTIVE)
        for trial in self._live_trials(exp_id):
            if trial["id"] in self._trial_allocation:
                continue  # still draining after the pause: it is requeued when it exits
            if trial["state"] == TrialState.PAUSED:
                self.store.update("trials", trial["id"], state=str(TrialState.ACTIVE))
                self._publish_trial(trial["id"])
            self._schedule_trial(trial["id"])

    def _stop_experiment(self, exp_id: int, *, kill: bool) -> None:
        self._set_experiment_state(exp_id, ExperimentState.STOPPING_CANCELED)
        for trial in self._live_trials(exp_id):
            allocation_id = self._trial_allocation.get(trial["id"])
            if allocation_id is None:
                self.scheduler.cancel(f"trial-{trial['id']}")
                self._end_trial(trial, TrialState.CANCELED, None)
                continue
            stopping = TrialState.STOPPING_KILLED if kill else TrialState.STOPPING_CANCELED
            self.store.update("trials", trial["id"], state=str(stopping))
            self._publish_trial(trial["id"])
            if kill:
                self._kill_allocation(
                    allocation_id, "kill", f"killed by the user (experiment {exp_id} kill)"
                )
            else:
                self._preempt(allocation_id, "cancel")
        self._maybe_finish_experiment(exp_id)
        self._run_scheduler()

    # -- trials -------------------------------------------------------------------------------
    def _trial_row(self, trial_id: int) -> dict:
        row = self.store.get("trials", int(trial_id))
        if row is None:
            raise errors.NotFound(f"trial {trial_id} not found")
        return row

    def _metric_name(self, exp_id: int) -> str | None:
        config = self._experiment_row(exp_id)["config"]
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
        ) in self.store.trials.rows_with_summaries(
            experiment_id=experiment_id,
            trial_ids=trial_ids,
            order=order,
            limit=limit,
            offset=offset,
        ):
            row["hparams"] = hparams
            row["notebook_error"] = notebook_error
            allocation_id = self._trial_allocation.get(row["id"])
            trials.append(
                _serialize.trial_json_from_summaries(
                    row,
                    allocation=self._allocations.get(allocation_id) if allocation_id else None,
                    latest_training=latest_training,
                    latest_validation=latest_validation,
                    best_validation=best_validation,
                    searcher_metric=_reports.metric_value(
                        latest_validation["metrics"] if latest_validation else None, metric_name
                    ),
                    start_time=start_time,
                    end_time=end_time,
                )
            )
        return trials

    def _trial_json(self, row: dict) -> dict:
        [trial] = self._trials_json(
            trial_ids=[row["id"]], metric_name=self._metric_name(row["experiment_id"])
        )
        return trial

    def list_trials(self, exp_id: int) -> list[dict]:
        metric_name = self._metric_name(exp_id)  # NotFound for an unknown experiment
        return self._trials_json(experiment_id=int(exp_id), metric_name=metric_name)

    def trials_page(
        self, exp_id: int, *, limit: int | None = None, offset: int = 0, order_by: str = "id"
    ) -> dict:
        """`{trials, total}`: the trials of an experiment from `offset` on, at most `limit`, in
        `order_by` order: "id", "-id", or "best" (best searcher metric first, by the
        experiment's smaller_is_better; trials without a validation last, then by id)."""
        experiment = self._experiment_row(exp_id)
        searcher = experiment["config"].get("searcher") or {}
        metric_name = searcher.get("metric")
        if order_by not in (*TRIAL_ORDERS, "best"):
            message = f"order_by: {order_by!r} is not one of {', '.join((*TRIAL_ORDERS, 'best'))}"
            raise errors.InvalidRequest(message, [message])
        total = self.store.trials.count(int(exp_id))
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
            value = _reports.metric_value(json.loads(metrics) if metrics else None, metric_name)
            if value is not None and value != value:  # NaN: no order, as no value
                value = None
            return (value is None, 0.0 if value is None else sign * value, trial_id)

        ordered = sorted(self.store.trials.best_validation_metrics(exp_id), key=best_first)
        end = None if limit is None else offset + limit
        page = [trial_id for trial_id, _ in ordered[offset:end]]
        position = {trial_id: index for index, trial_id in enumerate(page)}
        trials = []
        for start in range(0, len(page), 500):
            chunk = page[start : start + 500]
            trials += self._trials_json(trial_ids=chunk, metric_name=metric_name)
        return {"trials": sorted(trials, key=lambda trial: position[trial["id"]]), "total": total}

    def get_trial(self, trial_id: int) -> dict:
        return self._trial_json(self._trial_row(trial_id))

    # -- metric reads -------------------------------------------------------------------------
    # Answered by store._queries, which builds the reports' JSON inside SQLite.
    def get_metrics(
        self,
        *,
        trial_id: int | None = None,
        experiment_id: int | None = None,
        group: str | None = None,
        after_id: int = 0,
        limit: int | None = None,
        trial_ids: list[int] | None = None,
        max_datapoints: int | None = None,
    ) -> list[dict]:
        """Current metric reports in id order: of a trial, or of an experiment's trials (only
        `trial_ids` of them when given), of one `group`, after `after_id`; downsampled per
        (trial, group) to `max_datapoints` (store/_queries.py says which are kept); at most
        `limit`."""
        return json.loads(
            self.get_metrics_json(
                trial_id=trial_id,
                experiment_id=experiment_id,
                group=group,
                after_id=after_id,
                limit=limit,
                trial_ids=trial_ids,
                max_datapoints=max_datapoints,
            )
        )

    def get_metrics_json(
        self,
        *,
        trial_id: int | None = None,
        experiment_id: int | None = None,
        group: str | None = None,
        after_id: int = 0,
        limit: int | None = None,
        trial_ids: list[int] | None = None,
        max_datapoints: int | None = None,
    ) -> str:
        """`get_metrics` as the JSON text of the list (what the API sends)."""
        if trial_id is not None:
            self._trial_row(trial_id)
        if experiment_id is not None:
            self._experiment_row(experiment_id)
            if trial_ids is not None:
                trial_ids = self._trials_of_experiment(experiment_id, trial_ids)
        elif trial_ids is not None:
            raise errors.InvalidRequest("trial_ids: only with experiment_id")
        if max_datapoints is not None and max_datapoints < MIN_DATAPOINTS:
            message = (
                f"max_datapoints: must be at least {MIN_DATAPOINTS} (the first "
                f"and the last report), got {max_datapoints}"
            )
            raise errors.InvalidRequest(message, [message])
        return self.store.metrics.reports_json(
            after_id=after_id,
            trial_id=trial_id,
            experiment_id=experiment_id,
            trial_ids=trial_ids,
            group=group,
            limit=limit,
            max_datapoints=max_datapoints,
        )

    def _trials_of_experiment(self, exp_id: int, trial_ids: list[int]) -> list[int]:
        """`trial_ids` without repeats, each checked to be a trial of experiment `exp_id`."""
        wanted = sorted({int(t) for t in trial_ids})
        found = self.store.trials.ids_in_experiment(exp_id, wanted)
        missing = [t for t in wanted if t not in found]
        if missing:
            message = (
                f"trial_ids: {', '.join(map(str, missing))} "
                f"{'is not a trial' if len(missing) == 1 else 'are not trials'} of "
                f"experiment {exp_id} (GET /experiments/{exp_id}/trials lists them)"
            )
            raise errors.InvalidRequest(message, [message])
        return wanted

    def trial_notebook(self, trial_id: int) -> tuple[str, bytes]:
        """The executed notebook of a papermill notebook trial's latest run: (file name, bytes).

        `determined.exec.notebook` writes it next to the run dirs, `trials/<id>/<stem>.run-<n>.ipynb`.
        """
        self._trial_row(trial_id)
        trial_dir = self.root_dir / "trials" / str(trial_id)
        notebooks = sorted(trial_dir.glob("*.ipynb"), key=lambda p: p.stat().st_mtime)
        if not notebooks:
            raise errors.NotFound(
                f"trial {trial_id} has no executed notebook "
                f"(only notebook entrypoints such as 'train.ipynb' have one)"
            )
        return notebooks[-1].name, notebooks[-1].read_bytes()

    def kill_trial(self, trial_id: int) -> dict:
        trial = self._trial_row(trial_id)
        if trial["state"] in TERMINAL_TRIAL_STATES:
            return self._trial_json(trial)
        allocation_id = self._trial_allocation.get(trial["id"])
        if allocation_id is not None:
            self.store.update("trials", trial["id"], state=str(TrialState.STOPPING_KILLED))
            self._kill_allocation(
                allocation_id, "kill-trial", f"killed by the user (trial {trial_id} kill)"
            )
            return self.get_trial(trial_id)
        with self._atomic():  # the trial's end and the searcher's hearing of it, together
            self.scheduler.cancel(f"trial-{trial['id']}")
            self._end_trial(trial, TrialState.CANCELED, None)
            experiment = self._experiment_row(trial["experiment_id"])
            if experiment["state"] == ExperimentState.ACTIVE:
                reason = searcher_module().ExitedReason.USER_CANCELED
                self._searcher_event(
                    experiment["id"], "on_trial_exited_early", trial["request_id"], reason
                )
            self._maybe_finish_experiment(trial["experiment_id"])
        return self.get_trial(trial_id)

    # -- cluster ------------------------------------------------------------------------------
    def resources(self) -> dict:
        slot_owner: dict[int, dict] = {}
        for allocation in self._allocations.values():
            for slot in allocation["slot_ids"]:
                slot_owner[slot] = allocation
        by_index = {g.index: g for g in self.gpus}
        slots = []
        for slot in self.scheduler.slot_ids:
            gpu = by_index.get(slot)
            owner = slot_owner.get(slot)
            slots.append(
                {
                    "id": slot,
                    "type": "gpu" if gpu else "cpu",
                    "gpu": gpu.to_json() if gpu else None,
                    "allocation_id": owner["id"] if owner else None,
                    "trial_id": owner["trial_id"] if owner else None,
                }
            )
        return {"slots": slots, "gpus": [g.to_json() for g in self.gpus]}

    # -- events -------------------------------------------------------------------------------
    def _publish_experiment(self, exp_id: int) -> None:
        if self.events.has_subscribers("experiment"):
            self.events.publish("experiment", self.get_experiment(exp_id, with_config=False))

    def _publish_trial(self, trial_id: int) -> None:
        if self.events.has_subscribers("trial"):
            self.events.publish("trial", self.get_trial(trial_id))

    def _checkpoint_deleted(self, uuid: str) -> None:
        if self.events.has_subscribers("checkpoint"):
            self.events.publish("checkpoint", self.get_checkpoint(uuid))

    # -- checkpoint GC (master_lite._gc.CheckpointCollector) ---------------------------------
    def _collect_checkpoint_garbage(self) -> None:
        if not self._closed:
            self.checkpoint_gc.collect_pending()

    def collect_experiment_checkpoints(
        self, exp_id: int, *, in_use: set[str] | None = None
    ) -> list[str]:
        """Delete the checkpoints of a finished experiment its GC policy does not keep."""
        return self.checkpoint_gc.collect_experiment_checkpoints(exp_id, in_use=in_use)


__all__ = ["Master"]
