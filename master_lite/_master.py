"""The Master facade: every use case the REST handlers need, as plain methods.

All methods run on the event loop thread (tornado's IOLoop is an asyncio loop). Returned dicts
are exactly the JSON objects of docs/rest-api.md.

The work is done by parts that each own their state (`master_lite/_parts/`, and the checkpoint
GC in `_gc.py`); this class builds them, wires them together, starts and stops them, and
delegates each public method to the part that owns it. Recovery after a master restart is the
recovery part's (docs/fault-tolerance.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from pathlib import Path
from typing import Any

from determined.common import context as context_mod
from determined.common import expconf
from master_lite import _auth
from master_lite._events import EventBus
from master_lite._gc import CheckpointCollector
from master_lite._logwriter import LogWriter
from master_lite._parts import (
    EXPERIMENT_ACTIONS,
    MasterState,
    RunSettings,
    authenticate,
    build_parts,
    trial_kernel,
)
from master_lite.runners import (
    ContainerRuntime,
    GatewayDefault,
    RayCluster,
    Runner,
    RunnerClasses,
    build_runner,
    default_runtime,
)
from master_lite.scheduler import GPU, Scheduler, discover_gpus, fake_gpus
from master_lite.store import Store


class Master:
    """The master: experiments, trials and their runs, over one root directory."""

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
        runner_classes: RunnerClasses | None = None,
        tensorboard_refresh_seconds: float = 5.0,
        container_runtime: str | None = None,
        kernel_gateway: GatewayDefault | None = None,
    ) -> None:
        if resource_manager not in ("local", "ray"):
            raise ValueError(
                f"resource_manager: expected 'local' or 'ray', got {resource_manager!r}"
            )
        self.resource_manager = resource_manager
        # The runner class of each kind (None: the built-in one); `runner_class`, the older
        # setting, replaces the process runner (a deprecated alias of runner_classes.process).
        classes = runner_classes or RunnerClasses()
        if runner_class is not None and classes.process is None:
            classes = dataclasses.replace(classes, process=runner_class)
        self.runner_classes = classes
        self.root_dir = Path(root_dir).absolute()
        # Runs experiments with environment.image (the local resource manager's runner).
        self.container_runtime = ContainerRuntime(
            container_runtime or default_runtime(), root_dir=self.root_dir
        )
        self.user_token = user_token or _auth.new_user_token()
        # The hosting Jupyter server (set by jupyter_determined before start()): its kernel
        # manager starts kernel trials' kernels, so JupyterLab lists them and can attach.
        self.jupyter_host: Any = None
        # The master's Jupyter Gateway for kernel experiments that name none (docs/kernels.md).
        self.kernel_gateway = kernel_gateway
        self.context_size_limit = context_size_limit
        self.preemption_grace_seconds = preemption_grace_seconds
        self.terminate_grace_seconds = terminate_grace_seconds
        self.cluster_id = cluster_id
        self.ray_cluster = None
        if resource_manager == "ray":
            # Ray places runs on its nodes' GPUs; the scheduler only counts the cluster's slots.
            self.ray_cluster = RayCluster.connect(ray_address)
            gpus = []
            cpu_slots = self.ray_cluster.slots().count
        elif gpus is None:
            gpus = discover_gpus()
        elif isinstance(gpus, int):
            gpus = fake_gpus(gpus)
        self.gpus: list[GPU] = list(gpus)
        slot_ids = [g.index for g in self.gpus] if self.gpus else list(range(cpu_slots))
        self.scheduler = Scheduler(slot_ids)
        self.events = EventBus(experiment_of_trial=self._experiment_of_trial)
        self.master_url = ""
        self.checkpoint_gc: CheckpointCollector = None  # type: ignore[assignment]  # start()
        self._log_writer: LogWriter | None = None
        self.shared = MasterState(self.root_dir, self.events)
        settings = RunSettings(
            cluster_id=cluster_id,
            preemption_grace_seconds=preemption_grace_seconds,
            terminate_grace_seconds=terminate_grace_seconds,
        )
        parts = build_parts(
            self.shared,
            scheduler=self.scheduler,
            gpus=self.gpus,
            settings=settings,
            context_size_limit=context_size_limit,
            collect_garbage=self._collect_checkpoint_garbage,
            delete_checkpoint_files=self._delete_checkpoint_files,
            tensorboard_refresh_seconds=tensorboard_refresh_seconds,
        )
        # The parts the public methods delegate to (and tests reach for by name).
        self.logs, self.views, self.searchers = parts.logs, parts.views, parts.searchers
        self.runs, self.experiments, self.reports = parts.runs, parts.experiments, parts.reports
        self.checkpoints, self.recovery = parts.checkpoints, parts.recovery
        self.edits = parts.edits
        # The model registry: the /models handlers call its methods (get_model, list_models,
        # register_version, ...) directly, one each, as they would a delegation of this class.
        self.models = parts.models
        self.unmanaged = parts.unmanaged
        # TensorBoards: the /tensorboards handlers and Jupyter's proxy call its methods (start,
        # list_all, get, kill, address) directly, as the /models handlers call `models`.
        self.tensorboards = parts.tensorboards

    @property
    def store(self) -> Store:
        """The master's SQLite store (opened by `start`)."""
        return self.shared.store

    @property
    def runner(self) -> Runner:
        """The runner that starts trial processes (made by `start`)."""
        return self.runs.runner

    def _experiment_of_trial(self, trial_id: int) -> int | None:
        if self.shared.store is None:
            return None
        return self.shared.store.trials.experiment_of(trial_id)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, master_url: str) -> None:
        """Open the store, recover what a previous master left, and start scheduling."""
        # jsonschema takes seconds to import on a busy machine; import it beside the start, not
        # inside the first request that validates a body (a user's first submission).
        threading.Thread(
            target=expconf.prepare_validator, name="prepare-validators", daemon=True
        ).start()
        self.master_url = master_url.rstrip("/")
        loop = asyncio.get_running_loop()
        self.events.attach(loop)
        for sub in ("contexts", "trials", "checkpoints"):
            (self.root_dir / sub).mkdir(parents=True, exist_ok=True)
        store = Store(self.root_dir / "master.db")
        self.checkpoint_gc = CheckpointCollector(store, on_deleted=self.checkpoints.publish_deleted)
        self._log_writer = log_writer = LogWriter(self.logs.store_logs)
        # Exits arrive on a waiter thread; they go through the log writer so that they reach
        # the loop only after the run's last lines are stored.
        runner = build_runner(
            self.runner_classes,
            ray_cluster=self.ray_cluster,
            log_sink=log_writer.submit,
            on_exit=self.runs.exit_observed,
            container_runtime=self.container_runtime,
            jupyter_host=self.jupyter_host,
            loop=loop,
            kernel_gateway=self.kernel_gateway,
        )
        self.runs.attach(runner, log_writer, self.master_url)
        self.shared.open(store, loop)
        self.tensorboards.remove_leftovers()  # of a master that was killed
        self.recovery.recover()
        self.unmanaged.start()
        self._collect_checkpoint_garbage()  # GCs cut short by the previous master's end

    async def stop(self, pause_running: bool = True) -> None:
        """Preempt every run (they checkpoint and exit as PAUSED) and close the store."""
        if self.shared.closed:
            return
        self.shared.stopping = True
        await self.tensorboards.stop_all()  # nothing of the master's outlives it
        self.unmanaged.stop()
        await self.runs.stop_all(pause_running=pause_running)
        self.runs.runner.close()  # e.g. the local runner's pre-started interpreters
        if self._log_writer is not None:
            self._log_writer.close()
        self.shared.closed = True
        self.shared.store.close()

    def _delete_checkpoint_files(self, uuid: str) -> None:
        self.checkpoint_gc.delete_checkpoint(uuid)

    def _collect_checkpoint_garbage(self) -> None:
        if not self.shared.closed:
            self.checkpoint_gc.collect_pending()

    # -- delegation: one line each, to the part that owns the use case -----------------------
    def authenticate(self, token: str | None) -> _auth.Principal | None:
        """The user or trial run that holds `token`, or None."""
        return authenticate(self.shared.store, token, user_token=self.user_token)

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
        """Create an experiment (see `Experiments.create_experiment`)."""
        return self.experiments.create_experiment(
            config,
            context,
            activate=activate,
            archived=archived,
            notebook=notebook,
            parent_id=parent_id,
        )

    def list_experiments(
        self, *, state: str | None = None, name: str | None = None, archived: bool | None = None
    ) -> list[dict]:
        """Experiments matching the filters."""
        return self.views.list_experiments(state=state, name=name, archived=archived)

    def get_experiment(self, exp_id: int, *, with_config: bool = True) -> dict:
        """One experiment."""
        return self.views.get_experiment(exp_id, with_config=with_config)

    def get_experiment_config(self, exp_id: int) -> dict:
        """The experiment's expanded config."""
        return self.views.get_experiment_config(exp_id)

    def get_experiment_context(self, exp_id: int) -> bytes:
        """The experiment's context tarball."""
        return self.experiments.get_experiment_context(exp_id)

    def experiment_action(self, exp_id: int, action: str) -> dict:
        """pause | activate | cancel | kill | archive | unarchive."""
        return self.experiments.experiment_action(exp_id, action)

    def patch_experiment(
        self,
        exp_id: int,
        *,
        name: str | None = None,
        description: str | None = None,
        labels: list[str] | None = None,
        resources: dict[str, Any] | None = None,
        notes: str | None = None,
    ) -> dict:
        """Change an experiment's name, description, notes, labels or scheduling resources."""
        return self.edits.patch_experiment(
            exp_id,
            name=name,
            description=description,
            labels=labels,
            resources=resources,
            notes=notes,
        )

    def delete_experiment(self, exp_id: int) -> dict:
        """Delete a finished experiment with its checkpoints' files, trials and logs."""
        return self.edits.delete_experiment(exp_id)

    def list_trials(self, exp_id: int) -> list[dict]:
        """Every trial of the experiment."""
        return self.views.list_trials(exp_id)

    def trials_page(
        self, exp_id: int, *, limit: int | None = None, offset: int = 0, order_by: str = "id"
    ) -> dict:
        """`{trials, total}`: one page of the experiment's trials (see `Views.trials_page`)."""
        return self.views.trials_page(exp_id, limit=limit, offset=offset, order_by=order_by)

    def get_trial(self, trial_id: int) -> dict:
        """One trial."""
        return self.views.get_trial(trial_id)

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
        """Current metric reports (see `Views.get_metrics_json`)."""
        return self.views.get_metrics(
            trial_id=trial_id,
            experiment_id=experiment_id,
            group=group,
            after_id=after_id,
            limit=limit,
            trial_ids=trial_ids,
            max_datapoints=max_datapoints,
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
        return self.views.get_metrics_json(
            trial_id=trial_id,
            experiment_id=experiment_id,
            group=group,
            after_id=after_id,
            limit=limit,
            trial_ids=trial_ids,
            max_datapoints=max_datapoints,
        )

    def trial_notebook(self, trial_id: int) -> tuple[str, bytes]:
        """The executed notebook of a notebook trial's latest run: (file name, bytes)."""
        return self.views.trial_notebook(trial_id)

    def kill_trial(self, trial_id: int) -> dict:
        """Kill one trial."""
        return self.experiments.kill_trial(trial_id)

    def trial_kernel(self, trial_id: int) -> dict:
        """How to attach to a kernel trial's kernel (running, or kept after a failure)."""
        return trial_kernel(self.views, self.runs.runner, trial_id)

    def resources(self) -> dict:
        """The slots and GPUs, and who holds them."""
        return self.runs.resources()

    def best_validation(self, exp_id: int) -> float | None:
        """The experiment's best searcher metric."""
        return self.views.best_validation(exp_id)

    def get_logs(
        self,
        trial_id: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        tail: int | None = None,
        rank: int | None = None,
        stream: str | None = None,
    ) -> list[dict]:
        """The trial's log lines after `after_id` (or its last `tail`), of a rank or stream."""
        return self.logs.get_logs(
            trial_id, after_id=after_id, limit=limit, tail=tail, rank=rank, stream=stream
        )

    def open_unmanaged_run(self, body: dict) -> dict:
        """Open or resume a run that trains in a kernel (see `UnmanagedRuns.open_run`)."""
        return self.unmanaged.open_run(body)

    def unmanaged_heartbeat(self, trial_id: int) -> dict:
        """Renew an unmanaged run's lease."""
        return self.unmanaged.heartbeat(trial_id)

    def unmanaged_logs(self, trial_id: int, lines: list[dict]) -> int:
        """Store log lines an unmanaged run captured; how many."""
        return self.unmanaged.append_logs(trial_id, lines)

    def close_unmanaged_run(self, trial_id: int, state: str, message: str | None = None) -> dict:
        """End an unmanaged run (COMPLETED, CANCELED or ERROR); the trial's JSON."""
        return self.unmanaged.close_run(trial_id, state, message)

    def report_metrics(self, trial_id: int, reports: list[dict]) -> int:
        """Store a run's metric reports; returns how many were accepted."""
        return self.reports.report_metrics(trial_id, reports)

    def report_progress(self, trial_id: int, progress: float) -> None:
        """The trial's progress, 0..1."""
        return self.reports.report_progress(trial_id, progress)

    def set_runner_state(self, trial_id: int, state: str) -> None:
        """What the trial's run says it is doing."""
        return self.reports.set_runner_state(trial_id, state)

    def report_early_exit(self, trial_id: int, reason: str) -> None:
        """The run exits early (invalid hyperparameters, or a user's stop)."""
        return self.reports.report_early_exit(trial_id, reason)

    async def next_operation(self, trial_id: int, timeout: float) -> dict:
        """The trial's current searcher operation, or `{completed: true}`."""
        return await self.reports.next_operation(trial_id, timeout)

    def complete_operation(self, trial_id: int, length: int, metric: Any) -> None:
        """The run finished an operation with this searcher metric."""
        return self.reports.complete_operation(trial_id, length, metric)

    async def wait_preemption(self, allocation_id: str, timeout: float) -> bool:
        """True once the run should exit; False after `timeout`."""
        return await self.runs.wait_preemption(allocation_id, timeout)

    def ack_preemption(self, allocation_id: str) -> None:
        """The run heard it must exit."""
        return self.runs.ack_preemption(allocation_id)

    def report_checkpoint(self, record: dict) -> dict:
        """Record a checkpoint a run saved; its JSON."""
        return self.checkpoints.report_checkpoint(record)

    def get_checkpoint(self, uuid: str) -> dict:
        """One checkpoint."""
        return self.checkpoints.get_checkpoint(uuid)

    def list_checkpoints(
        self,
        *,
        experiment_id: int | None = None,
        trial_id: int | None = None,
        state: str | None = None,
    ) -> list[dict]:
        """Checkpoints of an experiment or trial, in a state."""
        return self.checkpoints.list_checkpoints(
            experiment_id=experiment_id, trial_id=trial_id, state=state
        )

    def checkpoint_snippet(self, uuid: str) -> dict:
        """The "Use in notebook" cell of a checkpoint: `{kind, code}`."""
        return self.checkpoints.checkpoint_snippet(uuid)

    def checkpoint_archive(self, uuid: str) -> bytes:
        """The checkpoint's files as a tar.gz."""
        return self.checkpoints.checkpoint_archive(uuid)

    def set_checkpoint_metadata(self, uuid: str, metadata: dict) -> dict:
        """Replace a checkpoint's metadata (the files in storage keep theirs)."""
        return self.checkpoints.set_checkpoint_metadata(uuid, metadata)

    def mark_checkpoints_deleted(self, items: list[dict]) -> None:
        """Mark checkpoints deleted (whoever deleted their files says so)."""
        return self.checkpoints.mark_checkpoints_deleted(items)

    def delete_checkpoint(self, uuid: str) -> dict:
        """A user's deletion of a checkpoint's files (Conflict when a live trial needs it);
        the checkpoint after it (DELETED)."""
        self.checkpoint_gc.delete_checkpoint(uuid)
        return self.checkpoints.get_checkpoint(uuid)

    def collect_experiment_checkpoints(
        self, exp_id: int, *, in_use: set[str] | None = None
    ) -> list[str]:
        """Delete the checkpoints of a finished experiment its GC policy does not keep."""
        return self.checkpoint_gc.collect_experiment_checkpoints(exp_id, in_use=in_use)


__all__ = ["EXPERIMENT_ACTIONS", "Master"]
