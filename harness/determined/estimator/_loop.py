"""The Estimator adapter of the managed training loop (`determined._loop`).

The core decides lengths, chunks, validation/checkpoint periods, preemption and reports;
Estimator's own `train(max_steps=...)` and `evaluate()` do the work, called once per chunk.

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
import inspect
import logging
import pathlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from determined import _loop as loop_core
from determined import errors
from determined._loop import LoopMode, Report

logger = logging.getLogger("determined.estimator")

CHECKPOINT_INDEX = "checkpoint"
_INPUT_FN_ARGS = ("mode", "params", "config", "input_context")


@dataclasses.dataclass
class LoopResult(loop_core.LoopResult):
    """The core's result, plus the model_dir the estimator trained in."""

    model_dir: str = ""


@dataclasses.dataclass
class EstimatorSpecs:
    """What an Estimator trains: the estimator, its specs, and the SavedModels to export."""

    estimator: Any
    train_spec: Any
    eval_spec: Any
    serving_input_receiver_fns: dict = dataclasses.field(default_factory=dict)


def skipping_input_fn(input_fn: Callable[..., Any], skip: int) -> Callable[..., Any]:
    """`input_fn` repeated, with its first `skip` batches dropped, when it returns a `tf.data.Dataset`.

    Like Determined, the training dataset is repeated (`dataset.repeat()`) so that it never runs
    out: how long to train is the searcher's decision. Repeating a dataset that already repeats
    changes nothing.

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
        if isinstance(result, tf.data.Dataset):
            result = result.repeat()
            return result.skip(skip) if skip else result
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


class EstimatorLoop(loop_core.TrainingLoop):
    """The Estimator adapter of the core loop: `train(max_steps=...)` trains a chunk,
    `evaluate()` validates, and a checkpoint holds the TensorFlow checkpoint files (plus the
    SavedModels of the serving_input_receiver_fns).

    Args:
        core_context: the Core API context.
        specs: the estimator and its specs.
        config: the (expanded) experiment config.
        global_batch_size: records per batch, summed over all ranks.
        trial_seed: the graph seed when the estimator's RunConfig sets none.
        mode: CLUSTER, LOCAL or TEST.
        latest_checkpoint: a checkpoint to resume from.
        stop_requested: polled after every chunk.
        on_report: called with every report.
    """

    result_type = LoopResult
    _log = logger
    searcher_metric_hint = "they are the names estimator.evaluate() returns, e.g. loss, accuracy"

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
        lengths = loop_core.Lengths(
            config,
            global_batch_size,
            epoch_hint=" (an input_fn does not say how many records an epoch has)",
        )
        super().__init__(
            core_context,
            config=config,
            lengths=lengths,
            mode=mode,
            latest_checkpoint=latest_checkpoint,
            stop_requested=stop_requested,
            on_report=on_report,
        )
        self.specs = specs
        self.estimator = specs.estimator
        self.trial_seed = trial_seed
        self._tf_checkpoint = ""  # the TensorFlow checkpoint the Determined one being saved holds

    # --- det.estimator.RunHook callbacks -------------------------------------------------------
    def _run_hooks(self) -> list:
        """The training hooks that are `det.estimator.RunHook`s (they get Determined's callbacks)."""
        from determined.estimator._callback import RunHook

        return [hook for hook in (self.specs.train_spec.hooks or ()) if isinstance(hook, RunHook)]

    def run(self, operations: Iterable[Any] | None = None) -> loop_core.LoopResult:
        """The core loop; every RunHook's `on_trial_close()` runs when it ends, however it ends."""
        try:
            return super().run(operations)
        finally:
            for hook in self._run_hooks():
                hook.on_trial_close()

    # --- model_dir ----------------------------------------------------------------------------
    def _before_run(self) -> None:
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
        assert isinstance(self.result, LoopResult)
        self.result.model_dir = model_dir

    def cleanup(self) -> None:
        """Remove the estimator's model_dir (its checkpoints are in Determined's by now)."""
        shutil.rmtree(self.model_dir, ignore_errors=True)

    # --- the core loop's hooks ------------------------------------------------------------------
    def _global_step(self) -> int:
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(str(self.model_dir))
        return int(tf.train.load_variable(latest, "global_step")) if latest else 0

    def _train_batches(self, start: int, end: int) -> tuple[int, dict]:
        train_spec = self.specs.train_spec
        loss = _chunk_loss_hook()
        self.estimator.train(
            input_fn=skipping_input_fn(train_spec.input_fn, start),
            max_steps=end,
            hooks=[*(train_spec.hooks or ()), loss],
        )
        trained = self._global_step()
        if trained < end:
            raise errors.InvalidExperimentException(
                f"the training input_fn ran out of data at step {trained} (of {end}): the searcher says how "
                "long to train, so training input that is not a tf.data.Dataset must not end"
            )
        return trained, ({"loss": loss.mean()} if loss.mean() is not None else {})

    def _evaluate(self) -> dict:
        eval_spec = self.specs.eval_spec
        results = self.estimator.evaluate(
            input_fn=eval_spec.input_fn,
            steps=eval_spec.steps,
            hooks=eval_spec.hooks,
            name=eval_spec.name,
        )
        metrics = {name: _plain(value) for name, value in results.items() if name != "global_step"}
        return {name: value for name, value in metrics.items() if value is not None}

    def _checkpoint_metadata(self) -> dict:
        import tensorflow as tf

        latest = tf.train.latest_checkpoint(str(self.model_dir))
        if latest is None:
            raise errors.InternalException(
                f"no TensorFlow checkpoint in {self.model_dir} at step {self.steps}"
            )
        self._tf_checkpoint = pathlib.Path(latest).name  # model.ckpt-<step>
        return {
            "framework": f"tensorflow-{tf.__version__}",
            "format": "estimator",
            "tf_checkpoint": self._tf_checkpoint,
        }

    def _save(self, path: pathlib.Path) -> None:
        prefix = self._tf_checkpoint
        for file in self.model_dir.glob(f"{prefix}.*"):
            shutil.copy2(file, path / file.name)
        (path / CHECKPOINT_INDEX).write_text(
            f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n'
        )
        for name, receiver_fn in (self.specs.serving_input_receiver_fns or {}).items():
            self.estimator.export_saved_model(str(path / "saved_models" / name), receiver_fn)
        for hook in self._run_hooks():
            hook.on_checkpoint_end(str(path))

    def _load(self, path: pathlib.Path, metadata: dict, storage_id: str) -> int:
        prefix = metadata.get("tf_checkpoint") or _prefix_from_index(path / CHECKPOINT_INDEX)
        files = list(path.glob(f"{prefix}.*")) if prefix else []
        if not files:
            raise errors.InvalidExperimentException(
                f"checkpoint {storage_id} holds no Estimator checkpoint files (model.ckpt-<step>.*): "
                "it was not written by an Estimator trial"
            )
        for hook in self._run_hooks():
            hook.on_checkpoint_load(str(path))
        for file in files:
            shutil.copy2(file, self.model_dir / file.name)
        (self.model_dir / CHECKPOINT_INDEX).write_text(
            f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n'
        )
        return self._global_step()


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
    """One row per step: the training and validation metrics reported at it.

    Args:
        reports: the loop's reports.

    Returns:
        The table as text; Estimator names training and validation loss alike, so validation
        metrics are shown with a "val_" prefix.
    """
    return loop_core.format_table(reports, validation_prefix="val_")
