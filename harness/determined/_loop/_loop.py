"""The managed training loop every Trial API shares: searcher operations, chunks, validation and
checkpoint periods, preemption, stop requests, reports and checkpoints.

`TrainingLoop.run()` asks the searcher (or, off the master, one `LocalOperation`) how far to
train, trains there chunk by chunk (`ChunkPlan`), validates, reports the searcher metric, and
checkpoints where the periods, the checkpoint policy, preemption or the end say so. What a chunk
of training, a validation, a save and a restore are is the framework's business: an adapter
(`determined.keras`, `determined.estimator`, `determined.pytorch`) subclasses `TrainingLoop` and
implements

* `_train_batches(start, end)` — train global batches `[start, end)`, return the training
  metrics (or override `_train_chunks` to train several chunks per framework call, calling
  `_end_chunk` after each, as Keras does inside one `fit`);
* `_evaluate()` — validation metrics;
* `_checkpoint_metadata()` / `_save(path)` — what a checkpoint holds;
* `_load(path, metadata, storage_id)` — restore it, return the batches it had trained;

and may refine the hooks (`_stop_requested`, `_validated`, `_after_chunk`, ...).
"""

from __future__ import annotations

import abc
import json
import logging
import pathlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from determined._loop._lengths import Lengths
from determined._loop._operations import ChunkEnd, LocalOperation, LoopMode
from determined._loop._periods import ChunkPlan, Every, every
from determined._loop._reports import LoopResult, Report
from determined._loop._searcher_metric import CheckpointPolicy, is_better, searcher_metric_value
from determined.common import expconf

logger = logging.getLogger("determined.loop")

# The least time between two progress reports between chunks on the master: each is a
# synchronous POST (~1-2 ms of the training thread), and a progress bar needs no more.
PROGRESS_INTERVAL_S = 1.0


