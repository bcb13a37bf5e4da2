"""`core_context.train`: report metrics, progress, early exits and status to the master."""
from __future__ import annotations

import enum
import logging
import operator
import pathlib
import time
from typing import TYPE_CHECKING, Any, Callable

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
        raise ValueError(f"report_metrics: group must be a non-empty string without '.', got {group!r}")


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
    """Reports of one trial run; metrics travel through a `ReportCourier` child process (or,
    where it cannot be used, a background `MetricsShipper` thread): both have put/start/close."""

    def __init__(
        self,
        session: Any,
        trial_id: int,
        trial_run_id: int,
        experiment_id: int,
        shipper: MetricsShipper | ReportCourier,
        tensorboard: TensorboardManager,
    ) -> None:
        self._session = session
        self._trial_id = trial_id
        self._trial_run_id = trial_run_id
        self._experiment_id = experiment_id
        self._shipper = shipper
        self._tensorboard = tensorboard

    def _start(self) -> None:
        self._shipper.start()

    def _close(self) -> None:
        self._shipper.close()

    def report_metrics(self, group: str, steps_completed: int, metrics: dict) -> None:
        if group != "training" and group != "validation":
            _check_group(group)
        self._report(group, steps_completed, metrics, None)

    def report_training_metrics(
        self, steps_completed: int, metrics: dict, batch_metrics: list[dict] | None = None
    ) -> None:
        self._report("training", steps_completed, metrics, batch_metrics)

    def report_validation_metrics(self, steps_completed: int, metrics: dict) -> None:
        self._report("validation", steps_completed, metrics, None)

    def _report(self, group: str, steps_completed: int, metrics: dict, batch_metrics: list | None) -> None:
        steps_completed = _check_steps(steps_completed)
        metrics = _check_metrics(group, metrics)
        if logger.isEnabledFor(logging.INFO):
            logger.info("report_%s_metrics(steps_completed=%s, metrics=%s)", group, steps_completed, metrics)
        self._shipper.put((group, steps_completed, metrics, batch_metrics, time.time()))
        if group == "training" or group == "validation":
            self._tensorboard.on_metrics(group, steps_completed, metrics)

    def report_progress(self, progress: float) -> None:
        self._shipper.put(("__progress__", _check_progress(progress)))

    def report_early_exit(self, reason: EarlyExitReason) -> None:
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
        self._session.post(f"/trials/{self._trial_id}/runner/metadata", {"state": str(status)})

    def get_tensorboard_path(self) -> pathlib.Path:
        return self._tensorboard.path

    def upload_tensorboard_files(
        self,
        selector: Callable[[pathlib.Path], bool] = lambda _: True,
        mangler: Callable[[pathlib.Path, int], pathlib.Path] = lambda p, __: p,
    ) -> None:
        self._tensorboard.upload(selector, mangler)

    def set_metadata(self, metadata: dict) -> None:
        raise NotImplementedError("run metadata (set_metadata/get_metadata) is not supported by master_lite")

    def get_metadata(self) -> dict:
        raise NotImplementedError("run metadata (set_metadata/get_metadata) is not supported by master_lite")


class DummyTrainContext:
    """Off the master: every report is only logged, with the same validation as on the master."""

    def _start(self) -> None:
        pass

    def _close(self) -> None:
        pass

    def report_metrics(self, group: str, steps_completed: int, metrics: dict) -> None:
        _check_group(group)
        self._report(group, steps_completed, metrics)

    def report_training_metrics(
        self, steps_completed: int, metrics: dict, batch_metrics: list[dict] | None = None
    ) -> None:
        self._report("training", steps_completed, metrics)

    def report_validation_metrics(self, steps_completed: int, metrics: dict) -> None:
        self._report("validation", steps_completed, metrics)

    def _report(self, group: str, steps_completed: int, metrics: dict) -> None:
        steps_completed = _check_steps(steps_completed)
        metrics = _check_metrics(group, metrics)
        logger.info("report_%s_metrics(steps_completed=%s, metrics=%s)", group, steps_completed, metrics)

    def report_progress(self, progress: float) -> None:
        # Determined's dummy does no range check; we keep that so off-cluster runs never fail here.
        logger.info("report_progress(progress=%s)", progress)

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        logger.info("report_early_exit(reason=%s)", EarlyExitReason(reason).value)

    def get_experiment_best_validation(self) -> float | None:
        return None

    def set_status(self, status: str) -> None:
        logger.info("set_status(status=%s)", status)

    def get_tensorboard_path(self) -> None:
        return None

    def upload_tensorboard_files(self, selector: Any = None, mangler: Any = None) -> None:
        logger.info("upload_tensorboard_files: nothing to upload off the master")

    def set_metadata(self, metadata: dict) -> None:
        logger.info("set_metadata(%s)", metadata)

    def get_metadata(self) -> dict:
        return {}
