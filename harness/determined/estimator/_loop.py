"""The managed Estimator loop: searcher lengths, validation, checkpoints, preemption, resume.

Estimator's own `train(max_steps=...)` and `evaluate()` do the work, called once per chunk of
steps. A chunk ends at the next multiple of `scheduling_unit`, the next validation or checkpoint
boundary, or the end of the searcher operation, so chunk boundaries depend only on the global step.

Every `train()` call builds a new graph and restores the model_dir's latest checkpoint, and its
`input_fn` starts the data over; the loop therefore skips the batches already trained on
(`dataset.skip(global_step)`), and the graph seed is the same in every call, so a chunk, a resumed
trial and an uninterrupted one see the same stream of batches.

The estimator trains in a model_dir owned by the loop (the user's `model_dir` is replaced: a trial
starts from nothing or from its Determined checkpoint, never from files left in a directory).
A Determined checkpoint holds the latest TensorFlow checkpoint files (`model.ckpt-<step>.*` and a
`checkpoint` index) plus one SavedModel per serving_input_receiver_fn, under `saved_models/<name>`.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import logging
import pathlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from determined import errors
from determined.common import expconf

logger = logging.getLogger("determined.estimator")

CHECKPOINT_INDEX = "checkpoint"
_INPUT_FN_ARGS = ("mode", "params", "config", "input_context")


class LoopMode(str, enum.Enum):
    CLUSTER = "cluster"  # a trial run by the master: searcher operations, preemption
    LOCAL = "local"  # real training in this process for searcher.max_length
    TEST = "test"  # one batch, validation, checkpoint


@dataclasses.dataclass
class Report:
    group: str  # "training" or "validation"
    steps_completed: int
    metrics: dict


@dataclasses.dataclass
class LoopResult:
    steps_completed: int
    reports: list[Report]
    checkpoints: list[str]
    preempted: bool = False
    stopped_early: bool = False
    model_dir: str = ""
    last_validation: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class EstimatorSpecs:
    estimator: Any
    train_spec: Any
    eval_spec: Any
    serving_input_receiver_fns: dict = dataclasses.field(default_factory=dict)


class _LocalOperation:
    """One "train to `length` batches" operation when no master hands them out."""

    def __init__(self, length: int) -> None:
        self.length = length

    def report_progress(self, length: float) -> None:
        pass

    def report_completed(self, searcher_metric: Any) -> None:
        pass


def _batches(config: dict, global_batch_size: int, length: Any, where: str) -> int:
    try:
        return expconf.length_to_batches(
            length,
            global_batch_size=global_batch_size,
            records_per_epoch=int(config.get("records_per_epoch") or 0),
            where=where,
        )
    except expconf.LengthError as exc:
        hint = (
            " (an input_fn does not say how many records an epoch has)"
            if "epochs" in str(exc)
            else ""
        )
        raise errors.InvalidExperimentException(f"{exc}{hint}") from None


def _to_searcher_units(config: dict, global_batch_size: int, steps: int) -> float:
    max_length = (config.get("searcher") or {}).get("max_length")
    unit = expconf.length_of(max_length)[0] if max_length is not None else None
    return expconf.batches_to_units(
        unit,
        steps,
        global_batch_size=global_batch_size,
        records_per_epoch=int(config.get("records_per_epoch") or 1),
    )


def skipping_input_fn(input_fn: Callable[..., Any], skip: int) -> Callable[..., Any]:
    """`input_fn` with its first `skip` batches dropped when it returns a `tf.data.Dataset`.

    Estimator passes `mode`/`params`/`config`/`input_context` only to an input_fn naming them, so
    the wrapper names all four and forwards those the user's input_fn takes.
    """
    parameters: Mapping[str, Any]
    try:
        parameters = inspect.signature(input_fn).parameters
    except (TypeError, ValueError):
        parameters = {}
    wanted = [name for name in _INPUT_FN_ARGS if name in parameters]

    def input_fn_from_step(
        mode: Any = None, params: Any = None, config: Any = None, input_context: Any = None
    ) -> Any:
        import tensorflow as tf

        given = {"mode": mode, "params": params, "config": config, "input_context": input_context}
        result = input_fn(**{name: given[name] for name in wanted})
        if skip and isinstance(result, tf.data.Dataset):
            return result.skip(skip)
        if skip:
            logger.warning(
                "the training input_fn returned %s, not a tf.data.Dataset: it starts over at every chunk of "
                "training instead of continuing at step %d",
                type(result).__name__,
                skip,
            )
        return result

    return input_fn_from_step


def _chunk_loss_hook() -> Any:
    """A SessionRunHook averaging the training loss (Estimator adds it to GraphKeys.LOSSES last)."""
    import tensorflow as tf

    class ChunkLoss(tf.estimator.SessionRunHook):
        def __init__(self) -> None:
            self.total, self.count, self._loss = 0.0, 0, None

        def begin(self) -> None:
            losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOSSES)
            self._loss = losses[-1] if losses else None

        def before_run(self, run_context: Any) -> Any:
            return tf.estimator.SessionRunArgs(self._loss) if self._loss is not None else None

        def after_run(self, run_context: Any, run_values: Any) -> None:
            if self._loss is not None and run_values.results is not None:
                self.total += float(run_values.results)
                self.count += 1

        def mean(self) -> float | None:
            return self.total / self.count if self.count else None

    return ChunkLoss()


class EstimatorLoop:
    def __init__(
        self,
        core_context: Any,
        specs: EstimatorSpecs,
        *,
        config: dict,
        global_batch_size: int,
        trial_seed: int,
        mode: LoopMode,
        latest_checkpoint: str | None = None,
        stop_requested: Callable[[], bool] = lambda: False,
        on_report: Callable[[Report], None] | None = None,
    ) -> None:
        self.core = core_context
        self.specs = specs
        self.estimator = specs.estimator
        self.config = config
        self.global_batch_size = global_batch_size
        self.trial_seed = trial_seed
        self.mode = LoopMode(mode)
        self.scheduling_unit = (
            1 if self.mode is LoopMode.TEST else max(1, int(config.get("scheduling_unit") or 100))
        )
        self.validation_period = self._period("min_validation_period")
        self.checkpoint_period = self._period("min_checkpoint_period")
        self.searcher_metric = expconf.searcher_metric(config)
        self.latest_checkpoint = latest_checkpoint
        self.stop_requested = stop_requested
        self.on_report = on_report
        self.steps = 0
        self.last_validation = 0
        self.last_checkpoint = 0
        self.last_validation_metrics: dict | None = None
        self.result = LoopResult(0, [], [])

    def _period(self, key: str) -> int:
        length = self.config.get(key)
        return 0 if length is None else _batches(self.config, self.global_batch_size, length, key)

    # --- the loop -----------------------------------------------------------------------------
    def _operations(self) -> Iterable[Any]:
        if self.mode is LoopMode.CLUSTER:
            return self.core.searcher.operations()
        if self.mode is LoopMode.TEST:
            return [_LocalOperation(1)]
        max_length = (self.config.get("searcher") or {}).get("max_length")
        if max_length is None:
            raise errors.InvalidExperimentException(
                "searcher.max_length is required to train locally (e.g. max_length: {batches: 500})"
            )
        return [
            _LocalOperation(
                _batches(self.config, self.global_batch_size, max_length, "searcher.max_length")
            )
        ]

    def _op_target(self, op: Any) -> int:
        if self.mode is LoopMode.CLUSTER:
            max_length = (self.config.get("searcher") or {}).get("max_length") or {"batches": 0}
            unit = expconf.length_of(max_length)[0]
            return _batches(
                self.config,
                self.global_batch_size,
                {unit or "batches": int(op.length)},
                "searcher operation",
            )
        return int(op.length)

    def run(self) -> LoopResult:
        self._adopt_model_dir()
        if self.latest_checkpoint:
            self._restore(self.latest_checkpoint)
        for op in self._operations():
            target = self._op_target(op)
            while self.steps < target:
                self._train_until(self._chunk_end(target))
                if (
                    self.validation_period
                    and self.steps - self.last_validation >= self.validation_period
                ):
                    self._validate()
                if (
                    self.checkpoint_period
                    and self.steps - self.last_checkpoint >= self.checkpoint_period
                ):
                    self._checkpoint()
                if self._user_stopped():
                    break
                if self.mode is LoopMode.CLUSTER and self.core.preempt.should_preempt():
                    logger.info("preempted at step %d: checkpointing and exiting", self.steps)
                    self._checkpoint_if_needed()
                    self.result.preempted = True
                    return self._finish()
                if self.mode is LoopMode.CLUSTER:
                    op.report_progress(
                        min(
                            float(op.length),
                            _to_searcher_units(self.config, self.global_batch_size, self.steps),
                        )
                    )
            if self.last_validation != self.steps or self.last_validation_metrics is None:
                self._validate()
            assert self.last_validation_metrics is not None
            searcher_value = self._searcher_value(self.last_validation_metrics)
            if self.mode is LoopMode.CLUSTER:
                op.report_progress(op.length)
            op.report_completed(searcher_value)
            if self.result.stopped_early:
                break
        self._checkpoint_if_needed()
        if self.result.stopped_early and self.mode is LoopMode.CLUSTER:
            from determined.core import EarlyExitReason

            self.core.train.report_early_exit(EarlyExitReason.USER_REQUESTED_STOP)
        return self._finish()

    def _finish(self) -> LoopResult:
        self.result.steps_completed = self.steps
        self.result.last_validation = dict(self.last_validation_metrics or {})
        return self.result

    def _chunk_end(self, target: int) -> int:
        end = min(target, (self.steps // self.scheduling_unit + 1) * self.scheduling_unit)
        if self.validation_period:
            end = min(end, self.last_validation + self.validation_period)
        if self.checkpoint_period:
            end = min(end, self.last_checkpoint + self.checkpoint_period)
        return max(end, self.steps + 1)

    def _user_stopped(self) -> bool:
        if self.stop_requested():
            logger.info(
                "training stop requested at step %d (context.set_stop_requested)", self.steps
            )
            self.result.stopped_early = True
        return self.result.stopped_early

    # --- model_dir ----------------------------------------------------------------------------
    def _adopt_model_dir(self) -> None:
        """Point the estimator at a fresh directory of ours, with the graph seeded by the trial seed.

        Estimator keeps both in private attributes (`_model_dir`, `_config`); every Estimator,
        canned ones included, reads them from there when it builds a graph.
        """
        model_dir = tempfile.mkdtemp(prefix="det-estimator-")
        run_config = self.estimator._config
        seed = (
            run_config.tf_random_seed if run_config.tf_random_seed is not None else self.trial_seed
        )
        # Without the graph def: every train() call would write graph.pbtxt and a .meta file again
        # (text-format protobuf); restoring and exporting need only the variables.
        self.estimator._config = run_config.replace(
            model_dir=model_dir, tf_random_seed=seed, checkpoint_save_graph_def=False
        )
        self.estimator._model_dir = model_dir
        self.model_dir = pathlib.Path(model_dir)
        self.result.model_dir = model_dir

    def cleanup(self) -> None:
        shutil.rmtree(self.model_dir, ignore_errors=True)

    # --- steps --------------------------------------------------------------------------------
    def _global_step(self) -> int:
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(str(self.model_dir))
        return int(tf.train.load_variable(latest, "global_step")) if latest else 0

    def _train_until(self, end: int) -> None:
        train_spec = self.specs.train_spec
        loss = _chunk_loss_hook()
        self.estimator.train(
            input_fn=skipping_input_fn(train_spec.input_fn, self.steps),
            max_steps=end,
            hooks=[*(train_spec.hooks or ()), loss],
        )
        trained = self._global_step()
        if trained < end:
            raise errors.InvalidExperimentException(
                f"the training input_fn ran out of data at step {trained} (of {end}): the searcher says how "
                "long to train, so the training dataset must repeat (`dataset.repeat()`)"
            )
        self.steps = trained
        metrics = {"loss": loss.mean()} if loss.mean() is not None else {}
        self._report(Report("training", self.steps, metrics))
        self.core.train.report_training_metrics(steps_completed=self.steps, metrics=metrics)

    def _validate(self) -> dict:
        eval_spec = self.specs.eval_spec
        results = self.estimator.evaluate(
            input_fn=eval_spec.input_fn,
            steps=eval_spec.steps,
            hooks=eval_spec.hooks,
            name=eval_spec.name,
        )
        metrics = {name: _plain(value) for name, value in results.items() if name != "global_step"}
        metrics = {name: value for name, value in metrics.items() if value is not None}
        self.last_validation, self.last_validation_metrics = self.steps, metrics
        self._report(Report("validation", self.steps, metrics))
        self.core.train.report_validation_metrics(steps_completed=self.steps, metrics=metrics)
        return metrics

    def _searcher_value(self, metrics: dict) -> float:
        name = self.searcher_metric
        if name is None:
            return float(metrics.get("loss", next(iter(metrics.values()), 0.0)))
        if name in metrics:
            return float(metrics[name])
        raise errors.InvalidExperimentException(
            f"searcher.metric: {name!r} is not among the validation metrics ({', '.join(sorted(metrics))}); "
            "name one of them (they are the names estimator.evaluate() returns, e.g. loss, accuracy)"
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
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(str(self.model_dir))
        if latest is None:
            raise errors.InternalException(
                f"no TensorFlow checkpoint in {self.model_dir} at step {self.steps}"
            )
        prefix = pathlib.Path(latest).name  # model.ckpt-<step>
        metadata = {
            "steps_completed": self.steps,
            "framework": f"tensorflow-{tf.__version__}",
            "format": "estimator",
            "tf_checkpoint": prefix,
            "last_validation_steps": self.last_validation,
            "last_checkpoint_steps": self.steps,
        }
        with self.core.checkpoint.store_path(metadata) as (path, storage_id):
            path = pathlib.Path(path)
            for file in self.model_dir.glob(f"{prefix}.*"):
                shutil.copy2(file, path / file.name)
            (path / CHECKPOINT_INDEX).write_text(
                f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n'
            )
            for name, receiver_fn in (self.specs.serving_input_receiver_fns or {}).items():
                self.estimator.export_saved_model(str(path / "saved_models" / name), receiver_fn)
        self.last_checkpoint = self.steps
        self.result.checkpoints.append(storage_id)
        logger.info("checkpoint %s at step %d", storage_id, self.steps)
        return storage_id

    def _restore(self, storage_id: str) -> None:
        with self.core.checkpoint.restore_path(storage_id) as path:
            path = pathlib.Path(path)
            metadata_file = path / "metadata.json"
            metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
            prefix = metadata.get("tf_checkpoint") or _prefix_from_index(path / CHECKPOINT_INDEX)
            files = list(path.glob(f"{prefix}.*")) if prefix else []
            if not files:
                raise errors.InvalidExperimentException(
                    f"checkpoint {storage_id} holds no Estimator checkpoint files (model.ckpt-<step>.*): "
                    "it was not written by an Estimator trial"
                )
            for file in files:
                shutil.copy2(file, self.model_dir / file.name)
            (self.model_dir / CHECKPOINT_INDEX).write_text(
                f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n'
            )
        self.steps = self._global_step()
        self.last_validation = int(metadata.get("last_validation_steps", self.steps))
        self.last_checkpoint = int(metadata.get("last_checkpoint_steps", self.steps))
        self.result.checkpoints.append(storage_id)
        logger.info("resumed from checkpoint %s at step %d", storage_id, self.steps)


def _prefix_from_index(index: pathlib.Path) -> str | None:
    if not index.exists():
        return None
    match = re.search(r'model_checkpoint_path: "([^"]+)"', index.read_text())
    return pathlib.Path(match.group(1)).name if match else None


def _plain(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None  # non-scalar evaluation outputs are not metrics


def format_table(reports: list[Report]) -> str:
    """One row per step: the training and validation metrics reported at it."""
    rows: dict[int, dict] = {}
    names: list[str] = []
    for report in reports:
        # Estimator names training and validation loss alike: the table tells them apart.
        shown = {
            (f"val_{n}" if report.group == "validation" else n): v
            for n, v in report.metrics.items()
        }
        rows.setdefault(report.steps_completed, {}).update(shown)
        names.extend(name for name in shown if name not in names)
    lines = [["batches", *names]]
    for steps in sorted(rows):
        lines.append(
            [str(steps)] + [f"{rows[steps][n]:.4f}" if n in rows[steps] else "" for n in names]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = [
        "  ".join(cell.rjust(width) for cell, width in zip(line, widths, strict=False))
        for line in lines
    ]
    out.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(out)