class TrainingLoop(abc.ABC):
    """The framework-neutral loop; see the module docstring for what a subclass implements.

    Args:
        core_context: the Core API context (a dummy one off the master).
        config: the (expanded) experiment config.
        lengths: converts this trial's lengths to batches.
        mode: CLUSTER (searcher operations, preemption), LOCAL or TEST.
        plan: where chunks end; by default the config's scheduling_unit (1 in TEST mode),
            min_validation_period and min_checkpoint_period, the latter two counted since the
            last validation/checkpoint.
        latest_checkpoint: a checkpoint to resume from.
        stop_requested: polled after every chunk (e.g. `context.get_stop_requested`).
        on_report: called with every `Report` (the local runs print validations).
        checkpoint_policy: "none" (only periods, preemption and the end checkpoint), "all"
            (also after every validation) or "best" (after a validation better than the
            experiment's best so far).
    """

    result_type: type[LoopResult] = LoopResult
    # The adapter's logger, so a trial's log lines name its framework.
    _log = logger
    # The validation metric the searcher gets when the config names none.
    default_searcher_metric = "loss"
    # Names a configured searcher metric may have among the validation metrics ("{}": as is).
    searcher_metric_forms: tuple[str, ...] = ("{}",)
    # How validation metrics are named in this framework (ends the missing-metric error).
    searcher_metric_hint = ""
    # After a stop request: False checkpoints and returns at once, leaving the operation open
    # (PyTorch); True validates, completes the operation, checkpoints, then exits.
    stop_completes_operation = True
    # Checkpoint whenever an operation completes (so an ASHA promotion resumes from its end),
    # not only at periods and when the trial exits.
    checkpoint_each_operation = False
    # True: every rank enters `store_path(shard=True)` (PyTorch); False: only the chief saves.
    checkpoint_shard = False

    def __init__(
        self,
        core_context: Any,
        *,
        config: dict,
        lengths: Lengths,
        mode: LoopMode,
        plan: ChunkPlan | None = None,
        latest_checkpoint: str | None = None,
        stop_requested: Callable[[], bool] = lambda: False,
        on_report: Callable[[Report], None] | None = None,
        checkpoint_policy: str = CheckpointPolicy.NONE,
    ) -> None:
        self.core = core_context
        self.config = config
        self.lengths = lengths
        self.mode = LoopMode(mode)
        self.plan = plan if plan is not None else self.config_plan(config, lengths, self.mode)
        self.searcher_metric = expconf.searcher_metric(config) or None
        self.smaller_is_better = bool((config.get("searcher") or {}).get("smaller_is_better", True))
        self.checkpoint_policy = CheckpointPolicy(checkpoint_policy)
        self.latest_checkpoint = latest_checkpoint
        self.stop_requested = stop_requested
        self.on_report = on_report
        distributed = getattr(core_context, "distributed", None)
        self.is_chief = distributed is None or distributed.rank == 0
        self.steps = 0
        self.last_validation = 0
        self.last_checkpoint = 0
        self.last_validation_metrics: dict | None = None
        self.result = self.result_type(0, [], [])
        self._last_progress_report = -float("inf")

    @staticmethod
    def config_plan(config: dict, lengths: Lengths, mode: LoopMode) -> ChunkPlan:
        """The chunks the experiment config asks for (Keras, Estimator and legacy Trial classes).

        Args:
            config: the experiment config (scheduling_unit, min_validation_period,
                min_checkpoint_period).
            lengths: converts those periods to batches.
            mode: TEST mode reports after every batch.

        Returns:
            The `ChunkPlan`.
        """
        unit = 1 if mode is LoopMode.TEST else max(1, int(config.get("scheduling_unit") or 100))
        return ChunkPlan(
            report=Every(unit),
            validation=every(lengths.of("min_validation_period"), since_last=True),
            checkpoint=every(lengths.of("min_checkpoint_period"), since_last=True),
        )

    # --- what an adapter implements -----------------------------------------------------------
    def _train_batches(self, start: int, end: int) -> tuple[int, dict]:
        """Train global batches `[start, end)`.

        Args:
            start: batches trained so far.
            end: the batch count to reach.

        Returns:
            (the batch count reached, usually `end`; the chunk's training metrics).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement _train_batches")

    @abc.abstractmethod
    def _evaluate(self) -> dict:
        """Run validation; return its metrics (names -> numbers)."""

    @abc.abstractmethod
    def _checkpoint_metadata(self) -> dict:
        """The framework's entries of the checkpoint's metadata (e.g. framework, format)."""

    @abc.abstractmethod
    def _save(self, path: pathlib.Path) -> None:
        """Write the model (and whatever resuming needs) into the checkpoint directory `path`."""

    @abc.abstractmethod
    def _load(self, path: pathlib.Path, metadata: dict, storage_id: str) -> int:
        """Restore from the checkpoint directory `path`; return the batches it had trained."""

    # --- hooks --------------------------------------------------------------------------------
    def _before_run(self) -> None:
        """Called once before restoring and training."""
        return None  # nothing by default

    def _start(self) -> None:
        """Called once after restoring, before the first operation."""
        return None  # nothing by default

    def _after_validation(self, metrics: dict) -> None:
        """After a validation was reported, before the checkpoint policy acts on it."""
        return None  # nothing by default

    def _agree(self, decision: bool) -> bool:
        """The chief's `decision`, on every rank (single-process adapters: as is)."""
        return decision

    def _saved(self, storage_id: str) -> None:
        """After a checkpoint was stored and reported."""
        return None  # nothing by default

    def _loop_metadata(self) -> dict:
        """The loop's bookkeeping in a checkpoint's metadata, read back by `_restore_bookkeeping`."""
        return {"last_validation_steps": self.last_validation, "last_checkpoint_steps": self.steps}

    def _restore_bookkeeping(self, metadata: dict) -> None:
        """Where validation and checkpoint periods stood, from a restored checkpoint."""
        self.last_validation = int(metadata.get("last_validation_steps", self.steps))
        self.last_checkpoint = int(metadata.get("last_checkpoint_steps", self.steps))

    def _stop_requested(self) -> bool:
        """Has the user asked to stop training?"""
        return bool(self.stop_requested())

    def _validated(self, metrics: dict | None) -> None:
        """After a chunk's validation step: `metrics` if it validated, else None."""
        return None  # nothing by default

    def _after_chunk(self) -> None:
        """After a chunk's reports, validation and checkpoint, before the stop checks."""
        return None  # nothing by default

    def _report_training_metrics(self, steps: int, metrics: dict) -> None:
        self.core.train.report_training_metrics(steps_completed=steps, metrics=metrics)

    def _report_validation_metrics(self, steps: int, metrics: dict) -> None:
        self.core.train.report_validation_metrics(steps_completed=steps, metrics=metrics)

    def _report_progress(self, op: Any, target: int, *, done: bool = False) -> None:
        """Progress towards `op` on the master, at most every PROGRESS_INTERVAL_S between chunks."""
        if self.mode is not LoopMode.CLUSTER or not self.is_chief:
            return
        if done:
            op.report_progress(op.length)
            return
        now = time.monotonic()
        if now - self._last_progress_report < PROGRESS_INTERVAL_S:
            return
        self._last_progress_report = now
        so_far = self.lengths.to_units(self.lengths.searcher_unit(), self.steps)
        op.report_progress(min(float(op.length), so_far))

    # --- the loop -----------------------------------------------------------------------------
    def operations(self) -> Iterable[Any]:
        """What to train to: the searcher's operations on the master, else one local operation
        (`searcher.max_length`, or 1 batch in TEST mode)."""
        if self.mode is LoopMode.CLUSTER:
            return self.core.searcher.operations()
        return [LocalOperation(1 if self.mode is LoopMode.TEST else self.lengths.max_length())]

    def target_of(self, op: Any) -> int:
        """An operation's length in batches (a searcher operation's is in the searcher's unit)."""
        if isinstance(op, LocalOperation):
            return op.batches
        return self.lengths.operation(op.length)

    def run(self, operations: Iterable[Any] | None = None) -> LoopResult:
        """Train to each operation's length, validate, and report the searcher metric.

        Args:
            operations: what to train to; `operations()` when None.

        Returns:
            What happened (`LoopResult`); `preempted` means the trial must exit now (it
            checkpointed first), `stopped_early` that the user stopped it.
        """
        self._before_run()
        if self.latest_checkpoint:
            self._restore(self.latest_checkpoint)
        self._start()
        for op in self.operations() if operations is None else operations:
            outcome = self.train_to(op, self.target_of(op))
            if outcome is ChunkEnd.PREEMPTED or (
                outcome is ChunkEnd.STOPPED and not self.stop_completes_operation
            ):
                return self._finish()
            self.complete(op)
            if self.result.stopped_early:
                break
        self._checkpoint_if_needed()
        self._report_early_exit()
        return self._finish()

    def train_to(self, op: Any, target: int) -> ChunkEnd | None:
        """Train chunk by chunk until `target` batches; None when reached."""
        while self.steps < target:
            outcome = self._train_chunks(op, target)
            if outcome is not None:
                return outcome
        return None

    def complete(self, op: Any) -> None:
        """The operation's target is reached: validate unless current, report the metric."""
        metrics = self.current_validation()
        if metrics is None:
            metrics = self._validate()
        value = self.searcher_value(metrics)
        self.result.searcher_metrics.append(value)
        if self.checkpoint_each_operation:
            self._checkpoint_if_needed()
        self._report_progress(op, 0, done=True)
        if self.is_chief:
            op.report_completed(value)

    def _finish(self) -> LoopResult:
        self.result.steps_completed = self.steps
        self.result.last_validation = dict(self.last_validation_metrics or {})
        return self.result

    def _report_early_exit(self) -> None:
        if self.result.stopped_early and self.mode is LoopMode.CLUSTER and self.is_chief:
            from determined.core import EarlyExitReason

            self.core.train.report_early_exit(EarlyExitReason.USER_REQUESTED_STOP)

    def chunk_end(self, target: int) -> int:
        """Where the next chunk ends (see `ChunkPlan.chunk_end`)."""
        return self.plan.chunk_end(self.steps, self.last_validation, self.last_checkpoint, target)

    def _train_chunks(self, op: Any, target: int) -> ChunkEnd | None:
        """Train one chunk and do what its end asks for."""
        end, metrics = self._train_batches(self.steps, self.chunk_end(target))
        return self._end_chunk(op, target, end, metrics)

    def _end_chunk(self, op: Any, target: int, end: int, metrics: dict) -> ChunkEnd | None:
        """After a chunk that trained to `end`: report its training metrics, validate and
        checkpoint where due, then check for a stop request and preemption.

        Returns:
            None to go on, or why training stops.
        """
        self.steps = end
        self._report(Report("training", end, metrics))
        if self.is_chief:
            self._report_training_metrics(end, metrics)
        validated = None
        # The operation's own validation at its target happens here, so that whatever follows
        # the chunk (Keras callbacks) sees it.
        if self.plan.validation.due(self.steps, self.last_validation) or self.steps == target:
            if self.current_validation() is None:
                validated = self._validate()
        self._validated(validated)
        if self.plan.checkpoint.due(self.steps, self.last_checkpoint):
            self._checkpoint_if_needed()
        self._after_chunk()
        if self._user_stopped():
            if not self.stop_completes_operation:
                self._checkpoint_if_needed()
                self._report_early_exit()
            return ChunkEnd.STOPPED
        if self.mode is LoopMode.CLUSTER and self.core.preempt.should_preempt():
            self._log.info("preempted at step %d: checkpointing and exiting", self.steps)
            self._checkpoint_if_needed()
            self.result.preempted = True
            return ChunkEnd.PREEMPTED
        self._report_progress(op, target)
        return None

    def _user_stopped(self) -> bool:
        if not self.result.stopped_early and self._stop_requested():
            self._log.info("training stop requested at step %d", self.steps)
            self.result.stopped_early = True
        return self.result.stopped_early

    # --- validation ---------------------------------------------------------------------------
    def current_validation(self) -> dict | None:
        """The last validation's metrics if it was at the current batch count, else None."""
        if self.last_validation == self.steps and self.last_validation_metrics is not None:
            return self.last_validation_metrics
        return None

    def _validate(self) -> dict:
        """Validate, report the metrics, and checkpoint if the checkpoint policy says so."""
        metrics = self._evaluate()
        best_before = None
        if self.is_chief and self.checkpoint_policy is CheckpointPolicy.BEST:
            # Asked before reporting: the master must not count this validation yet.
            best_before = self.core.train.get_experiment_best_validation()
        self.last_validation, self.last_validation_metrics = self.steps, metrics
        self._report(Report("validation", self.steps, metrics))
        if self.is_chief:
            self._report_validation_metrics(self.steps, metrics)
        self._after_validation(metrics)
        if self._agree(self._policy_wants_checkpoint(metrics, best_before)):
            self._checkpoint_if_needed()
        return metrics

    def _policy_wants_checkpoint(self, metrics: dict, best_before: float | None) -> bool:
        if self.checkpoint_policy is CheckpointPolicy.ALL:
            return True
        if (
            self.checkpoint_policy is CheckpointPolicy.BEST
            and self.is_chief
            and self.searcher_metric is not None
        ):
            return is_better(self.searcher_value(metrics), best_before, self.smaller_is_better)
        return False

    def searcher_value(self, metrics: dict) -> float:
        """The searcher metric among validation `metrics`.

        Raises:
            errors.InvalidExperimentException: the configured metric is not among them (the
                message names it and the metrics reported).
        """
        return searcher_metric_value(
            metrics,
            self.searcher_metric,
            default=self.default_searcher_metric,
            forms=self.searcher_metric_forms,
            hint=self.searcher_metric_hint,
        )

    def _report(self, report: Report) -> None:
        self.result.reports.append(report)
        if self.on_report is not None:
            self.on_report(report)

    # --- checkpoints --------------------------------------------------------------------------
    def _checkpoint_if_needed(self) -> None:
        if self.last_checkpoint != self.steps or not self.result.checkpoints:
            self._checkpoint()

    def _checkpoint(self) -> str:
        metadata = {
            "steps_completed": self.steps,
            **self._checkpoint_metadata(),
            **self._loop_metadata(),
        }
        with self.core.checkpoint.store_path(metadata, shard=self.checkpoint_shard) as (
            path,
            storage_id,
        ):
            self._save(pathlib.Path(path))
        self.last_checkpoint = self.steps
        self.result.checkpoints.append(storage_id)
        self._saved(storage_id)
        self._log.info("checkpoint %s at step %d", storage_id, self.steps)
        return storage_id

    def _restore(self, storage_id: str) -> None:
        with self.core.checkpoint.restore_path(storage_id) as path:
            path = pathlib.Path(path)
            metadata_file = path / "metadata.json"
            metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
            self.steps = self._load(path, metadata, storage_id)
        self._restore_bookkeeping(metadata)
        self.result.checkpoints.append(storage_id)
        self._log.info("resumed from checkpoint %s at step %d", storage_id, self.steps)
