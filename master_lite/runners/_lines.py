"""Reading a run's output: pipes into lines, lines into (rank, text) log records.

Standard library only: the Ray actor (`ray/_actor.py`) reads its trial's pipes with this too, and
is shipped to Ray nodes by value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

_RANK_PREFIX = re.compile(r"^\[rank=(\d+)\] ")
_LINE_END = re.compile(rb"\r\n|\r|\n")
MAX_LINE_BYTES = 8 * 1024


def read_lines(stream: Any, emit: Callable[[list[bytes]], None]) -> None:
    """Read a pipe until EOF and `emit` its lines as they complete.

    "\n", "\r" (progress bars) and "\r\n" end a line; a line longer than MAX_LINE_BYTES is
    emitted in pieces so one runaway line cannot grow memory. Closes the stream at the end.
    (The local runner reads its trials' pipes with this too.)
    """
    fd = stream.fileno()
    pending = b""
    after_cr = False
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if after_cr and chunk.startswith(b"\n"):
                chunk = chunk[1:]  # the "\n" of a "\r\n" split across two reads
            after_cr = chunk.endswith(b"\r")
            pending += chunk
            parts = _LINE_END.split(pending)
            pending = parts.pop()
            if len(pending) > MAX_LINE_BYTES:
                parts.append(pending)
                pending = b""
            if parts:
                emit(parts)
        if pending:
            emit([pending])
    finally:
        stream.close()


def split_line(raw: bytes) -> list[tuple[int | None, str]]:
    """Decode one captured line into (rank, text) pieces of at most MAX_LINE_BYTES each."""
    text = raw.decode("utf-8", errors="replace")
    rank = None
    match = _RANK_PREFIX.match(text)
    if match:
        rank = int(match.group(1))
        text = text[match.end() :]
    data = text.encode("utf-8")
    if len(data) <= MAX_LINE_BYTES:
        return [(rank, text)]
    pieces = []
    for start in range(0, len(data), MAX_LINE_BYTES):
        pieces.append(
            (rank, data[start : start + MAX_LINE_BYTES].decode("utf-8", errors="replace"))
        )
    return pieces


__all__ = ["MAX_LINE_BYTES", "read_lines", "split_line"]
