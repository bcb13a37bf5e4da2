"""One trial's run directory in a TensorBoard's log directory.

Two sources fill it: the trial's stored metric reports, written as TensorBoard scalars with
TensorBoard's own record writer and protos (`EventFile`, without TensorFlow;
`<group>/<metric>` at `steps_completed`), and the event files
the trial wrote itself (`core.train.get_tensorboard_path()`, the Keras TensorBoard callback),
which the harness copies to `<checkpoint storage>/tensorboard/experiment/<id>/trial/<id>/`.

The reports are read and written in pages (`write_new_reports`, in a worker thread): however
many reports an experiment has and however large one is, the master holds one page of them (a
report's scalars go out in events of at most `SCALARS_PER_EVENT` values), never all of them.

Both are only ever appended to, never replaced: TensorBoard keeps its event files open and reads
on from where it stopped, so a replaced file (a new inode) would never be read again. The
trial's own event files are copied up to their last complete record, so that TensorBoard never
sees half a record that the trial (or the harness's copy) is still writing.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import struct
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from master_lite._core import _serialize

if TYPE_CHECKING:
    from master_lite.store import Store

# A TFRecord: length (8 bytes), its CRC (4), the data, the data's CRC (4).
_RECORD_HEADER = 12
_RECORD_FOOTER = 4

METRICS_FILE_SUFFIX = ".determined-metrics"
# One page of reports read at a time: at most this many, in at most this much metrics text
# (a single larger report is a page of its own).
PAGE_REPORTS = 1000
PAGE_BYTES = 1 << 20
# Scalars per event: a report of 200,000 metrics is written as 200 events of one step.
SCALARS_PER_EVENT = 1000


def complete_records_end(path: Path, start: int) -> int:
    """The offset after the last complete TFRecord of the event file `path`, reading from
    `start` (itself a record boundary)."""
    size = path.stat().st_size
    position = start
    with open(path, "rb") as file:
        while True:
            file.seek(position)
            header = file.read(_RECORD_HEADER)
            if len(header) < _RECORD_HEADER:
                return position
            (length,) = struct.unpack("<Q", header[:8])
            end = position + _RECORD_HEADER + length + _RECORD_FOOTER
            if end > size:
                return position
            position = end


def _is_event_file(path: Path) -> bool:
    return "tfevents" in path.name


def _scalar(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)  # NaN and infinities too: TensorBoard shows them


class EventFile:
    """A TensorBoard event file, written as TensorBoard's `EventFileWriter` writes one (its
    name, a first `file_version` event, then TFRecords of events), in the calling thread.

    Not `EventFileWriter` itself: it opens its file through `tf.io.gfile`, which imports
    TensorFlow where it is installed (the `tf` extra): half a GiB of the master's memory, kept
    for good, and seconds, for a local file. TensorBoard's record writer needs no TensorFlow."""

    def __init__(self, directory: Path, suffix: str = "") -> None:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / (
            f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
            f"{os.getpid()}.{next(_EVENT_FILES)}{suffix}"
        )
        self._records = RecordWriter(open(self.path, "ab"))  # noqa: SIM115  # closed by close()
        self.add_event(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

    def add_event(self, event: Any) -> None:
        """Append one `Event` proto."""
        self._records.write(event.SerializeToString())

    def flush(self) -> None:
        self._records.flush()

    def close(self) -> None:
        self._records.close()


_EVENT_FILES = itertools.count()  # a process-wide counter in the names, as TensorBoard's


def _scalar_chunks(report: dict, summary_pb2: Any) -> Iterator[list[Any]]:
    """The report's numeric metrics as `<group>/<name>` summary values, in name order, in
    lists of at most SCALARS_PER_EVENT (one event each)."""
    values: list[Any] = []
    for name, value in sorted((report.get("metrics") or {}).items()):
        number = _scalar(value)
        if number is not None:
            tag = f"{report['group']}/{name}"
            values.append(summary_pb2.Summary.Value(tag=tag, simple_value=number))
            if len(values) == SCALARS_PER_EVENT:
                yield values
                values = []
    if values:
        yield values


class TrialLogdir:
    """The run directory `directory` of one trial: scalars from its reports, and copies of the
    event files under `own_files` (the trial's TensorBoard files in checkpoint storage).

    Not thread-safe: one refresh at a time (the TensorBoards part runs them one after another).
    """

    def __init__(self, directory: Path, own_files: Path | None) -> None:
        self.directory = directory
        self.own_files = own_files
        self.last_report_id = 0
        self.reports_written = 0
        self._writer: Any = None
        self._copied: dict[Path, int] = {}  # source file -> bytes copied

    def append_reports(self, reports: list[dict]) -> None:
        """Write the scalars of `reports` (metric report JSON, in id order) as events; those
        written before (an id not above `last_report_id`) are skipped."""
        reports = [r for r in reports if int(r["id"]) > self.last_report_id]
        if not reports:
            return
        from tensorboard.compat.proto import event_pb2, summary_pb2

        if self._writer is None:
            self._writer = EventFile(self.directory, METRICS_FILE_SUFFIX)
        for report in reports:
            wall_time = _serialize.parse_time(report.get("report_time")) or 0.0
            step = int(report["steps_completed"])
            written = False
            for values in _scalar_chunks(report, summary_pb2):
                self._writer.add_event(
                    event_pb2.Event(
                        wall_time=wall_time, step=step, summary=summary_pb2.Summary(value=values)
                    )
                )
                written = True
            self.last_report_id = max(self.last_report_id, int(report["id"]))
            if written:
                self.reports_written += 1
        self._writer.flush()

    def copy_own_files(self) -> None:
        """Append what is new in the trial's own TensorBoard files to their copies here."""
        if self.own_files is None or not self.own_files.is_dir():
            return
        for source in sorted(p for p in self.own_files.rglob("*") if p.is_file()):
            try:
                self._copy(source, self.directory / source.relative_to(self.own_files))
            except OSError:  # removed or being replaced right now: the next refresh retries
                continue

    def _copy(self, source: Path, target: Path) -> None:
        copied = self._copied.get(source, 0)
        size = source.stat().st_size
        if size < copied or not target.exists():  # rewritten from scratch, or new
            copied = 0
        if not _is_event_file(source):
            if size != copied or not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
                self._copied[source] = size
            return
        end = complete_records_end(source, copied)
        if end == copied and target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        # Opened without truncation: TensorBoard may hold this file open and read on.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            out.seek(copied)
            if copied == 0:
                out.truncate(0)
            src.seek(copied)
            out.write(src.read(end - copied))
        self._copied[source] = end

    def has_data(self) -> bool:
        """Whether anything was written here (reports or the trial's own files)."""
        return self.reports_written > 0 or bool(self._copied)

    def close(self) -> None:
        """Close the event writer (its file stays)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def write_new_reports(
    store: Store,
    runs: Mapping[int, TrialLogdir],
    after_id: int,
    *,
    page_reports: int = PAGE_REPORTS,
    page_bytes: int = PAGE_BYTES,
) -> int:
    """Write the current reports of the trials of `runs` (trial id -> its run directory) made
    after report `after_id` into their runs, page by page: each page read in the store's read
    pool (keyset pagination on the report id), written, and let go before the next. Blocks:
    for a worker thread. Returns the last report id written (`after_id` when none was new)."""
    trial_ids = tuple(sorted(runs))
    while True:
        text = store.reads.submit(
            store.metrics.page_json,
            trial_ids,
            after_id,
            max_reports=page_reports,
            max_bytes=page_bytes,
        ).result()
        page: list[dict] = json.loads(text)
        del text
        if not page:
            return after_id
        by_trial: dict[int, list[dict]] = {}
        for report in page:
            by_trial.setdefault(int(report["trial_id"]), []).append(report)
        for trial_id, reports in by_trial.items():
            runs[trial_id].append_reports(reports)
        after_id = int(page[-1]["id"])
        del page, by_trial


__all__ = [
    "METRICS_FILE_SUFFIX",
    "PAGE_BYTES",
    "PAGE_REPORTS",
    "SCALARS_PER_EVENT",
    "EventFile",
    "TrialLogdir",
    "complete_records_end",
    "write_new_reports",
]
