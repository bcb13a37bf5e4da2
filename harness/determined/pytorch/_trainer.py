"""`det.pytorch.Trainer`: train a `PyTorchTrial` on or off the master."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._controller import _PyTorchTrialController
from determined.pytorch._trial import PyTorchTrial
from determined.pytorch._units import Batch, Epoch, TrainUnit, never

logger = logging.getLogger("determined.pytorch")

CHECKPOINT_POLICIES = ("best", "all", "none")


def _check_unit(name: str, unit: Any) -> TrainUnit:
    if not isinstance(unit, (Batch, Epoch)):
        raise TypeError(
            f"Trainer.fit({name}=...): expected det.pytorch.Batch(...) or Epoch(...), got {unit!r}"
        )
    return unit


class Trainer:
    """`Trainer(trial, context).fit(max_length=Epoch(1), ...)`.

    Args:
        trial: the `PyTorchTrial` to train.
        context: the context from `det.pytorch.init()` that the trial was built with.

    Raises:
        TypeError: `context` is not a `PyTorchTrialContext`.
    """

    def __init__(self, trial: PyTorchTrial, context: PyTorchTrialContext) -> None:
        if not isinstance(context, PyTorchTrialContext):
            raise TypeError("Trainer(trial, context): context must come from det.pytorch.init()")
        self._trial = trial
        self._context = context
        self._core = context._core
        self._info = self._core.info
        self._local_training = not context._managed_training

    def configure_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Deprecated: does nothing but log an error; use `fit(profiling_enabled=True)`.

        Args:
            *args: ignored.
            **kwargs: ignored.
        """
        logger.error(
            "Trainer.configure_profiler() is deprecated and does nothing; use fit(profiling_enabled=True)"
        )

    def fit(
        self,
        checkpoint_period: TrainUnit | None = None,
        validation_period: TrainUnit | None = None,
        max_length: TrainUnit | None = None,
        reporting_period: TrainUnit | None = None,
        checkpoint_policy: str = "best",
        latest_checkpoint: str | None = None,
        step_zero_validation: bool = False,
        test_mode: bool = False,
        profiling_enabled: bool = False,
        *,
        _searcher_operations: bool = False,
    ) -> None:
        """Train until `max_length`, validating/checkpointing/reporting at the given periods.

        Returns normally when training is done or when the trial must stop (preemption, stop
        request); in the latter case a checkpoint was saved first.

        Args:
            checkpoint_period: how often to checkpoint, a `Batch(n)` or `Epoch(n)`; never by
                default (checkpoints are still saved at the end, on preemption and on a stop
                request).
            validation_period: how often to validate, a `Batch(n)` or `Epoch(n)`; never by
                default (the end of `max_length` is still validated).
            max_length: how long to train in all, a `Batch(n)` or `Epoch(n)` with an int `n`,
                counted from the start of training. Required, except on the master when the
                config's deprecated `searcher.max_length` is set (a warning is issued).
            reporting_period: how often to report training metrics; `Batch(100)` by default.
            checkpoint_policy: "best" (checkpoint after a validation better than the
                experiment's best so far), "all" (after every validation) or "none". Off the
                master "best" acts as "all".
            latest_checkpoint: the storage id of a checkpoint to resume from, e.g.
                `det.get_cluster_info().latest_checkpoint`; None starts from scratch.
            step_zero_validation: validate once before training when starting from scratch.
            test_mode: train one batch only, to check that the trial runs; local training only.
            profiling_enabled: turn on the Core API profiler while training; only on the
                master.

        Raises:
            TypeError: a period or `max_length` is not a `Batch` or `Epoch`, or the value of
                `max_length` is not an int.
            ValueError: `checkpoint_policy` is unknown, `test_mode` is asked for on the
                master, or `max_length` is missing.
        """
        checkpoint_period = _check_unit("checkpoint_period", checkpoint_period or never())
        validation_period = _check_unit("validation_period", validation_period or never())
        reporting_period = _check_unit("reporting_period", reporting_period or Batch(100))
        if checkpoint_policy not in CHECKPOINT_POLICIES:
            raise ValueError(
                f"Trainer.fit(checkpoint_policy={checkpoint_policy!r}): must be one of {', '.join(CHECKPOINT_POLICIES)}"
            )
        if test_mode and not self._local_training:
            raise ValueError(
                "Trainer.fit(test_mode=True) is only for local training, not for trials run by the master"
            )
        if self._local_training and checkpoint_policy == "best":
            # Off the master there is no experiment-wide best to compare with.
            checkpoint_policy = "all"

        config = self._context.get_experiment_config()
        searcher = config.get("searcher") or {}
        use_operations = False
        if max_length is None and not test_mode:
            if not self._local_training and (
                _searcher_operations or searcher.get("max_length") is not None
            ):
                if not _searcher_operations:
                    warnings.warn(
                        "Trainer.fit(max_length=None) falls back to the deprecated searcher.max_length; "
                        "pass max_length=Batch(...) or Epoch(...)",
                        FutureWarning,
                        stacklevel=2,
                    )
                use_operations = True
            else:
                raise ValueError(
                    "Trainer.fit: max_length is required (e.g. max_length=det.pytorch.Epoch(1))"
                )
        if max_length is not None:
            _check_unit("max_length", max_length)
            if not isinstance(max_length.value, int):
                raise TypeError(
                    f"Trainer.fit(max_length={max_length!r}): the value must be an int, not a container"
                )
            _check_searcher_length(max_length, searcher)

        info_checkpoint = self._info.latest_checkpoint if self._info is not None else None
        if not self._local_training and latest_checkpoint is None and info_checkpoint is not None:
            logger.warning(
                "Trainer.fit: this trial has a checkpoint to resume (%s) but latest_checkpoint was not "
                "passed; pass latest_checkpoint=det.get_cluster_info().latest_checkpoint to resume",
                info_checkpoint,
            )

        controller = _PyTorchTrialController(
            self._trial,
            self._context,
            checkpoint_period=checkpoint_period,
            validation_period=validation_period,
            reporting_period=reporting_period,
            checkpoint_policy=checkpoint_policy,
            latest_checkpoint=latest_checkpoint,
            step_zero_validation=step_zero_validation,
            test_mode=test_mode,
            # With searcher operations, progress is measured against the whole searcher length.
            progress_of=_length_unit(searcher, self._context)(_searcher_length(searcher))
            if use_operations
            else None,
        )
        profiling = profiling_enabled and not self._local_training
        if profiling:
            self._core.profiler.on()
        try:
            # The master's searcher decides with operations: each op's length is an absolute
            # target in the configured unit (this is how ASHA promotions work for Trial classes).
            controller.run(None if use_operations else controller.local_operations(max_length))
        finally:
            if profiling:
                self._core.profiler.off()
            controller.shutdown()


