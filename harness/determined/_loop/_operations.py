"""The loop's vocabulary: where it runs (`LoopMode`), what it trains to off the master
(`LocalOperation`, a searcher operation's stand-in), and why a chunk ended early (`ChunkEnd`)."""

from __future__ import annotations

import enum
from typing import Any


class LoopMode(str, enum.Enum):
    """Where the loop runs, which decides where its lengths come from."""

    CLUSTER = "cluster"  # a trial run by the master: searcher operations, preemption
    LOCAL = "local"  # real training in this process for searcher.max_length
    TEST = "test"  # one batch, validation, checkpoint


class ChunkEnd(enum.Enum):
    """Why training stopped before the operation's target."""

    STOPPED = "stopped"  # the user asked (context.set_stop_requested, model.stop_training)
    PREEMPTED = "preempted"  # checkpointed; the trial exits and is resumed later


class LocalOperation:
    """One "train to `batches`" operation when no master hands them out (local runs, a PyTorch
    `Trainer.fit(max_length=...)`): the same interface as a searcher operation, reporting to
    nowhere.

    Args:
        batches: the absolute number of global batches to train to.
    """

    def __init__(self, batches: int) -> None:
        self.batches = batches
        self.length = batches
        self.completed_with: Any = None

    def report_progress(self, length: float) -> None:
        """Nothing to report to (off the master)."""

    def report_completed(self, searcher_metric: Any) -> None:
        """Keep the searcher metric (for the local summary)."""
        self.completed_with = searcher_metric
