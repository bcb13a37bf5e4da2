"""Tracebacks of exported notebook scripts that name the notebook's cells, and their log marker.

A notebook submitted from Jupyter (`%%det_submit`, or the Native API in a kernel) runs in the
trial as one exported script (`_det_notebook_cell.py`, `<notebook>__det__.py`). Its prelude calls
`install(__file__, table)` with a table of the cells it holds, so that an uncaught exception
prints, in place of each of the script's frames::

      File "quickstart.ipynb", cell 4 (id 1a2b3c), line 5, in <module>

(frames of other files keep their lines), then one marker line that the master's log ingest
recognises and stores as the trial's `notebook_error`::

    DET_NOTEBOOK_ERROR {"notebook": "/work/quickstart.ipynb", "cell_id": "1a2b3c",
                        "cell_index": 3, "line": 5, "exception": "ValueError: boom"}

(one line: the marker word, one space, a JSON object). `cell_index` is 0-based among all the
notebook's cells, `line` 1-based within the cell; the cell is the one holding the innermost
frame of the notebook's code. The table (written by `jupyter_determined.kernel._export`) has the
notebook's path and per exported cell: `id`, `index`, `execution_count`, `line_offset` (script
line = line_offset + cell line) and `num_lines`, with `line_map` (the cell line of each of its
script lines) where IPython syntax made the two differ.

This module is imported by the trial's script and by the master; it imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import traceback
from types import TracebackType

MARKER = "DET_NOTEBOOK_ERROR"
MAX_EXCEPTION_CHARS = 1000  # the marker is one log line: a long message is cut
_FRAME_LINE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in ')


@dataclasses.dataclass(frozen=True)
class ScriptCell:
    """Where one notebook cell sits in the exported script."""

    id: str | None
    index: int  # 0-based among all the notebook's cells
    execution_count: int | None
    line_offset: int  # script line = line_offset + cell line
    num_lines: int
    line_map: tuple[int, ...] | None = None  # cell line of each script line, when not 1:1

    @classmethod
    def from_json(cls, data: dict) -> ScriptCell:
        line_map = data.get("line_map")
        return cls(
            id=data.get("id"),
            index=int(data["index"]),
            execution_count=data.get("execution_count"),
            line_offset=int(data["line_offset"]),
            num_lines=int(data["num_lines"]),
            line_map=tuple(int(n) for n in line_map) if line_map else None,
        )

    def cell_line(self, script_line: int) -> int | None:
        """The 1-based line within the cell of `script_line`, or None if it is not this cell's."""
        position = script_line - self.line_offset
        if not 1 <= position <= self.num_lines:
            return None
        return self.line_map[position - 1] if self.line_map else position

    def label(self) -> str:
        """`cell 4 (id 1a2b3c)`: the number a person counts to in the notebook, 1-based."""
        details = [f"id {self.id}"] if self.id else []
        if self.execution_count is not None:
            details.append(f"In [{self.execution_count}]")
        return f"cell {self.index + 1}" + (f" ({', '.join(details)})" if details else "")


