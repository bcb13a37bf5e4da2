"""When to report, validate and checkpoint, and where a chunk of training therefore ends.

Everything here counts global batches and is pure (no framework, no I/O): a `Period` says
whether it is due after `steps` batches and the least batch count at which it can next be due,
and `ChunkPlan` cuts training into chunks that end exactly where some period can be due or the
target is reached. Chunk ends depend only on the counts, so a resumed trial cuts where an
uninterrupted one does.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import sys

NEVER = sys.maxsize


class Period:
    """A rule for "every so often"; subclassed by `Every`, `At` and `Never`."""

    def due(self, steps: int, last: int) -> bool:
        """Is it due after `steps` batches, when it last happened at `last`?"""
        raise NotImplementedError

    def next_due(self, steps: int, last: int) -> int:
        """The least batch count > `steps` at which it can be due (`NEVER`: not again)."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Never(Period):
    """Not a period at all (e.g. `min_checkpoint_period` unset)."""

    def due(self, steps: int, last: int) -> bool:
        return False

    def next_due(self, steps: int, last: int) -> int:
        return NEVER


@dataclasses.dataclass(frozen=True)
class Every(Period):
    """Every `batches` batches; `batches <= 0` means after every batch.

    `since_last=True` counts from when it last happened (the config's min_validation_period /
    min_checkpoint_period in Keras and Estimator: a validation forced by the end of a searcher
    operation restarts the count); False counts from 0 (PyTorch's Trainer: multiples of n).
    """

    batches: int
    since_last: bool = False

    def due(self, steps: int, last: int) -> bool:
        if self.batches <= 0:
            return True
        if self.since_last:
            return steps - last >= self.batches
        return steps > 0 and steps % self.batches == 0

    def next_due(self, steps: int, last: int) -> int:
        if self.batches <= 0:
            return steps + 1
        if self.since_last:
            return max(last + self.batches, steps + 1)
        return (steps // self.batches + 1) * self.batches


@dataclasses.dataclass(frozen=True)
class At(Period):
    """At exactly these batch counts (a container of ints), or, with `epoch_len`, at the ends
    of these epochs (counting epochs from 1)."""

    counts: collections.abc.Container
    epoch_len: int = 0

    def due(self, steps: int, last: int) -> bool:
        if self.epoch_len:
            return steps % self.epoch_len == 0 and steps // self.epoch_len in self.counts
        return steps in self.counts

    def next_due(self, steps: int, last: int) -> int:
        # A container may only support `in`: look at every candidate count.
        return (steps // self.epoch_len + 1) * self.epoch_len if self.epoch_len else steps + 1


def every(batches: int, *, since_last: bool = False) -> Period:
    """`Every(batches)`, or `Never()` for 0 and less when counting since the last time (a config
    period of 0 means "no period")."""
    if since_last and batches <= 0:
        return Never()
    return Every(batches, since_last=since_last)


@dataclasses.dataclass(frozen=True)
class ChunkPlan:
    """The periods of one training run; `chunk_end` says where the next chunk ends.

    Args:
        report: when training metrics are reported (the config's scheduling_unit, PyTorch's
            reporting_period); a chunk never spans one of its boundaries.
        validation: when to validate.
        checkpoint: when to checkpoint.
    """

    report: Period
    validation: Period = Never()
    checkpoint: Period = Never()

    def chunk_end(self, steps: int, last_validation: int, last_checkpoint: int, target: int) -> int:
        """Where the chunk starting at `steps` ends: the first batch count (at least one batch
        further) at which the target is reached or some period is due."""
        end = steps
        while True:
            end = max(
                steps + 1,
                min(
                    target,
                    self.report.next_due(end, steps),
                    self.validation.next_due(end, last_validation),
                    self.checkpoint.next_due(end, last_checkpoint),
                ),
            )
            # `next_due` may only be a candidate (`At` over a container): confirm it.
            if end >= target or self.any_due(end, steps, last_validation, last_checkpoint):
                return end

    def any_due(
        self, steps: int, last_report: int, last_validation: int, last_checkpoint: int
    ) -> bool:
        """Is a report, a validation or a checkpoint due after `steps` batches?"""
        return (
            self.report.due(steps, last_report)
            or self.validation.due(steps, last_validation)
            or self.checkpoint.due(steps, last_checkpoint)
        )

    def next_chunk_lengths(
        self, steps: int, last_validation: int, last_checkpoint: int, target: int, most: int
    ) -> list[int]:
        """The lengths of the next (at most `most`) chunks as the loop will cut them if nothing
        stops it: the loop's own bookkeeping (a validation at every period and at the target, a
        checkpoint at every period), run ahead on copies."""
        lengths: list[int] = []
        while steps < target and len(lengths) < most:
            end = self.chunk_end(steps, last_validation, last_checkpoint, target)
            lengths.append(end - steps)
            steps = end
            if self.validation.due(steps, last_validation) or steps == target:
                last_validation = steps
            if self.checkpoint.due(steps, last_checkpoint):
                last_checkpoint = steps
        return lengths
