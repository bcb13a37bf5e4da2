"""The logs part: stores what trial runs print and what the master says about them."""

from __future__ import annotations

import time

from determined.common import notebook_errors
from master_lite import errors
from master_lite._core import _serialize
from master_lite._core._limits import MAX_LOG_LINE_BYTES, capped_line
from master_lite._core._shared import MasterState


class TrialLogs:
    """Trial log lines: the runner's log sink, the master's own lines, and reading them back."""

    def __init__(self, shared: MasterState) -> None:
        self._shared = shared

    def store_logs(self, records: list) -> None:
        """Log sink of the runner: called from its reader threads (through the log writer).
        Records are `(trial_id, rank, stream, time, line)`; a line over MAX_LOG_LINE_BYTES is
        stored truncated, with a marker saying how long it was.

        A run's `DET_NOTEBOOK_ERROR {...}` line (determined.common.notebook_errors) becomes
        its trial's `notebook_error`; the first of a run is kept (later ones, of other ranks,
        are usually consequences). The exit is handled after these lines are stored."""
        if self._shared.closed:
            return
        # Whatever sent them (a runner, a kernel, a custom runner class), no line is stored
        # or sent to /events clients over MAX_LOG_LINE_BYTES: cut, with a visible marker.
        records = [
            record
            if len(record[4]) * 4 <= MAX_LOG_LINE_BYTES
            else (*record[:4], capped_line(record[4]))
            for record in records
        ]
        store = self._shared.store
        ids = store.insert_logs(records)
        for trial_id, _, stream, _, line in records:
            if stream == "master" or not line.startswith(notebook_errors.MARKER):
                continue
            record = notebook_errors.parse_marker(line)
            if record is not None:
                store.trials.set_notebook_error_once(trial_id, record)
        events = self._shared.events
        if not events.has_subscribers("log"):
            return
        for log_id, (trial_id, rank, stream, timestamp, line) in zip(ids, records, strict=False):
            events.publish(
                "log",
                {
                    "id": log_id,
                    "trial_id": trial_id,
                    "rank": rank,
                    "stream": stream,
                    "time": _serialize.iso(timestamp),
                    "line": line,
                },
            )

    def master_log(self, trial_id: int, line: str) -> None:
        """A line of the master's own in the trial's log (stream "master")."""
        self.store_logs([(trial_id, None, "master", time.time(), line)])

    def get_logs(
        self,
        trial_id: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        tail: int | None = None,
        rank: int | None = None,
        stream: str | None = None,
    ) -> list[dict]:
        """The trial's log lines after `after_id` (or its last `tail`), of a rank or stream."""
        store = self._shared.store
        if store.trials.get(int(trial_id)) is None:
            raise errors.NotFound(f"trial {trial_id} not found")
        rows = store.logs.lines(
            trial_id, after_id=after_id, limit=limit, tail=tail, rank=rank, stream=stream
        )
        return [_serialize.log_json(row) for row in rows]

    def get_experiment_logs(
        self,
        exp_id: int,
        *,
        search: str | None = None,
        after_id: int = 0,
        limit: int | None = None,
        tail: int | None = None,
        stream: str | None = None,
    ) -> list[dict]:
        """Every trial's log lines of the experiment (each with its `trial_id`), in the order
        they were written, optionally only those containing `search` (any case)."""
        store = self._shared.store
        if store.experiments.get(int(exp_id)) is None:
            raise errors.NotFound(f"experiment {exp_id} not found")
        rows = store.logs.experiment_lines(
            exp_id, search=search, after_id=after_id, limit=limit, tail=tail, stream=stream
        )
        return [_serialize.log_json(row) for row in rows]


__all__ = ["TrialLogs"]
