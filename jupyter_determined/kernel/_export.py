"""Notebook → training script: what `%%det_submit` and the Native API submit from a notebook.

A notebook's code cells become one Python script that runs outside IPython (in a trial):

* IPython syntax is parsed by IPython itself (so a `%` inside a string stays a string), then
  every `get_ipython()` call is replaced by plain Python where one exists (`%cd`, `%env`,
  `%time`, `%%writefile`, ...) or dropped with a warning (`!ls`, `%pip`, `%matplotlib`, ...).
  Dropped statements become `pass` so that indented blocks stay valid.
* Cells tagged `det-skip`, other `%%det_submit` cells (training code of other experiments) and
  our own `%det ...` lines are left out.
* Where each cell went is recorded (`ExportedCell`: id, index in the notebook, execution count,
  line offset) in the experiment's `notebook` field and in the script's prelude, which installs
  `determined.common.notebook_errors`: a trial's traceback names the notebook cell and line.

Pure functions of cells (the Jupyter server's export preview uses them too); which notebook the
running kernel has is `_current_notebook.py`.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from jupyter_determined import _contract

SKIP_TAG = _contract.SKIP_TAG
COMM_TARGET = _contract.NOTEBOOK_COMM_TARGET
# Our own magics: never part of the training script, and not worth a warning.
OWN_MAGICS = frozenset({"det", "det_submit", "load_ext", "reload_ext"})
# Cell magics whose body is plain Python that runs as is.
TRANSPARENT_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
TRANSPARENT_LINE_MAGICS = frozenset({"time", "timeit", "prun", "debug"})

Which = Literal["all", "through_current", "above_current"]


class NotebookExportError(ValueError):
    """The notebook cannot be turned into a script; the message names the cell."""


@dataclasses.dataclass(frozen=True)
class ExportedCell:
    """Where one notebook cell went in the script (the trial's tracebacks name it from this).

    `index` is 0-based among all the notebook's cells (markdown included); script line =
    `line_offset` + line within the cell; `line_map` (the cell's line of each of its
    `num_lines` script lines) only where IPython syntax made them differ (`%%time`, ...);
    `code_number` is 1-based among the notebook's code cells and `first_line` the cell's first
    line as the notebook shows it (the error banner names a cell that never ran by them)."""

    id: str | None
    index: int
    execution_count: int | None
    line_offset: int
    num_lines: int
    line_map: list[int] | None = None
    code_number: int | None = None
    first_line: str | None = None

    def to_json(self) -> dict:
        data: dict[str, Any] = {
            "id": self.id,
            "index": self.index,
            "execution_count": self.execution_count,
            "line_offset": self.line_offset,
            "num_lines": self.num_lines,
        }
        if self.line_map is not None:
            data["line_map"] = list(self.line_map)
        if self.code_number is not None:
            data["code_number"] = self.code_number
        if self.first_line is not None:
            data["first_line"] = self.first_line
        return data


@dataclasses.dataclass
class ExportedScript:
    script: str
    notebook_path: str | None
    cell_ids: list[str]
    warnings: list[str]
    source: str  # "frontend" | "file" | "history" | "cells"
    cells: list[ExportedCell] = dataclasses.field(default_factory=list)

    def as_tuple(self) -> tuple[str, str | None, list[str]]:
        return self.script, self.notebook_path, self.cell_ids

    def notebook_field(self) -> dict:
        """The `notebook` field of POST /experiments."""
        field = {
            "path": self.notebook_path,
            "cell_ids": self.cell_ids,
            "script": self.script,
            "cells": [cell.to_json() for cell in self.cells],
        }
        return {key: value for key, value in field.items() if value is not None}


# ---------------------------------------------------------------------------------------------
# Converting one cell


def _cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _cell_tags(cell: dict) -> list[str]:
    return list((cell.get("metadata") or {}).get("tags") or [])


def skip_reason(cell: dict) -> str | None:
    """Why the export leaves `cell` out, or None if it exports it.

    One of "markdown", "raw" (not code), "det-skip" (tagged), "empty", "det_submit" (another
    experiment's training code). `cells_to_script` and the export preview both ask this."""
    cell_type = str(cell.get("cell_type", "code"))
    if cell_type != "code":
        return "markdown" if cell_type == "markdown" else "raw"
    source = _cell_source(cell)
    if SKIP_TAG in _cell_tags(cell):
        return "det-skip"
    if not source.strip():
        return "empty"
    if cell_magic_name(source) == "det_submit":
        return "det_submit"
    return None


def cell_magic_name(source: str) -> str | None:
    """`%%name` when the cell is a cell magic, else None."""
    for line in source.splitlines():
        if line.strip():
            match = re.match(r"\s*%%(\w+)", line)
            return match.group(1) if match else None
    return None


def _ipython_call(node: ast.AST) -> tuple[str, list[Any]] | None:
    """`get_ipython().method(<literal args>)` → (method, args)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    owner = node.func.value
    if not (
        isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Name)
        and owner.func.id == "get_ipython"
    ):
        return None
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
    except ValueError:
        return None
    return node.func.attr, args


class _CellConverter:
    def __init__(self, label: str) -> None:
        self.label = label
        self.warnings: list[str] = []
        self.original_lines: list[str] = []
        # The cell's own line (1-based) of each line `convert` returned: tracebacks of the
        # trial name the line the user wrote, also where IPython syntax changed the count.
        self.line_map: list[int] = []
        self._nested_map: list[int] | None = None

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.label}: {message}")

    def convert(self, source: str) -> str:
        from IPython.core.inputtransformer2 import TransformerManager

        transformed = TransformerManager().transform_cell(source)
        try:
            tree = ast.parse(transformed)
        except SyntaxError as exc:
            raise NotebookExportError(
                f"{self.label}: line {exc.lineno}: {exc.msg} (fix the cell, or tag it "
                f"'{SKIP_TAG}' to leave it out of the experiment)"
            ) from None
        lines = transformed.splitlines()
        source_lines = source.splitlines()
        # Line magics keep their line: name the user's own text in comments and warnings.
        self.original_lines = source_lines if len(source_lines) == len(lines) else lines
        origins = [min(number, max(len(source_lines), 1)) for number in range(1, len(lines) + 1)]
        # A cell magic makes the whole cell one line; its body starts below the `%%` line.
        magic_line = next(
            (number for number, line in enumerate(source_lines, start=1) if line.strip()), 1
        )
        replacements: list[tuple[int, int, list[str], list[int]]] = []
        for node in ast.walk(tree):
            self._nested_map = None
            replacement = self._replacement(node, lines)
            if replacement is not None:
                indent = " " * node.col_offset  # type: ignore[attr-defined]
                body = [indent + line if line else line for line in replacement]
                start, end = node.lineno, node.end_lineno  # type: ignore[attr-defined]
                if self._nested_map is not None and len(lines) < len(source_lines):
                    body_origins = [magic_line + number for number in self._nested_map]
                else:
                    body_origins = [
                        origins[start - 1 + min(i, end - start)] for i in range(len(body))
                    ]
                body_origins = (body_origins + body_origins[-1:] * len(body))[: len(body)]
                replacements.append((start, end, body, body_origins))
        for start, end, body, body_origins in sorted(
            replacements, key=lambda r: r[:2], reverse=True
        ):
            lines[start - 1 : end] = body
            origins[start - 1 : end] = body_origins
        code = "\n".join(lines).rstrip() + "\n" if lines else ""
        self.line_map = origins[: len(code.splitlines())]
        return code

    def _replacement(self, node: ast.AST, lines: list[str]) -> list[str] | None:
        if isinstance(node, ast.Expr):
            call = _ipython_call(node.value)
            target = None
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            call = _ipython_call(node.value)
            target = ast.unparse(node.targets[0])
        else:
            return None
        if call is None:
            return None
        method, args = call
        original = self.original_lines[node.lineno - 1].strip()
        if method == "run_line_magic" and len(args) >= 2:
            code = self._line_magic(str(args[0]).lstrip("%"), str(args[1]), original)
        elif method == "run_cell_magic" and len(args) >= 3:
            code = self._cell_magic(str(args[0]), str(args[1]), str(args[2]))
        elif method in ("system", "getoutput"):
            self.warn(f"shell command dropped (it does not run in the trial): {original}")
            code = None
        else:
            self.warn(f"IPython call dropped: {original}")
            code = None
        if code is None:
            self._nested_map = None
            return [
                f"{target} = None  # [det] dropped: {original}"
                if target
                else f"pass  # [det] dropped: {original}"
            ]
        if target is not None:
            code = f"{target} = {code}" if "\n" not in code else code
        return code.splitlines() or ["pass"]

    def _nested(self, source: str) -> str:
        inner = _CellConverter(self.label)
        code = inner.convert(source)
        self.warnings.extend(inner.warnings)
        self._nested_map = inner.line_map
        return code

    def _line_magic(self, name: str, line: str, original: str) -> str | None:
        if name in OWN_MAGICS:
            return None
        if name in TRANSPARENT_LINE_MAGICS and line.strip():
            return self._nested(line).rstrip("\n")
        if name == "cd" and line.strip():
            return f"__import__('os').chdir({line.strip()!r})"
        if name in ("env", "set_env") and line.strip():
            key, sep, value = line.strip().partition("=")
            if not sep:
                key, _, value = line.strip().partition(" ")
            if key and value:
                return f"__import__('os').environ[{key.strip()!r}] = {value.strip()!r}"
        if name == "run" and line.strip() and not line.strip().startswith("-"):
            script = line.split()[0]
            return f"__import__('runpy').run_path({script!r}, run_name='__main__')"
        self.warn(f"IPython magic dropped (it does not run in the trial): {original}")
        return None

    def _cell_magic(self, name: str, line: str, body: str) -> str | None:
        if name in TRANSPARENT_CELL_MAGICS:
            return self._nested(body).rstrip("\n") or "pass"
        if name == "writefile" and line.strip():
            append = line.split()[0] in ("-a", "--append")
            path = line.split()[-1]
            mode = "a" if append else "w"
            return f"with open({path!r}, {mode!r}) as _det_file:\n    _det_file.write({body!r})"
        if name == "det_submit":
            return None
        self.warn(f"cell magic %%{name} dropped (it does not run in the trial)")
        return None


def convert_cell(source: str, label: str = "cell") -> tuple[str, list[str]]:
    """One cell's source as plain Python, and the warnings about what was dropped."""
    code, warnings_, _ = _convert_with_lines(source, label)
    return code, warnings_


def _convert_with_lines(source: str, label: str) -> tuple[str, list[str], list[int]]:
    """`convert_cell`, plus the cell's line (1-based) of each line of the code."""
    converter = _CellConverter(label)
    code = converter.convert(source)
    return code, converter.warnings, converter.line_map


# ---------------------------------------------------------------------------------------------
# Cells → script

_PRELUDE = (
    "# Exported from {origin} by jupyter_determined: the notebook's code cells, in order.\n"
    "try:  # notebooks call display() without importing it\n"
    "    from IPython.display import display\n"
    "except ImportError:  # pragma: no cover\n"
    "    display = print\n"
    "try:  # tracebacks name the notebook's cells, not this script's lines\n"
    "    __import__('determined.common.notebook_errors').common.notebook_errors.install("
    "globals().get('__file__'), {table})\n"
    "except ImportError:  # pragma: no cover\n"
    "    pass\n"
)


def _cell_label(cell: dict, index: int) -> str:
    cell_id = cell.get("id")
    return f"cell {index + 1}" + (f" (id {cell_id})" if cell_id else "")


FIRST_LINE_MAX_CHARS = 80  # the banner shows it on one line beside the error


def first_line(source: str) -> str | None:
    """A cell's first non-blank line, cut short: how the banner names the cell."""
    line = next((line.strip() for line in source.splitlines() if line.strip()), None)
    if line is None or len(line) <= FIRST_LINE_MAX_CHARS:
        return line
    return line[: FIRST_LINE_MAX_CHARS - 1] + "…"


def _execution_count(cell: dict) -> int | None:
    count = cell.get("execution_count")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def cells_to_script(
    cells: Iterable[dict],
    *,
    training_code: str | None = None,
    training_cell_id: str | None = None,
    training_cell_index: int | None = None,
    training_execution_count: int | None = None,
    training_line_offset: int = 0,
    training_first_line: str | None = None,
    origin: str = "a notebook",
    notebook_path: str | None = None,
    source: str = "cells",
) -> ExportedScript:
    """The script of `cells` (nbformat cell dicts, in order), then `training_code` if given.

    Non-code cells, cells tagged `det-skip` and `%%det_submit` cells are left out. The script
    records where each cell went (`ExportedScript.cells`) and its prelude installs
    `determined.common.notebook_errors`, so a trial's traceback names the notebook cell and
    line. `training_cell_index` is the submitting cell's index in the notebook (default: after
    the last of `cells`); `training_line_offset` the number of that cell's lines above the
    training code (1 for a `%%det_submit` body: the magic's own line) and
    `training_first_line` that cell's first line (default: the training code's).
    """
    body: list[str] = []
    body_lines = 0
    cell_ids: list[str] = []
    exported: list[ExportedCell] = []
    collected: list[str] = []

    def add(
        header: str,
        code: str,
        line_map: list[int],
        cell_id: str | None,
        index: int,
        execution_count: int | None,
        code_number: int,
        first: str | None,
    ) -> None:
        nonlocal body_lines
        offset = body_lines + header.count("\n")
        num_lines = len(code.splitlines())
        identity = line_map == list(range(1, num_lines + 1))
        exported.append(
            ExportedCell(
                cell_id,
                index,
                execution_count,
                offset,
                num_lines,
                None if identity else line_map,
                code_number,
                first,
            )
        )
        body.append(header + code)
        body_lines += (header + code).count("\n")

    count = 0
    code_cells = 0  # code cells so far, the skipped ones too: the number a person counts to
    for index, cell in enumerate(cells):
        count = index + 1
        code_cells += str(cell.get("cell_type", "code")) == "code"
        if skip_reason(cell) is not None:
            continue
        text = _cell_source(cell)
        label = _cell_label(cell, index)
        code, cell_warnings, line_map = _convert_with_lines(text, label)
        collected.extend(cell_warnings)
        cell_id = str(cell["id"]) if cell.get("id") else None
        add(
            f"\n# --- {label}\n",
            code,
            line_map,
            cell_id,
            index,
            _execution_count(cell),
            code_cells,
            first_line(text),
        )
        if cell_id:
            cell_ids.append(cell_id)
    if training_code is not None:
        label = "the submitting cell" + (f" (id {training_cell_id})" if training_cell_id else "")
        code, cell_warnings, line_map = _convert_with_lines(training_code, label)
        collected.extend(cell_warnings)
        line_map = [line + training_line_offset for line in line_map]
        index = training_cell_index if training_cell_index is not None else count
        add(
            f"\n# --- {label}: the training code\n",
            code,
            line_map,
            training_cell_id,
            index,
            training_execution_count,
            code_cells + 1,
            training_first_line or first_line(training_code),
        )
        if training_cell_id:
            cell_ids.append(training_cell_id)
    # The table is on one line (with the call), so the prelude's length does not depend on it.
    placeholder = _PRELUDE.format(origin=origin.replace("\n", " "), table="{}")
    prelude_lines = placeholder.count("\n")
    exported = [
        dataclasses.replace(cell, line_offset=cell.line_offset + prelude_lines) for cell in exported
    ]
    table = {"notebook": notebook_path, "cells": [cell.to_json() for cell in exported]}
    prelude = _PRELUDE.format(origin=origin.replace("\n", " "), table=repr(table))
    return ExportedScript(
        prelude + "".join(body), notebook_path, cell_ids, collected, source, exported
    )


def read_notebook_cells(path: str | os.PathLike) -> list[dict]:
    with open(path, encoding="utf-8") as file:
        notebook = json.load(file)
    return list(notebook.get("cells") or [])


def export_notebook_script(
    notebook: str | os.PathLike | dict | list,
    *,
    stop_before_cell: str | None = None,
    training_code: str | None = None,
) -> ExportedScript:
    """Export a notebook (a path, an nbformat dict, or a list of cells) as a training script.

    `stop_before_cell` (a cell id) exports only the cells above that cell; `training_code` is
    appended last (the body of a `%%det_submit` cell).
    """
    path: str | None = None
    if isinstance(notebook, (str, os.PathLike)):
        path = str(Path(notebook).absolute())
        cells = read_notebook_cells(path)
    elif isinstance(notebook, dict):
        cells = list(notebook.get("cells") or [])
    else:
        cells = list(notebook)
    if stop_before_cell is not None:
        ids = [cell.get("id") for cell in cells]
        if stop_before_cell not in ids:
            raise NotebookExportError(f"no cell with id {stop_before_cell!r} in the notebook")
        cells = cells[: ids.index(stop_before_cell)]
    return cells_to_script(
        cells, training_code=training_code, notebook_path=path, origin=path or "a notebook"
    )


__all__ = [
    "COMM_TARGET",
    "ExportedCell",
    "ExportedScript",
    "NotebookExportError",
    "SKIP_TAG",
    "Which",
    "cells_to_script",
    "convert_cell",
    "export_notebook_script",
    "first_line",
    "read_notebook_cells",
    "skip_reason",
]
