"""`core_context.train`: report metrics, progress, early exits and status to the master."""

from __future__ import annotations

import enum
import logging
import operator
import pathlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from determined.core._metrics import MetricsShipper

if TYPE_CHECKING:
    from determined.core._courier import ReportCourier
from determined.core._tensorboard import TensorboardManager

logger = logging.getLogger("determined.core")


class EarlyExitReason(str, enum.Enum):
    INVALID_HP = "EXITED_REASON_INVALID_HP"
    USER_REQUESTED_STOP = "EXITED_REASON_USER_REQUESTED_STOP"

    def __str__(self) -> str:
        return self.value


def _check_group(group: str) -> None:
    if not isinstance(group, str) or not group or "." in group:
        raise ValueError(
            f"report_metrics: group must be a non-empty string without '.', got {group!r}"
        )


def _check_steps(steps_completed: Any) -> int:
    if type(steps_completed) is int:
        return steps_completed
    try:
        return operator.index(steps_completed)
    except TypeError:
        raise TypeError(
            f"steps_completed must be an integer, got {steps_completed!r} ({type(steps_completed).__name__})"
        ) from None


def _check_metrics(group: str, metrics: Any) -> dict:
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics for group {group!r} must be a dict, got {type(metrics).__name__}")
    if group != "validation":
        return dict(metrics)  # shallow copy: the caller may mutate its dict after reporting
    cleaned = {}
    for key, value in metrics.items():
        if value is None:
            raise RuntimeError(
                f"validation metric {key!r} is None; report a number (or leave the key out)"
            )
        if isinstance(value, (bytes, bytearray)):
            logger.warning("dropping validation metric %r: bytes values cannot be stored", key)
            continue
        cleaned[key] = value
    return cleaned


def _check_progress(progress: float) -> float:
    progress = float(progress)
    if not 0.0 <= progress <= 1.0:
        raise ValueError(f"report_progress: progress must be a fraction in [0, 1], got {progress}")
    return progress


