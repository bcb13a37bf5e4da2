"""The Master: builds and wires the parts, starts and stops them; the REST handlers call its
typed parts (`master.views.get_trial(id)`, `master.experiments.experiment_action(id, a)`).

All methods run on the event loop thread (tornado's IOLoop is an asyncio loop); the API's
heavy reads run the views' methods in the store's read pool through `read`. Returned dicts
are exactly the JSON objects of docs/rest-api.md.

The work is done by parts that each own their state (one package per part: experiments/,
runs/, reports/, checkpoints/, models/, tensorboards/, unmanaged/); this class builds them,
wires them together, starts and stops them, and keeps only what needs more than one part
(authenticate, a user's checkpoint deletion, checkpoint GC). Recovery after a master
restart is the recovery part's (docs/fault-tolerance.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from determined.common import context as context_mod
from determined.common import expconf
from master_lite._core import MasterState, ReadPriority, Views, _auth
from master_lite._core._events import EventBus
from master_lite._master._wiring import build_parts
from master_lite.checkpoints import (
    CheckpointCollector,
    Checkpoints,
    PartialCheckpoints,
    storage_roots,
)
from master_lite.experiments import EXPERIMENT_ACTIONS, ExperimentEdits, Experiments, Forks
from master_lite.models import Models
from master_lite.reports import LogWriter, Reports, TrialLogs
from master_lite.runners import (
    ContainerRuntime,
    GatewayDefault,
    RayConnection,
    Runner,
    RunnerClasses,
    build_runner,
    default_runtime,
)
from master_lite.runs import (
    Runs,
    RunSettings,
    TrialAccounts,
    authenticate,
    check_reachable,
    open_root,
)
from master_lite.scheduler import (
    GPU,
    Policy,
    RayInventory,
    Scheduler,
    build_pools,
    discover_gpus,
    fake_gpus,
    pick_default,
    ray_pool_config,
)
from master_lite.store import Store
from master_lite.tensorboards import TensorBoards
from master_lite.unmanaged import UnmanagedRuns
from master_lite.users import SESSION_LIFETIME_HOURS, Users, check_read_access
from master_lite.workspaces import Workspaces

T = TypeVar("T")


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
        checkpoint_storage_roots: Sequence[str | os.PathLike] = (),
        determined_images_fallback: bool = True,
        run_trials_as: str = "master",
        fallback_unix_user: str = "",
        trial_python: str = "",
        read_access: str = "all",
        session_lifetime_hours: float = SESSION_LIFETIME_HOURS,
        scheduling: Policy | None = None,
        resource_pools: Sequence[Mapping[str, Any]] | None = None,
        default_resource_pool: str | None = None,
    ) -> None:
        check_read_access(read_access)  # a bad value stops the master before anything starts
        if resource_manager not in ("local", "ray"):
            raise ValueError(
                f"resource_manager: expected 'local' or 'ray', got {resource_manager!r}"
            )
        self._resource_manager = resource_manager
        # Which Unix account runs each trial (docs/team.md, "What runs as whom"): ValueError
        # when "owner" cannot work here (not root, a fallback account that does not exist).
        self._accounts = TrialAccounts(run_trials_as, fallback_unix_user, trial_python)
        self._accounts.check()
        if run_trials_as == "owner":
            check_reachable(Path(root_dir))
        # The runner class of each kind (None: the built-in one); `runner_class`, the older
        # setting, replaces the process runner (a deprecated alias of runner_classes.process).
        classes = runner_classes or RunnerClasses()
        if runner_class is not None and classes.process is None:
            classes = dataclasses.replace(classes, process=runner_class)
        self._runner_classes = classes
        self.root_dir = Path(root_dir).absolute()
        # Runs experiments with environment.image (the local resource manager's runner).
        self._container_runtime = ContainerRuntime(
            container_runtime or default_runtime(),
            root_dir=self.root_dir,
            determined_images_fallback=determined_images_fallback,
        )
        self.user_token = user_token or _auth.new_user_token()
        # The hosting Jupyter server (set by jupyter_determined before start()): its kernel
        # manager starts kernel trials' kernels, so JupyterLab lists them and can attach.
        self.jupyter_host: Any = None
        # The master's Jupyter Gateway for kernel experiments that name none (docs/kernels.md).
        self._kernel_gateway = kernel_gateway
        self._context_size_limit = context_size_limit
        self._preemption_grace_seconds = preemption_grace_seconds
        self._terminate_grace_seconds = terminate_grace_seconds
        self.cluster_id = cluster_id
        self._ray_cluster: RayConnection | None = None
        if resource_manager == "ray":
            # Ray places runs on its nodes; the scheduler counts the cluster's slots, which follow
            # its nodes (the pools start empty: connecting happens in the background, in start()).
            inventory = RayInventory(ray_pool_config(resource_pools), default_resource_pool)
            self._ray_cluster = RayConnection(ray_address, inventory=inventory)
            gpus = []
        elif gpus is None:
            gpus = discover_gpus()
        elif isinstance(gpus, int):
            gpus = fake_gpus(gpus)
        self._gpus: list[GPU] = list(gpus)
        # Scheduling (docs/scheduling.md): fair_share unless configured; the slots in pools.
        self._pools = (
            self._ray_cluster.pools
            if self._ray_cluster is not None
            else build_pools(self._gpus, cpu_slots, resource_pools)
        )
        self._scheduler = Scheduler(
            sorted(s for pool in self._pools for s in pool.slot_ids),
            policy=scheduling or Policy(),
            pools={pool.name: list(pool.slot_ids) for pool in self._pools},
            default_pool=pick_default(self._pools, default_resource_pool),
            details=self._pools,
        )
        self._scheduler.live_shape = self._ray_cluster is not None
        self.events = EventBus(experiment_of_trial=self._experiment_of_trial)
        self._master_url = ""
        self._checkpoint_gc: CheckpointCollector = None  # type: ignore[assignment]  # start()
        self._log_writer: LogWriter | None = None
        self._shared = MasterState(self.root_dir, self.events)
        self._read_priority = ReadPriority()
        # Configs may put checkpoints only under these (issue 26): <root_dir>/checkpoints and
        # the directories an administrator allows (MasterLite.checkpoint_storage_roots).
        self._shared.storage_roots = storage_roots(self.root_dir, checkpoint_storage_roots)
        settings = RunSettings(
            cluster_id=cluster_id,
            preemption_grace_seconds=preemption_grace_seconds,
            terminate_grace_seconds=terminate_grace_seconds,
        )
        parts = build_parts(
            self._shared,
            scheduler=self._scheduler,
            gpus=self._gpus,
            settings=settings,
            context_size_limit=context_size_limit,
            collect_garbage=self._collect_checkpoint_garbage,
            delete_checkpoint_files=self._delete_checkpoint_files,
            tensorboard_refresh_seconds=tensorboard_refresh_seconds,
            accounts=self._accounts,
        )
        # The typed parts the API handlers call, one method each (docs/internals.md, "Master
        # facade"): reads from `views`, experiment actions from `experiments`, edits from
        # `edits`, trial reports from `reports`, runs from `runs`, logs from `logs`, and the
        # checkpoints, models, TensorBoards and kernel runs from theirs.
        self.views: Views = parts.views
        self.experiments: Experiments = parts.experiments
        self.edits: ExperimentEdits = parts.edits
        # Fork an experiment; re-run or continue a trial as a new experiment.
        self.forks: Forks = parts.forks
        self.runs: Runs = parts.runs
        self.reports: Reports = parts.reports
        self.logs: TrialLogs = parts.logs
        self.checkpoints: Checkpoints = parts.checkpoints
        self.models: Models = parts.models
        self.tensorboards: TensorBoards = parts.tensorboards
        self.unmanaged: UnmanagedRuns = parts.unmanaged
        # Accounts, sign-ins and the owner-or-admin rule (docs/team.md).
        self.users = Users(
            self._shared, session_lifetime_hours=session_lifetime_hours, read_access=read_access
        )
        self.users.register_owner("tensorboard", self.tensorboards.owner_of)
        # Workspaces and projects: how experiments are grouped (docs/team.md).
        # A workspace's slot quota is applied by the scheduler (docs/scheduling.md).
        self.workspaces = Workspaces(
            self._shared,
            publish_experiment=self.views.publish_experiment,
            scheduler=self._scheduler,
            wake_scheduler=self.runs.run_scheduler,
        )
        self._partials: PartialCheckpoints = parts.partials  # wiring only
        # Wiring only: not for handlers.
        self._searchers, self._recovery = parts.searchers, parts.recovery

    @property
    def store(self) -> Store:
        """The master's SQLite store (opened by `start`)."""
        return self._shared.store

    @property
    def runner(self) -> Runner:
        """The runner that starts trial processes (made by `start`)."""
        return self.runs.runner

    def _experiment_of_trial(self, trial_id: int) -> int | None:
        if self._shared.store is None:
            return None
        return self._shared.store.trials.experiment_of(trial_id)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, master_url: str) -> None:
        """Open the store, recover what a previous master left, and start scheduling."""
        # jsonschema takes seconds to import on a busy machine; import it beside the start, not
        # inside the first request that validates a body (a user's first submission).
        threading.Thread(
            target=expconf.prepare_validator, name="prepare-validators", daemon=True
        ).start()
        self._master_url = master_url.rstrip("/")
        loop = asyncio.get_running_loop()
        self.events.attach(loop)
        for sub in ("contexts", "trials", "checkpoints"):
            (self.root_dir / sub).mkdir(mode=0o700, parents=True, exist_ok=True)  # private
        if self._accounts.run_trials_as == "owner":
            open_root(self.root_dir)  # trials of other accounts reach their own dirs only
        store = Store(self.root_dir / "master.db")
        self._checkpoint_gc = CheckpointCollector(
            store, on_deleted=self.checkpoints.publish_deleted, roots=self._shared.storage_roots
        )
        self._log_writer = log_writer = LogWriter(self.logs.store_logs)
        # Exits arrive on a waiter thread; they go through the log writer so that they reach
        # the loop only after the run's last lines are stored.
        runtime_dir = getattr(self.jupyter_host, "runtime_dir", None)
        hidden = self._shared.hidden_from_trials
        if runtime_dir and Path(runtime_dir) not in hidden:
            # Hosted: Jupyter's token and its kernels' connection keys are there.
            self._shared.hidden_from_trials = (*hidden, Path(runtime_dir))
        runner = build_runner(
            self._runner_classes,
            ray_cluster=self._ray_cluster,
            log_sink=log_writer.submit,
            on_exit=self.runs.exit_observed,
            container_runtime=self._container_runtime,
            jupyter_host=self.jupyter_host,
            loop=loop,
            kernel_gateway=self._kernel_gateway,
        )
        self.runs.attach(runner, log_writer, self._master_url)
        self._shared.open(store, loop)
        self.users.open()
        self.workspaces.apply_quotas(wake=False)  # before recovery requeues trials
        self.tensorboards.remove_leftovers()  # of a master that was killed
        self._recovery.recover()
        self.unmanaged.start()
        self._collect_checkpoint_garbage()  # GCs cut short by the previous master's end
        self._partials.request()  # saves the previous master's runs never finished
        if self._ray_cluster is not None:  # connects (and reconnects) in the background

            def on_shape(pools: list) -> None:
                loop.call_soon_threadsafe(self._new_cluster_shape, pools)

            self._ray_cluster.on_shape = on_shape
            self._ray_cluster.start()

    def _new_cluster_shape(self, pools: list) -> None:
        """Ray's nodes changed: the scheduler's slots follow (docs/distributed.md)."""
        if not self._shared.closed:
            self._scheduler.replace_pools(pools)
            self.runs.run_scheduler()

    async def stop(self, pause_running: bool = True) -> None:
        """Preempt every run (they checkpoint and exit as PAUSED) and close the store."""
        if self._shared.closed:
            return
        self._shared.stopping = True
        await self.tensorboards.stop_all()  # nothing of the master's outlives it
        self.unmanaged.stop()
        await self.runs.stop_all(pause_running=pause_running)
        self.runs.runner.close()  # e.g. the local runner's pre-started interpreters
        if self._log_writer is not None:
            self._log_writer.close()
        self._shared.closed = True
        self._shared.store.close()

    def _delete_checkpoint_files(self, uuid: str) -> None:
        self._checkpoint_gc.delete_checkpoint(uuid)

    def _collect_checkpoint_garbage(self) -> None:
        if not self._shared.closed:
            self._checkpoint_gc.collect_pending()

    async def read(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)`, a read of the store (a `views` method), run in the store's
        read pool: off the event loop, beside other reads and the writes, in one read
        transaction that sees every write acknowledged before it (store/_reads.py)."""
        if self._shared.closed:
            return fn(*args, **kwargs)  # not serving: nothing runs beside it
        with self._read_priority.reading():
            return await asyncio.wrap_future(self._shared.store.reads.submit(fn, *args, **kwargs))

    async def before_report(self) -> None:
        """Wait (briefly, bounded) while reads are in flight: a handler storing a trial's
        report calls this first, so reads a person waits for get the cores (_core/_priority.py)."""
        await self._read_priority.before_report()

    # -- what needs more than one part -------------------------------------------------------
    def authenticate(self, token: str | None) -> _auth.Principal | None:
        """The user or trial run that holds `token`, or None (Unauthorized: the token of a
        deactivated user). The master token is the owner account's."""
        if token and _auth.tokens_equal(token, self.user_token):
            return self.users.owner_principal()
        principal = authenticate(self._shared.store, token, user_token=self.user_token)
        if principal is None and token:
            principal = self.users.authenticate(token)
        return principal

    async def identify(self, handler: Any, token: str | None) -> _auth.Principal | None:
        """`authenticate(token)`, then (run as a Hub service) the Hub last: a Hub API token,
        or without a token the service's OAuth cookie of `handler`'s request."""
        principal = self.authenticate(token) if token else None
        hub = self.users.hub
        if principal is None and hub is not None:
            principal = await hub.identify(handler, token)
        return principal

    def delete_checkpoint(self, uuid: str) -> dict:
        """A user's deletion of a checkpoint's files (Conflict when a live trial needs it);
        the checkpoint after it (DELETED)."""
        self._checkpoint_gc.delete_checkpoint(uuid)
        return self.checkpoints.get_checkpoint(uuid)


__all__ = ["EXPERIMENT_ACTIONS", "Master"]
