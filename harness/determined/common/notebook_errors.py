"""Tracebacks of exported notebook scripts that name the notebook's cells, and their log marker.

A notebook submitted from Jupyter (`%%det_submit`, or the Native API in a kernel) runs in the
trial as one exported script (`_det_notebook_cell.py`, `<notebook>__det__.py`). Its prelude calls
`install(__file__, table)` with a table of the cells it holds, so that an uncaught exception
prints, in place of each of the script's frames, the cell as JupyterLab's prompt shows it::

      File "Cell In[7]", line 5, in <module>

(`Cell In[ ] (code cell 4)` for a cell that had not run when the notebook was submitted;
frames of other files keep their lines), then one marker line that the master's log ingest
recognises and stores as the trial's `notebook_error`::

    DET_NOTEBOOK_ERROR {"notebook": "/work/quickstart.ipynb", "cell_id": "1a2b3c",
                        "cell_index": 3, "line": 5, "exception": "ValueError: boom",
                        "execution_count": 7, "code_number": 2, "first_line": "model = ..."}

(one line: the marker word, one space, a JSON object). `cell_index` is 0-based among all the
notebook's cells, `code_number` 1-based among its code cells, `line` 1-based within the cell;
the cell is the one holding the innermost frame of the notebook's code. The table (written by
`jupyter_determined.kernel._export`) has the notebook's path and per exported cell: `id`,
`index`, `execution_count`, `line_offset` (script line = line_offset + cell line),
`num_lines`, `code_number` and `first_line`, with `line_map` (the cell line of each of its
script lines) where IPython syntax made the two differ.

A kernel trial (master_lite's kernel runner) runs the script cell by cell instead
(`compile_cells`): each cell compiled under its cell's name and lines, its source in
`linecache`, so IPython's own traceback and a post-mortem `%debug` (its `list` too) show the
notebook's cells; the hook then prints only the marker (IPython prints the one traceback).

This module is imported by the trial's script and by the master; it imports nothing heavy.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import linecache
import os
import re
import sys
import traceback
from types import CodeType, TracebackType

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
    code_number: int | None = None  # 1-based among the notebook's code cells
    first_line: str | None = None  # the cell's first line, as the notebook shows it

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
            code_number=data.get("code_number"),
            first_line=data.get("first_line"),
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

    def name(self) -> str:
        """`Cell In[7]`: the cell as JupyterLab's prompt shows it (and IPython's tracebacks
        name it); `Cell In[ ] (code cell 4)` for a cell that had not run at submit time."""
        if self.execution_count is not None:
            return f"Cell In[{self.execution_count}]"
        number = self.code_number if self.code_number is not None else self.index + 1
        kind = "code cell" if self.code_number is not None else "cell"
        return f"Cell In[ ] ({kind} {number})"


class NotebookScript:
    """The exported script of a notebook: maps the script's frames to the notebook's cells."""

    def __init__(self, script_file: str, notebook: str | None, cells: list[ScriptCell]) -> None:
        self.script_file = script_file
        self.script_path = os.path.abspath(script_file)
        self.notebook = notebook
        self.cells = list(cells)
        # The file name each cell's frames carry when compiled cell by cell (unique: a
        # notebook saved across kernel restarts can show one execution count twice).
        self.names: dict[str, ScriptCell] = {}
        for cell in self.cells:
            name = cell.name()
            if name in self.names:
                name = f"{name} (cell {cell.index + 1})"
            self.names[name] = cell
        # Compiled cell by cell (`compile_cells`, a kernel trial): IPython prints the
        # traceback, already in the cells' names and lines; the hook adds only the marker.
        self.compiled_in_cells = self.script_path in _CELL_COMPILED

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
        if lineno is None:
            return None
        # Compiled cell by cell (`<Cell In[7]>`): already the cell's own line.
        name = filename[1:-1] if filename.startswith("<") and filename.endswith(">") else None
        if name in self.names:
            return self.names[name], lineno
        if not self.is_script(filename):
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
            text[: match.start()]
            + f'File "{self.name_of(cell)}", line {line}, in '
            + (text[match.end() :])
        )

    def name_of(self, cell: ScriptCell) -> str:
        """The file name frames of `cell` carry in tracebacks (see `names`)."""
        return next(name for name, named in self.names.items() if named is cell)

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
                        "execution_count": cell.execution_count,
                        "code_number": cell.code_number,
                        "first_line": cell.first_line,
                    }
            current = current.__cause__ or (
                None if current.__suppress_context__ else current.__context__
            )
        return None

    def excepthook(self, etype: type, value: BaseException, tb: TracebackType | None) -> None:
        """`sys.excepthook`: the renamed traceback, then the marker line (both on stderr).

        Compiled cell by cell (a kernel trial), only the marker: the kernel runner re-raises,
        and IPython prints the traceback (in the cells' names already) and keeps it for
        `%debug`; printing it here too showed every error twice in the trial's logs."""
        try:
            # Outside IPython nobody else prints it, however the script was compiled.
            shown_by_ipython = self.compiled_in_cells and _ipython_filename_map() is not None
            text = "" if shown_by_ipython else self.format_exception(etype, value, tb)
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
    found = {key: record.get(key) for key in _RECORD_KEYS}
    # Markers of older scripts have no cell naming keys: leave them out rather than null.
    return {key: value for key, value in found.items() if key in record or key in _BASE_KEYS}


_BASE_KEYS = ("notebook", "cell_id", "cell_index", "line", "exception")
_RECORD_KEYS = (*_BASE_KEYS, "execution_count", "code_number", "first_line")
_CELL_COMPILED: set[str] = set()  # absolute paths of scripts `compile_cells` compiled
_INSTALL_CALL = "notebook_errors.install("


def _script_table(tree: ast.Module) -> dict | None:
    """The cell table of an exported script: the literal passed to its prelude's `install`."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "install"
            and len(node.args) == 2
        ):
            try:
                table = ast.literal_eval(node.args[1])
            except ValueError:
                return None
            return table if isinstance(table, dict) else None
    return None


def _cell_tree(lines: list[str], cell: ScriptCell) -> ast.Module:
    """One cell's statements (its lines of the script), numbered as the cell's own lines."""
    tree = ast.parse("".join(lines))
    if cell.line_map:
        line_map = cell.line_map
        last = len(line_map)
        for node in ast.walk(tree):
            for attribute in ("lineno", "end_lineno"):
                number = getattr(node, attribute, None)
                if isinstance(number, int) and number >= 1:
                    setattr(node, attribute, line_map[min(number, last) - 1])
    return tree


def _cell_source_lines(lines: list[str], cell: ScriptCell) -> list[str]:
    """What `linecache` holds for a cell: each cell line the code it became (a line IPython
    syntax dropped, such as `%%time`, stays empty)."""
    if not cell.line_map:
        return list(lines)
    shown = ["\n"] * max(cell.line_map)
    for text, number in reversed(list(zip(lines, cell.line_map, strict=False))):
        shown[number - 1] = text
    return shown


def compile_cells(source: str | bytes, path: str) -> list[CodeType] | None:
    """An exported notebook script as code objects to run in order: the script without its
    cells (the prelude), then each cell compiled under its name (`<Cell In[7]>`) with its own
    line numbers, its lines in `linecache` (and, in IPython, its execution count where
    IPython's tracebacks look it up). None for any other script (run it whole)."""
    text = source.decode("utf-8") if isinstance(source, bytes) else source
    if _INSTALL_CALL not in text:
        return None
    try:
        table = _script_table(ast.parse(text))
        if table is None:
            return None
        script = NotebookScript(
            path,
            table.get("notebook"),
            [ScriptCell.from_json(cell) for cell in table.get("cells") or []],
        )
    except (SyntaxError, ValueError, KeyError, TypeError):
        return None  # not our table: compiled whole, the interpreter reports what is wrong
    lines = text.splitlines(keepends=True)
    prelude = list(lines)
    codes: list[CodeType] = []
    counts = _ipython_filename_map()
    for name, cell in script.names.items():
        # In <>: pdb shows such a name as it is (`> <Cell In[7]>(3)`), not as a path.
        filename = f"<{name}>"
        own = lines[cell.line_offset : cell.line_offset + cell.num_lines]
        prelude[cell.line_offset : cell.line_offset + cell.num_lines] = ["\n"] * len(own)
        code_lines = _cell_source_lines(own, cell)
        linecache.cache[filename] = (sum(map(len, code_lines)), None, code_lines, filename)
        if counts is not None and cell.execution_count is not None:
            counts[filename] = cell.execution_count
        codes.append(compile(_cell_tree(own, cell), filename, "exec", dont_inherit=True))
    _CELL_COMPILED.add(os.path.abspath(path))
    return [compile("".join(prelude), path, "exec", dont_inherit=True), *codes]


def _ipython_filename_map() -> dict | None:
    """IPython's map of code names to execution counts (its tracebacks then say `Cell In[7],
    line 3` as for the notebook's own cells), or None outside IPython."""
    shell_module = sys.modules.get("IPython")
    if shell_module is None:
        return None
    try:
        shell = shell_module.get_ipython()
        counts = shell.compile._filename_map if shell is not None else None
    except AttributeError:
        return None
    return counts if isinstance(counts, dict) else None


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
    "compile_cells",
    "exception_text",
    "install",
    "marker_line",
    "parse_marker",
]