class NotebookScript:
    """The exported script of a notebook: maps the script's frames to the notebook's cells."""

    def __init__(self, script_file: str, notebook: str | None, cells: list[ScriptCell]) -> None:
        self.script_file = script_file
        self.script_path = os.path.abspath(script_file)
        self.notebook = notebook
        self.cells = list(cells)

    @property
    def notebook_name(self) -> str:
        return os.path.basename(self.notebook) if self.notebook else "the notebook"

    def is_script(self, filename: str) -> bool:
        if filename in (self.script_file, self.script_path):
            return True
        # A relative name compiled before the script changed directory (`%cd` in a cell).
        return not os.path.isabs(filename) and os.path.basename(filename) == os.path.basename(
            self.script_path
        )

    def locate(self, filename: str, lineno: int | None) -> tuple[ScriptCell, int] | None:
        """(cell, line within the cell) of a frame, or None outside the notebook's cells."""
        if lineno is None or not self.is_script(filename):
            return None
        for cell in self.cells:
            line = cell.cell_line(lineno)
            if line is not None:
                return cell, line
        return None

    def format_exception(self, etype: type, value: BaseException, tb: TracebackType | None) -> str:
        """Python's own traceback text, with each frame of the script named by its cell."""
        lines = traceback.format_exception(etype, value, tb)
        return "".join(self._rename_frame(line) for line in lines)

    def _rename_frame(self, text: str) -> str:
        match = _FRAME_LINE.search(text)
        if match is None:
            return text
        found = self.locate(match.group("file"), int(match.group("line")))
        if found is None:
            return text
        cell, line = found
        return (
            text[: match.start()] + f'File "{self.notebook_name}", {cell.label()}, '
            f"line {line}, in " + text[match.end() :]
        )

    def error_record(self, value: BaseException, tb: TracebackType | None) -> dict | None:
        """The `notebook_error` of this exception: its innermost frame in a notebook cell.

        Where the exception passed through no cell (a harness that re-raised a cell's error as
        its own), the exceptions it was raised from are searched, and the first one that
        passed through a cell is named."""
        seen: set[int] = set()
        current: BaseException | None = value
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            frames = traceback.extract_tb(tb if current is value else current.__traceback__)
            for frame in reversed(frames):
                found = self.locate(frame.filename, frame.lineno)
                if found is not None:
                    cell, line = found
                    return {
                        "notebook": self.notebook,
                        "cell_id": cell.id,
                        "cell_index": cell.index,
                        "line": line,
                        "exception": exception_text(current),
                    }
            current = current.__cause__ or (
                None if current.__suppress_context__ else current.__context__
            )
        return None

    def excepthook(self, etype: type, value: BaseException, tb: TracebackType | None) -> None:
        """`sys.excepthook`: the renamed traceback, then the marker line (both on stderr)."""
        try:
            text = self.format_exception(etype, value, tb)
            record = None if issubclass(etype, KeyboardInterrupt) else self.error_record(value, tb)
        except Exception:  # noqa: BLE001 - never lose the user's traceback to our own bug
            sys.__excepthook__(etype, value, tb)
            return
        sys.stderr.write(text)
        if record is not None:
            sys.stderr.write(marker_line(record) + "\n")
        sys.stderr.flush()


def exception_text(value: BaseException) -> str:
    """`ValueError: boom` (module-qualified outside builtins, as Python prints it), cut short."""
    etype = type(value)
    name = etype.__qualname__
    if etype.__module__ not in ("builtins", "__main__"):
        name = f"{etype.__module__}.{name}"
    message = str(value)
    text = f"{name}: {message}" if message else name
    return text if len(text) <= MAX_EXCEPTION_CHARS else text[: MAX_EXCEPTION_CHARS - 3] + "..."


def marker_line(record: dict) -> str:
    """The one log line that carries a `notebook_error` to the master."""
    return f"{MARKER} {json.dumps(record)}"


def parse_marker(line: str) -> dict | None:
    """The `notebook_error` of a marker line, or None for any other line (cheap to call on
    every captured line: most are rejected by their first characters)."""
    if not line.startswith(MARKER):
        return None
    try:
        record = json.loads(line[len(MARKER) :].strip())
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    keys = ("notebook", "cell_id", "cell_index", "line", "exception")
    return {key: record.get(key) for key in keys}


def install(script_file: str | None, table: dict) -> NotebookScript | None:
    """Called by an exported script's prelude: make uncaught exceptions name notebook cells.

    `table` is `{"notebook": path or None, "cells": [{id, index, execution_count, line_offset,
    num_lines, line_map?}, ...]}`. Returns the installed mapping (None without a script file).
    """
    if not script_file:
        return None
    script = NotebookScript(
        script_file,
        table.get("notebook"),
        [ScriptCell.from_json(cell) for cell in table.get("cells") or []],
    )
    sys.excepthook = script.excepthook
    return script


__all__ = [
    "MARKER",
    "NotebookScript",
    "ScriptCell",
    "exception_text",
    "install",
    "marker_line",
    "parse_marker",
]
