"""`core_v2.init()` / `core_v2.close()`: the Core API as module-level singletons, for a run
that trains where it is (a notebook's kernel) and is tracked by the master as an unmanaged
experiment; in a trial the master started, the same calls use that trial (managed mode)."""

from __future__ import annotations

import atexit
import logging
import sys
from typing import Any

from determined import _info, core
from determined.common import storage
from determined.core import _context as core_context
from determined.core._checkpoint import CheckpointContext
from determined.core._checkpoint_reporter import CheckpointReporter
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._metrics import MetricsShipper
from determined.core._preempt import DummyPreemptContext, PreemptMode
from determined.core._searcher import DummySearcherContext
from determined.core._spool import default_spool_dir, resend_spools
from determined.core._tensorboard import TensorboardManager, TensorboardMode
from determined.core._train import TrainContext
from determined.experimental.core_v2._config import Config, merge_config
from determined.experimental.core_v2._exits import ExitWatch, experiment_view_url
from determined.experimental.core_v2._open import open_body, open_run
from determined.experimental.core_v2._run import DEFAULT_LEASE_SECONDS, RunEnded, UnmanagedRun

logger = logging.getLogger("determined.core_v2")

_context: core.Context | None = None
_run: UnmanagedRun | None = None
_atexit_registered = False


class _UnmanagedTrainContext(TrainContext):
    """A `TrainContext` that refuses reports once its run ended, saying why."""

    def __init__(self, run: UnmanagedRun, *args: Any) -> None:
        super().__init__(*args)
        self._run = run

    def _send(
        self, group: str, steps_completed: int, metrics: dict, batch_metrics: list | None
    ) -> None:
        self._run.check_open()
        super()._send(group, steps_completed, metrics, batch_metrics)

    def report_progress(self, progress: float) -> None:
        self._run.check_open()
        super().report_progress(progress)