class TrainContext:
    """`core_context.train`: reports of one trial run to the master.

    Built by `det.core.init()`; users do not construct it. Metrics travel through a
    `ReportCourier` child process (or, where it cannot be used, a background `MetricsShipper`
    thread): both have put/start/close, so a report returns before it reaches the master.
    """

    # A class default too: subclasses that skip `__init__` (test doubles of the kind Determined
    # users write over `DummyTrainContext`) still report.
    _on_report: Callable[[], None] | None = None

    def __init__(
        self,
        session: Any,
        trial_id: int,
        trial_run_id: int,
        experiment_id: int,
        shipper: MetricsShipper | ReportCourier,
        tensorboard: TensorboardManager,
        *,
        on_report: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._trial_id = trial_id
        self._trial_run_id = trial_run_id
        self._experiment_id = experiment_id
        self._shipper = shipper
        self._tensorboard = tensorboard
        # Called on each report (`det.core.init()` passes the preempt context's `_on_report`,
        # which notes once a stop request the loop does not check).
        self._on_report = on_report

    def _start(self) -> None:
        self._shipper.start()

    def _close(self) -> None:
        try:
            self._shipper.close()
        finally:
            # Events written after the last report still reach checkpoint storage.
            self._tensorboard.close()

    def report_metrics(self, group: str, steps_completed: int, metrics: dict) -> None:
        """Report metrics of any group; "training" and "validation" are the built-in series.

        Args:
            group: the series the metrics belong to, e.g. "training", "validation" or "test";
                a non-empty string without ".".
            steps_completed: the global step the metrics were taken at (e.g. batches trained).
            metrics: metric name to value; must be JSON-serializable. Reports of one group at one
                step must not repeat a key.

        Raises:
            ValueError: `group` is empty, not a string, or contains ".".
            TypeError: `steps_completed` is not an integer or `metrics` is not a dict.
            RuntimeError: a "validation" metric is None.
        """
        if group != "training" and group != "validation":
            _check_group(group)
        self._report(group, steps_completed, metrics, None)

    def report_training_metrics(
        self, steps_completed: int, metrics: dict, batch_metrics: list[dict] | None = None
    ) -> None:
        """Report training metrics (the "training" group).

        Args:
            steps_completed: the global step the metrics were taken at (e.g. batches trained).
            metrics: metric name to value, e.g. `{"loss": 0.1}`; must be JSON-serializable.
            batch_metrics: optional per-batch metrics; stored with the report, not charted.

        Raises:
            TypeError: `steps_completed` is not an integer or `metrics` is not a dict.
        """
        self._report("training", steps_completed, metrics, batch_metrics)

    def report_validation_metrics(self, steps_completed: int, metrics: dict) -> None:
        """Report validation metrics (the "validation" group); the searcher reads these.

        A metric whose value is bytes is dropped with a warning (it cannot be stored).

        Args:
            steps_completed: the global step the metrics were taken at (e.g. batches trained).
            metrics: metric name to value; must include the experiment's `searcher.metric` for
                the searcher to see it.

        Raises:
            TypeError: `steps_completed` is not an integer or `metrics` is not a dict.
            RuntimeError: a metric is None.
        """
        self._report("validation", steps_completed, metrics, None)

    def _report(
        self, group: str, steps_completed: int, metrics: dict, batch_metrics: list | None
    ) -> None:
        steps_completed = _check_steps(steps_completed)
        metrics = _check_metrics(group, metrics)
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                "report_%s_metrics(steps_completed=%s, metrics=%s)", group, steps_completed, metrics
            )
        if self._on_report is not None:
            self._on_report()
        self._send(group, steps_completed, metrics, batch_metrics)

    def _send(
        self, group: str, steps_completed: int, metrics: dict, batch_metrics: list | None
    ) -> None:
        """Hand checked metrics to the shipper (and TensorBoard); the dummy overrides this."""
        self._shipper.put((group, steps_completed, metrics, batch_metrics, time.time()))
        if group == "training" or group == "validation":
            self._tensorboard.on_metrics(group, steps_completed, metrics)

    def report_progress(self, progress: float) -> None:
        """Report how far training has got, for the experiment's progress bar.

        Args:
            progress: the fraction of training done, in [0, 1] (e.g. `step / max_steps`).

        Raises:
            ValueError: `progress` is outside [0, 1].
        """
        progress = _check_progress(progress)
        if self._on_report is not None:
            self._on_report()
        self._shipper.put(("__progress__", progress))

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Tell the master this trial is ending early, and why.

        `core.Context` reports `EarlyExitReason.INVALID_HP` itself when `det.InvalidHP` leaves
        its `with` block. A second report for the same trial is ignored with a warning.

        Args:
            reason: an `EarlyExitReason` (or its string value).

        Raises:
            ValueError: `reason` is not an `EarlyExitReason`.
            determined.common.api.APIError: the master refused the report for another reason.
        """
        from determined.common.api import APIError

        reason = EarlyExitReason(reason)
        logger.info("report_early_exit(reason=%s)", reason.value)
        try:
            self._session.post(f"/trials/{self._trial_id}/early_exit", {"reason": reason.value})
        except APIError as e:
            if e.status != 400:
                raise
            logger.warning("early exit was not recorded: %s", e.message)

    def get_experiment_best_validation(self) -> float | None:
        """The best value of `searcher.metric` reported so far by any trial of the experiment.

        "Best" follows `searcher.smaller_is_better`.

        Returns:
            The best value, or None while no trial has reported that metric.
        """
        from determined.common.api import NotFound

        try:
            answer = self._session.get(
                f"/experiments/{self._experiment_id}/searcher/best_searcher_validation_metric"
            )
        except NotFound:
            return None
        metric = answer.get("metric")
        return None if metric is None else float(metric)

    def set_status(self, status: str) -> None:
        """Show a short line saying what the trial is doing (e.g. "validating") in the UI.

        Args:
            status: the text to show.
        """
        self._session.post(f"/trials/{self._trial_id}/runner/metadata", {"state": str(status)})

    def get_tensorboard_path(self) -> pathlib.Path:
        """The directory whose TensorBoard event files are uploaded to checkpoint storage.

        Returns:
            The local directory to write TensorBoard files to.
        """
        return self._tensorboard.path

    def upload_tensorboard_files(
        self,
        selector: Callable[[pathlib.Path], bool] = lambda _: True,
        mangler: Callable[[pathlib.Path, int], pathlib.Path] = lambda p, __: p,
    ) -> None:
        """Upload the files under `get_tensorboard_path()` to checkpoint storage (MANUAL mode).

        Args:
            selector: called with the path of each file under `get_tensorboard_path()`;
                returns True to upload it. By default every file is uploaded.
            mangler: maps (relative path, rank) to the name it is stored under, so ranks writing
                the same file names do not overwrite each other; by default the path unchanged.

        Raises:
            RuntimeError: called with `TensorboardMode.AUTO`, which uploads by itself.
        """
        self._tensorboard.upload(selector, mangler)

    def set_metadata(self, metadata: dict) -> None:
        """Not supported by master_lite (Determined stores it as run metadata).

        Args:
            metadata: the run metadata to store.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "run metadata (set_metadata/get_metadata) is not supported by master_lite"
        )

    def get_metadata(self) -> dict:
        """Not supported by master_lite (Determined reads the run metadata).

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "run metadata (set_metadata/get_metadata) is not supported by master_lite"
        )


class DummyTrainContext(TrainContext):
    """Off the master: every report is only logged, with the same validation as on the master."""

    def __init__(self) -> None:
        # No session, shipper or TensorBoard: nothing leaves this process; never preempted.
        self._on_report = None

    def _start(self) -> None:
        pass

    def _close(self) -> None:
        pass

    def _send(
        self, group: str, steps_completed: int, metrics: dict, batch_metrics: list | None
    ) -> None:
        pass  # `_report` has logged it

    def report_progress(self, progress: float) -> None:
        # Determined's dummy does no range check; we keep that so off-cluster runs never fail here.
        logger.info("report_progress(progress=%s)", progress)

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        logger.info("report_early_exit(reason=%s)", EarlyExitReason(reason).value)

    def get_experiment_best_validation(self) -> float | None:
        return None

    def set_status(self, status: str) -> None:
        logger.info("set_status(status=%s)", status)

    def get_tensorboard_path(self) -> None:  # type: ignore[override]
        return None

    def upload_tensorboard_files(self, selector: Any = None, mangler: Any = None) -> None:
        logger.info("upload_tensorboard_files: nothing to upload off the master")

    def set_metadata(self, metadata: dict) -> None:
        logger.info("set_metadata(%s)", metadata)

    def get_metadata(self) -> dict:
        return {}
