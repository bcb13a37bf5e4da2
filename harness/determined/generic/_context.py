"""The Generic API (seed 003): a thin, batches/epochs-flavoured alias over the Core API.

    with det.generic.init() as context:
        for op in context.training.basic_search():
            for epoch in range(start, op.epochs): ...
            op.complete(metric)

On the master the hyperparameters, seed, search operations and latest checkpoint come from the
master; off it, `init()`'s keyword arguments stand in for them.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import pathlib
from collections.abc import Iterator
from typing import Any

from determined import _info

logger = logging.getLogger("determined.generic")


class SearchOperation:
    """ "Train until `epochs` in total, then validate and `complete(metric)`."""

    def __init__(self, core_op: Any) -> None:
        self._op = core_op

    @property
    def epochs(self) -> int:
        return self._op.length

    @property
    def length(self) -> int:
        return self._op.length

    def report_progress(self, epochs_trained: float) -> None:
        self._op.report_progress(epochs_trained)

    def complete(self, metric: Any) -> None:
        self._op.report_completed(metric)


class GenericTraining:
    def __init__(self, core_context: Any, hparams: dict, trial_seed: int) -> None:
        self._core = core_context
        self.hparams = hparams
        self.trial_seed = trial_seed
        self.batches_trained: int | None = None  # last value reported; checkpoints use it

    def report_training_metrics(self, *, batches_trained: int, metrics: dict) -> None:
        self._core.train.report_training_metrics(steps_completed=batches_trained, metrics=metrics)
        self.batches_trained = batches_trained

    def report_validation_metrics(self, *, batches_trained: int, metrics: dict) -> None:
        self._core.train.report_validation_metrics(steps_completed=batches_trained, metrics=metrics)
        self.batches_trained = batches_trained

    def report_progress(self, fraction: float) -> None:
        self._core.train.report_progress(fraction)

    def basic_search(self) -> Iterator[SearchOperation]:
        for op in self._core.searcher.operations():
            yield SearchOperation(op)


class GenericCheckpoint:
    def __init__(self, core_context: Any, training: GenericTraining) -> None:
        self._core = core_context
        self._training = training
        self.last_uuid: str | None = None

    @contextlib.contextmanager
    def save_path(self, metadata: dict | None = None) -> Iterator[pathlib.Path]:
        """Yield a directory to write the checkpoint into; it is reported when the block ends."""
        metadata = dict(metadata or {})
        if "steps_completed" not in metadata:
            if self._training.batches_trained is None:
                raise RuntimeError(
                    "checkpoint.save_path(): report metrics first (its steps_completed is the last "
                    "batches_trained), or pass save_path({'steps_completed': N})"
                )
            metadata["steps_completed"] = self._training.batches_trained
        with self._core.checkpoint.store_path(metadata) as (path, uuid):
            yield path
        self.last_uuid = uuid


class GenericContext:
    def __init__(
        self, core_context: Any, hparams: dict, trial_seed: int, latest_checkpoint: str | None
    ):
        self.core = core_context
        self.distributed = core_context.distributed
        self.training = GenericTraining(core_context, hparams, trial_seed)
        self.checkpoint = GenericCheckpoint(core_context, self.training)
        self._exit_stack = contextlib.ExitStack()
        self.latest_checkpoint: pathlib.Path | None = None
        if latest_checkpoint is not None:
            self.latest_checkpoint = self._exit_stack.enter_context(
                core_context.checkpoint.restore_path(latest_checkpoint)
            )
        self._closed = False
        atexit.register(self.close)  # metrics still queued reach the master even without `with`

    def should_preempt(self) -> bool:
        return self.core.preempt.should_preempt()

    def close(self, exc_type: Any = None, exc_val: Any = None, exc_tb: Any = None) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            self._exit_stack.close()
        finally:
            self.core.__exit__(exc_type, exc_val, exc_tb)

    def __enter__(self) -> GenericContext:
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self.close(exc_type, exc_val, exc_tb)


def init(
    *,
    hparams: dict | None = None,
    trial_seed: int = 0,
    checkpoint_storage: str | dict | None = None,
    distributed: Any = None,
) -> GenericContext:
    """Start the Generic API (starts the Core API underneath; close it or use `with`).

    `hparams` and `trial_seed` are used only off the master, where nothing else supplies them.
    """
    import determined.core

    info = _info.get_cluster_info()
    core_context = determined.core.init(
        distributed=distributed, checkpoint_storage=checkpoint_storage
    )
    core_context.__enter__()
    if info is not None and info.task_type == "TRIAL":
        return GenericContext(
            core_context, info.trial.hparams, info.trial.trial_seed, info.latest_checkpoint
        )
    return GenericContext(core_context, dict(hparams or {}), trial_seed, None)