class _UnmanagedCheckpointContext(CheckpointContext):
    """A `CheckpointContext` that refuses new checkpoints once its run ended, saying why."""

    def __init__(self, run: UnmanagedRun, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._run = run

    def upload(self, *args: Any, **kwargs: Any) -> str:
        self._run.check_open()
        return super().upload(*args, **kwargs)

    def store_path(self, *args: Any, **kwargs: Any) -> Any:
        self._run.check_open()
        return super().store_path(*args, **kwargs)


def _unmanaged_context(
    run: UnmanagedRun,
    distributed: DistributedContext | None,
    tensorboard_mode: TensorboardMode,
    own_storage: dict | None = None,
) -> core.Context:
    answer = run.answer
    session = run.trial_session
    trial_id, run_id, exp_id = run.trial_id, int(answer["trial_run_id"]), run.experiment_id
    config = answer["config"]
    distributed = distributed or DummyDistributedContext()
    storage_config = dict(config["checkpoint_storage"])
    # The master's answer shows an s3 storage's keys as `********`: sign with the ones this
    # process submitted (`own_storage`).
    for key in ("access_key", "secret_key"):
        if storage_config.get(key) == storage.REDACTED and (own_storage or {}).get(key):
            storage_config[key] = (own_storage or {})[key]
    storage_manager = storage.StorageManager.from_config(storage_config)
    info = _info.ClusterInfo(
        master_url=session.master_url,
        cluster_id="master-lite",
        agent_id="kernel",
        slot_ids=[],
        task_id=f"trial-{trial_id}",
        allocation_id=f"unmanaged-{trial_id}",
        session_token=answer["token"],
        task_type="TRIAL",
        latest_checkpoint=answer.get("latest_checkpoint"),
        trial_info=_info.TrialInfo(
            trial_id=trial_id,
            experiment_id=exp_id,
            trial_seed=int(answer.get("trial_seed") or 0),
            hparams=answer.get("hparams") or {},
            config=config,
            steps_completed=int(answer.get("steps_completed") or 0),
            trial_run_id=run_id,
        ),
    )
    tensorboard = TensorboardManager(
        tensorboard_mode, storage_manager.base_path, exp_id, trial_id, distributed.rank
    )
    return core.Context(
        checkpoint=_UnmanagedCheckpointContext(
            run,
            distributed,
            storage_manager,
            session,
            task_id=info.task_id,
            trial_id=trial_id,
            reporter=CheckpointReporter(
                lambda: type(session)(session.master_url, answer["token"]),
                retry_window_s=run.lease_seconds,
            ),
        ),
        distributed=distributed,
        preempt=DummyPreemptContext(distributed),
        train=_UnmanagedTrainContext(
            run,
            session,
            trial_id,
            run_id,
            exp_id,
            MetricsShipper(
                type(session)(session.master_url, answer["token"]),
                trial_id,
                run_id,
                # A master that dies and comes back within the lease keeps the run (the lease
                # is in its store): what was reported meanwhile waits on disk until then.
                retry_window_s=run.lease_seconds,
                spool_dir=default_spool_dir(),
                resend_hint=(
                    "once the master is back, core_v2.init(...) with the same external ids "
                    "sends them first"
                ),
            ),
            tensorboard,
        ),
        searcher=DummySearcherContext(distributed),
        info=info,
    )


def init_context(
    *,
    config: Config | None = None,
    defaults: Config | None = None,
    unmanaged: Config | None = None,
    client: Any = None,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    capture_output: bool = True,
) -> core.Context:
    """`core_v2.init`'s context without the module singletons: `with init_context(...) as
    core_context:`. In a trial the master started, this is `det.core.init()`; anywhere else
    the run is opened (or resumed) as an unmanaged trial. Its end when the `with` block is left
    is the run's end (COMPLETED, or ERROR if an exception leaves it).

    Args: as `init`.
    """
    cluster_info = _info.get_cluster_info()
    if cluster_info is not None and cluster_info.task_type == "TRIAL":
        return core.init(
            distributed=distributed,
            checkpoint_storage=checkpoint_storage,
            preempt_mode=preempt_mode,
            tensorboard_mode=tensorboard_mode,
        )
    merged = merge_config(config, defaults, unmanaged)
    if client is None:
        from determined.common.experimental import Determined

        client = Determined()
    session = client._session
    body = open_body(merged, checkpoint_storage)
    run = open_run(session, body, distributed, lease_seconds, capture_output)
    if run.chief:
        # Reports an earlier process of this trial could not deliver (its master was down past
        # its lease) go before anything this run reports; the chief sends them, once.
        resend_spools(default_spool_dir(), session.master_url, run.trial_id, run.post_bytes)
    context = _unmanaged_context(
        run, distributed, TensorboardMode(tensorboard_mode), body.get("checkpoint_storage")
    )
    return _RunContext(context, run)


class _RunContext(core.Context):
    """The core context of an unmanaged run: starting it starts the run's lease keeper and
    output capture; closing it closes the run (ERROR when an exception is being handled)."""

    def __init__(self, context: core.Context, run: UnmanagedRun) -> None:
        super().__init__(
            checkpoint=context.checkpoint,
            distributed=context.distributed,
            preempt=context.preempt,
            train=context.train,
            searcher=context.searcher,
            profiler=context.profiler,
            experimental=context.experimental,
            info=context.info,
        )
        self.run = run

    def start(self) -> None:
        if not self._started:
            self.run.start()
        super().start()

    def close(self, exc_type: Any = None, exc_val: Any = None, exc_tb: Any = None) -> None:
        if self._closed:
            return
        try:
            super().close(exc_type, exc_val, exc_tb)
        finally:
            failed = exc_type is not None and not issubclass(exc_type, KeyboardInterrupt)
            canceled = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
            state = "ERROR" if failed else "CANCELED" if canceled else "COMPLETED"
            message = f"run ended by {exc_type.__name__}: {exc_val}" if exc_type else None
            self.run.close(state, message)

    def _before_distributed_close(self) -> None:
        """With several ranks, every rank's queued reports reach the master (a barrier) before
        the chief ends the trial, whose token ends with it."""
        if self.distributed.size > 1:
            self.distributed.allgather(None)


def init(
    *,
    config: Config | None = None,
    defaults: Config | None = None,
    unmanaged: Config | None = None,
    client: Any = None,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    capture_output: bool = True,
) -> None:
    """Open the run and set `core_v2.train`, `.checkpoint`, `.distributed`, `.preempt`,
    `.searcher` and `.info`; a run already open in this process is closed first.

    Outside a trial the master started, the run becomes an unmanaged experiment and trial on
    the master (shown in the sidebar, marked as running in a kernel): the master runs nothing
    for it, but stores its metrics, checkpoints and the lines its cells print. The kernel keeps
    a lease alive: a kernel that dies without `close()` (SIGKILL) leaves its trial ERROR once
    `lease_seconds` pass. `close()` runs at interpreter exit too (kernel shutdown, restart).

    Args:
        config: the run's `Config` (name, hparams, searcher metric, checkpoint_storage,
            external_experiment_id / external_trial_id to resume a trial).
        defaults: the older spelling of `config` (Determined's `DefaultConfig`).
        unmanaged: completes `defaults` (Determined's `UnmanagedConfig`: external ids).
        client: a `determined.experimental.Determined` (default: the master `det` finds).
        distributed: as `det.core.init`'s (default: one process).
        checkpoint_storage: overrides `config.checkpoint_storage` (a path or a storage dict).
        preempt_mode: as `det.core.init`'s; unmanaged runs are never preempted.
        tensorboard_mode: as `det.core.init`'s (default AUTO, as in Determined: what the run
            writes to `core_v2.train.get_tensorboard_path()` is copied to checkpoint storage
            after reports and at the end; MANUAL: upload with
            `core_v2.train.upload_tensorboard_files()`).
        lease_seconds: how long the master waits for a silent kernel before ending its trial.
        capture_output: ship the kernel's stdout/stderr as the trial's logs while it is open.

    Raises:
        ValueError: neither `config` nor `defaults` given outside a managed trial, or
            `external_trial_id` without `external_experiment_id`.
        determined.common.api.errors.APIError: the master refused the config (the message names
            the field) or cannot be reached.
    """
    global _context, _run, _atexit_registered
    close()
    context = init_context(
        config=config,
        defaults=defaults,
        unmanaged=unmanaged,
        client=client,
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        preempt_mode=preempt_mode,
        tensorboard_mode=tensorboard_mode,
        lease_seconds=lease_seconds,
        capture_output=capture_output,
    )
    context.start()
    _context = context
    _run = context.run if isinstance(context, _RunContext) else None
    _set_globals(context)
    if _run is not None:
        core_context.set_unmanaged_context(context)
        _exit_watch.install()
    if not _atexit_registered:
        atexit.register(_close_at_exit)
        _atexit_registered = True


_exit_watch = ExitWatch()


def _close_at_exit() -> None:
    close_run(_exit_watch.error)


def url_reverse_webui_exp_view() -> str:
    """The URL of the open run's experiment in this master's UI (Determined's name): in
    JupyterLab when the master is hosted by a Jupyter server (`<lab>?det-experiment=ID` opens
    the sidebar's experiment view), else the experiment in the API
    (`<master>/api/v1/experiments/ID`).

    Raises:
        RuntimeError: no run is open (call `core_v2.init(...)` first).
    """
    info = _context.info if _context is not None else None
    trial = info._trial_info if info is not None else None
    if info is None or trial is None:
        raise RuntimeError(
            "core_v2.url_reverse_webui_exp_view(): no run is open; call core_v2.init(...) first"
        )
    return experiment_view_url(info.master_url, info.session_token, trial.experiment_id)


def close() -> None:
    """Send what is queued, end the run (its trial COMPLETED) and clear the singletons;
    a no-op when no run is open. Reports through contexts kept from the run raise afterwards."""
    close_run(None)


def close_run(error: BaseException | None) -> None:
    """`close()`, ending the trial as ERROR when `error` (CANCELED for a KeyboardInterrupt)."""
    global _context, _run
    context, _context, _run = _context, None, None
    if context is None:
        return
    core_context.set_unmanaged_context(None)
    try:
        if error is None:
            context.close()
        else:
            context.close(type(error), error, error.__traceback__)
    finally:
        _set_globals(None)


class _ClosedContext:
    """What `core_v2.train` (and the others) are after `close()`: any use says what to do,
    instead of an AttributeError on None."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        raise RunEnded(
            f"core_v2.{self._name}.{attribute}: the run was closed (core_v2.close()); call "
            "core_v2.init(...) again first (the same external ids resume the same trial)"
        )

    def __repr__(self) -> str:
        return f"<core_v2.{self._name} of a closed run>"


def _set_globals(context: core.Context | None) -> None:
    package = sys.modules["determined.experimental.core_v2"]
    for name in ("train", "checkpoint", "distributed", "preempt", "searcher", "info"):
        if context is not None:
            setattr(package, name, getattr(context, name))
        else:
            setattr(package, name, None if name == "info" else _ClosedContext(name))


def current_run() -> UnmanagedRun | None:
    """The unmanaged run `init` opened in this process, if one is open."""
    return _run


__all__ = [
    "close",
    "close_run",
    "current_run",
    "init",
    "init_context",
    "url_reverse_webui_exp_view",
]
