"""`det.core.init()`: build the Core API contexts for this process, on or off the master."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import traceback
from typing import Any

from determined import _info
from determined.common import storage
from determined.core._checkpoint import CheckpointContext, DummyCheckpointContext
from determined.core._courier import CourierCheckpointReporter, ReportCourier, courier_usable
from determined.core._distributed import DistributedContext, DummyDistributedContext
from determined.core._metrics import MetricsShipper
from determined.core._preempt import DummyPreemptContext, PreemptContext, PreemptMode
from determined.core._profiler import DummyProfilerContext, ProfilerContext
from determined.core._searcher import DummySearcherContext, SearcherContext, SearcherContextMissing
from determined.core._tensorboard import TensorboardManager, TensorboardMode
from determined.core._train import DummyTrainContext, EarlyExitReason, TrainContext
from determined.errors import InvalidHP

logger = logging.getLogger("determined.core")


class ExperimentalCoreContext:
    """Links between this task and model-registry objects; master_lite has no model registry."""

    def __init__(self, on_master: bool) -> None:
        self._on_master = on_master

    def _unsupported(self, what: str) -> None:
        if self._on_master:
            raise NotImplementedError(
                f"{what} is not supported by master_lite (it has no model registry)"
            )
        logger.info("%s: nothing to report off the master", what)

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        """Record that this task uses a checkpoint (Determined links them in its model registry).

        Args:
            checkpoint: the checkpoint used.

        Raises:
            NotImplementedError: on the master (master_lite has no model registry); off the
                master this only logs.
        """
        self._unsupported("report_task_using_checkpoint")

    def report_task_using_model_version(self, model_version: Any) -> None:
        """Record that this task uses a model version (Determined's model registry).

        Args:
            model_version: the model version used.

        Raises:
            NotImplementedError: on the master (master_lite has no model registry); off the
                master this only logs.
        """
        self._unsupported("report_task_using_model_version")


class Context:
    """What `det.core.init()` returns; use it as a context manager.

    Its attributes are the Core API contexts: `checkpoint`, `distributed`, `preempt`, `train`,
    `searcher`, `profiler`, `experimental`, and `info` (the `ClusterInfo`, None off the master).
    Off the master they are the `Dummy*` subclasses of the same classes.
    """

    def __init__(
        self,
        checkpoint: CheckpointContext,
        distributed: DistributedContext | None = None,
        preempt: Any = None,
        train: Any = None,
        searcher: Any = None,
        profiler: Any = None,
        experimental: ExperimentalCoreContext | None = None,
        info: _info.ClusterInfo | None = None,
    ) -> None:
        self.checkpoint = checkpoint
        self.distributed = distributed or DummyDistributedContext()
        self.preempt = preempt or DummyPreemptContext(self.distributed)
        self.train = train or DummyTrainContext()
        self.searcher = searcher or DummySearcherContext(self.distributed)
        self.profiler = profiler or DummyProfilerContext()
        self.experimental = experimental or ExperimentalCoreContext(on_master=False)
        self.info = info
        self._started = False
        self._closed = False

    def start(self) -> None:
        """Start the background work (preemption watching, metric shipping); idempotent.

        `with det.core.init() as core_context:` calls it; call it yourself only without `with`.
        """
        if self._started:
            return
        self._started = True
        self.preempt.start()
        self.train._start()

    def close(self, exc_type: Any = None, exc_val: Any = None, exc_tb: Any = None) -> None:
        """Send every queued report, then stop the background work; idempotent.

        Leaving the `with` block calls it; call it yourself only without `with`.

        Args:
            exc_type, exc_val, exc_tb: the exception being handled, if any (as `__exit__` gets
                them). While one is handled, a failure to close is logged instead of raised.

        Raises:
            RuntimeError: queued metrics or checkpoint records could not be sent to the master.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self.profiler._close()
            self.train._close()  # drains queued metrics; raises a shipping error
            self.checkpoint._close()  # drains queued checkpoint reports; raises a reporting error
        except Exception:
            if exc_type is None:
                raise
            logger.exception("closing the core context failed while handling another error")
        finally:
            self.preempt.close()
            try:
                self._before_distributed_close()
            finally:
                self.distributed.close()

    def _before_distributed_close(self) -> None:
        """A subclass's last step while the ranks can still talk (core_v2: a barrier)."""

    def __enter__(self) -> Context:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        if exc_type is not None and issubclass(exc_type, InvalidHP):
            logger.info(
                "InvalidHP raised: reporting an early exit (%s) and exiting cleanly", exc_val
            )
            try:
                self.train.report_early_exit(EarlyExitReason.INVALID_HP)
            finally:
                self.close()
            sys.exit(0)
        self.close(exc_type, exc_val, exc_tb)

    def alert(
        self, title: str | None = None, description: str | None = None, level: str = "info"
    ) -> None:
        """Send a webhook alert about this trial (Determined posts a custom webhook event).

        Args:
            title: the alert's title.
            description: the alert's text.
            level: one of "warn", "info", "debug", "error".

        Raises:
            ValueError: an unknown `level`, or called outside a trial run by the master.
            NotImplementedError: in a trial (master_lite has no webhooks).
        """
        if level not in ("warn", "info", "debug", "error"):
            raise ValueError(
                f"alert(level=...): must be one of warn, info, debug, error; got {level!r}"
            )
        if self.info is None or self.info.task_type != "TRIAL":
            raise ValueError("alert() is only available in trials run by the master")
        raise NotImplementedError("alert() posts a webhook event; master_lite has no webhooks")


def _print_stacks(signum: int, frame: Any) -> None:
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, stack in sys._current_frames().items():
        print(f"--- stack of thread {names.get(ident, ident)} ---", file=sys.stderr)
        traceback.print_stack(stack, file=sys.stderr)
    sys.stderr.flush()


def _install_stack_dump_handler() -> None:
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, _print_stacks)


