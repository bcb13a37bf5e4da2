"""A kernel trial's output as the trial's log: `stream` text split into lines (a partial line
waits for its end) and the master's own lines about the run (`KernelOutput`, a base of
`KernelRunner`)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from master_lite.runners._base import LogRecord
from master_lite.runners._lines import split_line

log = logging.getLogger("master_lite.kernels")


class KernelOutput:
    """Log records from a run's kernel messages; the subclass gives `_log_sink`."""

    _log_sink: Any

    def _stream(self, run: Any, name: str, text: str) -> None:
        pending = run.partial.get(name, "") + text
        *lines, rest = re.split(r"\r\n|\n|\r", pending)
        run.partial[name] = rest
        self._emit(run, name, lines)

    def _flush(self, run: Any) -> None:
        for name, rest in list(run.partial.items()):
            if rest:
                self._emit(run, name, [rest])
        run.partial.clear()

    def _emit(self, run: Any, stream: str, lines: list[str]) -> None:
        now = time.time()
        records: list[LogRecord] = []
        for line in lines:
            for rank, text in split_line(line.encode("utf-8")):
                records.append((run.spec.trial_id, rank, stream, now, text))
        if records:
            try:
                self._log_sink(records)
            except Exception:  # noqa: BLE001 (a failing sink must not end the capture)
                log.exception("log sink failed")

    def _master_line(self, run: Any, line: str) -> None:
        self._emit(run, "master", [line])


__all__ = ["KernelOutput"]
