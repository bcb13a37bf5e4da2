"""The framework-neutral training loop (`determined._loop`) with a plain-Python adapter: the
rules every Trial API inherits — lengths, chunk ends, validation and checkpoint periods, resume,
stop requests, preemption, the checkpoint policy — without TensorFlow or torch."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from determined import _loop as loop_core
from determined import core, errors
from determined._loop import LoopMode


class CountingLoop(loop_core.TrainingLoop):
    """An adapter whose "model" is the list of batches it trained; its loss is 1 / (1 + batches)."""

    def __init__(self, core_context: Any, config: dict, **kwargs: Any) -> None:
        super().__init__(
            core_context,
            config=config,
            lengths=loop_core.Lengths(config, global_batch_size=kwargs.pop("gbs", 32)),
            **kwargs,
        )
        self.trained: list[int] = []
        self.chunks: list[tuple[int, int]] = []
        self.evaluated_at: list[int] = []
        self.saved_at: list[int] = []

    def _train_batches(self, start: int, end: int) -> tuple[int, dict]:
        self.chunks.append((start, end))
        self.trained.extend(range(start, end))
        return end, {"loss": 1.0 / (1 + end)}

    def _evaluate(self) -> dict:
        self.evaluated_at.append(self.steps)
        return {"validation_loss": 1.0 / (1 + self.steps)}

    def _checkpoint_metadata(self) -> dict:
        return {"framework": "counting"}

    def _save(self, path: pathlib.Path) -> None:
        self.saved_at.append(self.steps)
        (path / "trained.json").write_text(json.dumps(self.trained))

    def _load(self, path: pathlib.Path, metadata: dict, storage_id: str) -> int:
        self.trained = json.loads((path / "trained.json").read_text())
        return len(self.trained)


def config(**overrides: Any) -> dict:
    searcher = {"name": "single", "metric": "validation_loss", "max_length": {"batches": 10}}
    searcher.update(overrides.pop("searcher", {}))
    return {"searcher": searcher, "scheduling_unit": 100, **overrides}


@pytest.fixture
def core_context(tmp_path: pathlib.Path) -> Any:
    with core._dummy_init(checkpoint_storage=str(tmp_path / "checkpoints")) as context:
        yield context


def test_records_shorter_than_a_global_batch_train_one_batch(core_context: Any) -> None:
    loop = CountingLoop(
        core_context, config(searcher={"max_length": {"records": 10}}), mode=LoopMode.LOCAL
    )
    result = loop.run()
    assert loop.trained == [0]
    assert result.steps_completed == 1


def test_chunks_end_where_a_report_or_a_validation_is_due_and_at_the_target(
    core_context: Any,
) -> None:
    loop = CountingLoop(
        core_context,
        config(scheduling_unit=3, min_validation_period={"batches": 4}),
        mode=LoopMode.LOCAL,
    )
    result = loop.run()
    assert loop.trained == list(range(10))  # every batch once, in order
    assert [end for _, end in loop.chunks] == [3, 4, 6, 8, 9, 10]
    # Every 4 batches counted from the last validation, and at the operation's end.
    assert loop.evaluated_at == [4, 8, 10]
    assert [r.steps_completed for r in result.reports if r.group == "validation"] == [4, 8, 10]
    # One checkpoint, at the end (no checkpoint period, policy "none").
    assert loop.saved_at == [10] and len(result.checkpoints) == 1
    assert result.searcher_metrics == [pytest.approx(1 / 11)]


def test_a_resumed_loop_continues_where_the_checkpoint_left_off(core_context: Any) -> None:
    cfg = config(scheduling_unit=3, min_validation_period={"batches": 4})
    first = CountingLoop(core_context, cfg, mode=LoopMode.LOCAL)
    checkpoint = first.run().checkpoints[-1]

    longer = config(
        scheduling_unit=3, min_validation_period={"batches": 4}, searcher={"max_length": 16}
    )
    resumed = CountingLoop(core_context, longer, mode=LoopMode.LOCAL, latest_checkpoint=checkpoint)
    result = resumed.run()
    assert resumed.trained == list(range(16))
    # The chunks after the resume end where an uninterrupted run's would (report multiples of 3,
    # validation 4 after the one at 10), and the restored bookkeeping keeps the period's count.
    assert [end for _, end in resumed.chunks] == [12, 14, 15, 16]
    assert resumed.evaluated_at == [14, 16]
    assert result.steps_completed == 16


def test_a_stop_request_ends_training_with_a_checkpoint(core_context: Any) -> None:
    asked: list[int] = []

    def stop_requested() -> bool:
        asked.append(1)
        return len(asked) >= 2

    loop = CountingLoop(
        core_context,
        config(scheduling_unit=2),
        mode=LoopMode.LOCAL,
        stop_requested=stop_requested,
    )
    result = loop.run()
    assert result.stopped_early and not result.preempted
    assert loop.trained == [0, 1, 2, 3]  # two chunks of 2
    assert loop.saved_at[-1] == 4


class PreemptAfter(core.DummyPreemptContext):
    """Asks the trial to stop after `calls` questions, as the master does when it preempts."""

    def __init__(self, distributed: Any, calls: int) -> None:
        super().__init__(distributed)
        self.calls = calls

    def should_preempt(self, auto_ack: bool = True) -> bool:
        self.calls -= 1
        return self.calls < 0


class Operation(core.DummySearcherOperation):
    def __init__(self, length: int) -> None:
        super().__init__(length, is_chief=True)
        self.progress: list[float] = []
        self.completed: list[float] = []

    def _send_progress(self, length: float) -> None:
        self.progress.append(length)

    def _send_completed(self, searcher_metric: Any) -> None:
        self.completed.append(searcher_metric)


def test_preemption_checkpoints_and_leaves_the_operation_open(core_context: Any) -> None:
    core_context.preempt = PreemptAfter(core_context.distributed, calls=1)
    loop = CountingLoop(core_context, config(scheduling_unit=2), mode=LoopMode.CLUSTER)
    op = Operation(10)
    result = loop.run([op])
    assert result.preempted
    assert loop.trained == [0, 1, 2, 3]
    assert loop.saved_at == [4]
    assert op.completed == []  # the resumed trial completes it


def test_operations_complete_with_the_searcher_metric(core_context: Any) -> None:
    core_context.preempt = PreemptAfter(core_context.distributed, calls=10**6)
    loop = CountingLoop(core_context, config(), mode=LoopMode.CLUSTER)
    first, second = Operation(4), Operation(9)
    loop.run([first, second])
    assert first.completed == [pytest.approx(1 / 5)]
    assert second.completed == [pytest.approx(1 / 10)]
    assert loop.evaluated_at == [4, 9]


def test_checkpoint_policy_all_checkpoints_after_every_validation(core_context: Any) -> None:
    loop = CountingLoop(
        core_context,
        config(min_validation_period={"batches": 3}),
        mode=LoopMode.LOCAL,
        checkpoint_policy="all",
    )
    loop.run()
    assert loop.evaluated_at == [3, 6, 9, 10]
    assert loop.saved_at == [3, 6, 9, 10]


def test_a_missing_searcher_metric_names_it_and_what_was_reported(core_context: Any) -> None:
    loop = CountingLoop(core_context, config(searcher={"metric": "accuracy"}), mode=LoopMode.LOCAL)
    with pytest.raises(errors.InvalidExperimentException) as info:
        loop.run()
    assert "accuracy" in str(info.value) and "validation_loss" in str(info.value)


def test_epochs_without_a_known_epoch_size_are_an_error_naming_the_key(core_context: Any) -> None:
    loop = CountingLoop(
        core_context, config(searcher={"max_length": {"epochs": 2}}), mode=LoopMode.LOCAL
    )
    with pytest.raises(errors.InvalidExperimentException, match="searcher.max_length"):
        loop.run()