def _default_storage(checkpoint_storage: Any) -> storage.StorageManager:
    manager = storage.from_override(checkpoint_storage)
    if manager is None:
        manager = storage.StorageManager(storage.default_user_data_dir())
        logger.info("no checkpoint_storage given: checkpoints go to %s", manager.base_path)
    return manager


# The context of the `det.experimental.core_v2` run open in this process (a notebook's kernel):
# off the master, `init()` answers it, so Core API code run by `%%det_submit --local` or beside
# `core_v2.init()` reports to that run instead of to dummy contexts.
_unmanaged_context: Context | None = None


def set_unmanaged_context(context: Context | None) -> None:
    """Make `context` (an open core_v2 run's) what `init()` returns off the master."""
    global _unmanaged_context
    _unmanaged_context = context


def _dummy_init(
    *, distributed: DistributedContext | None = None, checkpoint_storage: Any = None
) -> Context:
    """Off the master: the same interface, backed by local files and log lines."""
    distributed = distributed or DummyDistributedContext()
    # Determined's off-cluster init ignores preempt_mode and tensorboard_mode (its dummy preempt
    # context always uses WorkersAskChief); we match it so code behaves the same on either side.
    return Context(
        checkpoint=DummyCheckpointContext(distributed, _default_storage(checkpoint_storage)),
        distributed=distributed,
        preempt=DummyPreemptContext(distributed),
        train=DummyTrainContext(),
        searcher=DummySearcherContext(distributed),
        profiler=DummyProfilerContext(),
        experimental=ExperimentalCoreContext(on_master=False),
        info=None,
    )


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """The Core API entry point: `with det.core.init() as core_context: ...`.

    In a trial started by the master, the contexts talk to the master; anywhere else (a laptop,
    a notebook, a test) they are the `Dummy*` contexts: reports are logged and checkpoints go to
    local storage, so the same training code runs in both places. While a
    `det.experimental.core_v2` run is open in this process (`core_v2.init()`,
    `%%det_submit --local`), it returns that run's contexts instead: the master tracks them.

    Args:
        distributed: how this process talks to the trial's other processes, e.g.
            `core.DistributedContext.from_torch_distributed()`; required when the task has
            several slots. By default a single process.
        checkpoint_storage: where checkpoints go, overriding the experiment config's
            `checkpoint_storage`: a directory path (or file:// URL), or a storage dict such as
            `{"type": "directory", "container_path": PATH}`. Off the master the default is the
            user's data directory ($XDG_DATA_HOME/determined, ~/.local/share/determined).
        preempt_mode: who asks the master about preemption (see `PreemptMode`); ignored off the
            master.
        tensorboard_mode: `AUTO` or `MANUAL` (upload with
            `train.upload_tensorboard_files()`); ignored off the master.

    Returns:
        A `core.Context`; enter it (`with`) before use.

    Raises:
        ValueError: an invalid `checkpoint_storage` (e.g. s3:// or a shared_fs dict); on the
            master also a multi-slot task without `distributed`, a trial whose config has no
            `checkpoint_storage` and none is passed, or an invalid
            `preempt_mode`/`tensorboard_mode`.
        TypeError: `checkpoint_storage` is neither a str, a dict nor None.
    """
    info = _info.get_cluster_info()
    if info is None and _unmanaged_context is not None and not _unmanaged_context._closed:
        return _unmanaged_context
    if info is None:
        return _dummy_init(distributed=distributed, checkpoint_storage=checkpoint_storage)
    _install_stack_dump_handler()
    preempt_mode = PreemptMode(preempt_mode)
    tensorboard_mode = TensorboardMode(tensorboard_mode)
    if distributed is None:
        if len(info.container_addrs) > 1 or len(info.slot_ids) > 1:
            raise ValueError(
                f"this task has {len(info.slot_ids)} slots on {len(info.container_addrs)} container(s): "
                "pass distributed=core.DistributedContext(...) (e.g. "
                "DistributedContext.from_torch_distributed()) to det.core.init()"
            )
        distributed = DummyDistributedContext()

    if info.task_type != "TRIAL":
        return Context(
            checkpoint=DummyCheckpointContext(distributed, _default_storage(checkpoint_storage)),
            distributed=distributed,
            preempt=DummyPreemptContext(distributed, preempt_mode),
            train=DummyTrainContext(),
            searcher=SearcherContextMissing(),
            profiler=DummyProfilerContext(),
            experimental=ExperimentalCoreContext(on_master=True),
            info=info,
        )

    # requests is imported only on the master, and now, on the caller's thread: otherwise the
    # preemption watcher's first poll imports it (~50 ms of CPU) in the background while the
    # first steps of training run, taking the GIL from them.
    import requests  # noqa: F401

    from determined.common.api import Session

    def session() -> Session:
        # One session per thread that talks to the master (requests sessions are not thread-safe).
        return Session(info.master_url, info.session_token)

    trial = info.trial
    config = trial._config
    storage_manager = storage.from_override(checkpoint_storage)
    if storage_manager is None:
        if not config.get("checkpoint_storage"):
            raise ValueError(
                "the experiment config has no checkpoint_storage (the master always expands one); "
                "pass checkpoint_storage=PATH to det.core.init()"
            )
        storage_manager = storage.StorageManager.from_config(config["checkpoint_storage"])

    main_session = session()
    shipper: Any
    checkpoint_reporter: Any = None
    if courier_usable(info.master_url):
        # Reports leave from a child process: the training thread never waits on HTTP or on
        # the GIL for it (harness/determined/core/_courier.py).
        shipper = ReportCourier(
            info.master_url, info.session_token, trial.trial_id, trial._trial_run_id
        )
        checkpoint_reporter = CourierCheckpointReporter(shipper)
    else:
        shipper = MetricsShipper(session(), trial.trial_id, trial._trial_run_id)
    tensorboard = TensorboardManager(
        tensorboard_mode,
        storage_manager.base_path,
        trial.experiment_id,
        trial.trial_id,
        distributed.rank,
    )
    preempt = PreemptContext(
        main_session, info.allocation_id, distributed, preempt_mode, watcher_session=session()
    )

    def report_profile(group: str, metrics: dict) -> None:
        shipper.put((group, 0, metrics, None, time.time()))

    return Context(
        checkpoint=CheckpointContext(
            distributed,
            storage_manager,
            main_session,
            task_id=info.task_id,
            allocation_id=info.allocation_id,
            trial_id=trial.trial_id,
            session_factory=session,
            reporter=checkpoint_reporter,
        ),
        distributed=distributed,
        preempt=preempt,
        train=TrainContext(
            main_session,
            trial.trial_id,
            trial._trial_run_id,
            trial.experiment_id,
            shipper,
            tensorboard,
            on_report=preempt._on_report,
        ),
        searcher=SearcherContext(
            main_session,
            distributed,
            trial.trial_id,
            config,
            on_out_of_ops=preempt.acknowledge_preemption_signal,
            on_report=preempt._on_report,
        ),
        profiler=ProfilerContext(report_profile, info.agent_id, distributed.local_rank),
        experimental=ExperimentalCoreContext(on_master=True),
        info=info,
    )