def _global_batch_size(context: PyTorchTrialContext) -> int | None:
    value = (context._hparams or {}).get("global_batch_size")
    return value if isinstance(value, int) else None


def _searcher_length(searcher: dict) -> int:
    """The whole length the searcher may train a trial to, in its unit."""
    max_length = searcher.get("max_length")
    if isinstance(max_length, dict) and len(max_length) == 1:
        return int(next(iter(max_length.values())))
    if isinstance(max_length, int):
        return max_length
    return int(searcher.get("max_time") or 0)


def _length_unit(searcher: dict, context: PyTorchTrialContext) -> Any:
    """Turn a searcher op length (a bare int in the configured unit) into a TrainUnit.

    The unit is the key of `searcher.max_length` ({epochs: 4} -> epochs); without max_length it
    is `time_metric` when that is batches or epochs; a unitless length counts batches.
    """
    max_length = searcher.get("max_length")
    if isinstance(max_length, dict) and len(max_length) == 1:
        unit = next(iter(max_length))
    elif max_length is None and searcher.get("time_metric") in ("batches", "epochs"):
        unit = searcher["time_metric"]
    else:
        unit = "batches"

    def unit_of(length: int) -> TrainUnit:
        return TrainUnit._from_values(
            **{unit: int(length)}, global_batch_size=_global_batch_size(context)
        )

    return unit_of


def _check_searcher_length(max_length: TrainUnit, searcher: dict) -> None:
    time_metric = searcher.get("time_metric")
    if time_metric == "batches" and not isinstance(max_length, Batch):
        logger.warning(
            "max_length is %r but searcher.time_metric is 'batches': use Batch(...)", max_length
        )
    elif time_metric == "epochs" and not isinstance(max_length, Epoch):
        logger.warning(
            "max_length is %r but searcher.time_metric is 'epochs': use Epoch(...)", max_length
        )
    max_time = searcher.get("max_time")
    if (
        isinstance(max_time, int)
        and time_metric in ("batches", "epochs")
        and max_length.value != max_time
    ):
        logger.warning("max_length %r differs from searcher.max_time %d", max_length, max_time)
