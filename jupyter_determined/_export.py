"""Notebook → training script: what `%%det_submit` and the Native API submit from a notebook.

A notebook's code cells become one Python script that runs outside IPython (in a trial):

* IPython syntax is parsed by IPython itself (so a `%` inside a string stays a string), then
  every `get_ipython()` call is replaced by plain Python where one exists (`%cd`, `%env`,
  `%time`, `%%writefile`, ...) or dropped with a warning (`!ls`, `%pip`, `%matplotlib`, ...).
  Dropped statements become `pass` so that indented blocks stay valid.
* Cells tagged `det-skip`, other `%%det_submit` cells (training code of other experiments) and
  our own `%det ...` lines are left out.

Where the cells come from, in order of preference (`current_notebook_script`):
1. the frontend: the labextension opens a comm to target `jupyter_determined.notebook` and
   sends the notebook as it holds it (unsaved edits included) before it executes cells;
2. the saved notebook file (`JPY_SESSION_NAME` / `__session__`), if it holds the running cell;
3. the kernel's raw input history (what ran, in the order it ran; no tags, no later cells).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Literal

SKIP_TAG = "det-skip"
COMM_TARGET = "jupyter_determined.notebook"
# Our own magics: never part of the training script, and not worth a warning.
OWN_MAGICS = frozenset({"det", "det_submit", "load_ext", "reload_ext"})
# Cell magics whose body is plain Python that runs as is.
TRANSPARENT_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
TRANSPARENT_LINE_MAGICS = frozenset({"time", "timeit", "prun", "debug"})

Which = Literal["all", "through_current", "above_current"]


class NotebookExportError(ValueError):
    """The notebook cannot be turned into a script; the message names the cell."""


@dataclasses.dataclass
class ExportedScript:
    script: str
    notebook_path: str | None
    cell_ids: list[str]
    warnings: list[str]
    source: str  # "frontend" | "file" | "history" | "cells"

    def as_tuple(self) -> tuple[str, str | None, list[str]]:
        return self.script, self.notebook_path, self.cell_ids

    def notebook_field(self) -> dict:
        """The `notebook` field of POST /experiments."""
        field = {"path": self.notebook_path, "cell_ids": self.cell_ids, "script": self.script}
        return {key: value for key, value in field.items() if value is not None}


# ---------------------------------------------------------------------------------------------
# Converting one cell


def _cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _cell_tags(cell: dict) -> list[str]:
    return list((cell.get("metadata") or {}).get("tags") or [])


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
    if not (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
            and owner.func.id == "get_ipython"):
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
                f"'{SKIP_TAG}' to leave it out of the experiment)") from None
        lines = transformed.splitlines()
        source_lines = source.splitlines()
        # Line magics keep their line: name the user's own text in comments and warnings.
        self.original_lines = source_lines if len(source_lines) == len(lines) else lines
        replacements: list[tuple[int, int, list[str]]] = []
        for node in ast.walk(tree):
            replacement = self._replacement(node, lines)
            if replacement is not None:
                indent = " " * node.col_offset  # type: ignore[attr-defined]
                body = [indent + line if line else line for line in replacement]
                replacements.append((node.lineno, node.end_lineno, body))  # type: ignore
        for start, end, body in sorted(replacements, reverse=True):
            lines[start - 1:end] = body
        return "\n".join(lines).rstrip() + "\n" if lines else ""

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
        original = self.original_lines[node.lineno - 1].strip()  # type: ignore[attr-defined]
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
            return [f"{target} = None  # [det] dropped: {original}" if target else
                    f"pass  # [det] dropped: {original}"]
        if target is not None:
            code = f"{target} = {code}" if "\n" not in code else code
        return code.splitlines() or ["pass"]

    def _nested(self, source: str) -> str:
        inner = _CellConverter(self.label)
        code = inner.convert(source)
        self.warnings.extend(inner.warnings)
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
    converter = _CellConverter(label)
    return converter.convert(source), converter.warnings


# ---------------------------------------------------------------------------------------------
# Cells → script

_PRELUDE = (
    "# Exported from {origin} by jupyter_determined: the notebook's code cells, in order.\n"
    "try:  # notebooks call display() without importing it\n"
    "    from IPython.display import display\n"
    "except ImportError:  # pragma: no cover\n"
    "    display = print\n"
)


def _cell_label(cell: dict, index: int) -> str:
    cell_id = cell.get("id")
    return f"cell {index + 1}" + (f" (id {cell_id})" if cell_id else "")


def cells_to_script(cells: Iterable[dict], *, training_code: str | None = None,
                    training_cell_id: str | None = None, origin: str = "a notebook",
                    notebook_path: str | None = None, source: str = "cells") -> ExportedScript:
    """The script of `cells` (nbformat cell dicts, in order), then `training_code` if given.

    Non-code cells, cells tagged `det-skip` and `%%det_submit` cells are left out.
    """
    parts: list[str] = [_PRELUDE.format(origin=origin)]
    cell_ids: list[str] = []
    collected: list[str] = []
    for index, cell in enumerate(cells):
        if cell.get("cell_type", "code") != "code":
            continue
        text = _cell_source(cell)
        if SKIP_TAG in _cell_tags(cell) or not text.strip():
            continue
        if cell_magic_name(text) == "det_submit":
            continue  # another experiment's training code
        label = _cell_label(cell, index)
        code, cell_warnings = convert_cell(text, label)
        collected.extend(cell_warnings)
        parts.append(f"\n# --- {label}\n{code}")
        if cell.get("id"):
            cell_ids.append(str(cell["id"]))
    if training_code is not None:
        label = "the submitting cell" + (f" (id {training_cell_id})" if training_cell_id else "")
        code, cell_warnings = convert_cell(training_code, label)
        collected.extend(cell_warnings)
        parts.append(f"\n# --- {label}: the training code\n{code}")
        if training_cell_id:
            cell_ids.append(training_cell_id)
    return ExportedScript("".join(parts), notebook_path, cell_ids, collected, source)


def read_notebook_cells(path: str | os.PathLike) -> list[dict]:
    with open(path, encoding="utf-8") as file:
        notebook = json.load(file)
    return list(notebook.get("cells") or [])


def export_notebook_script(notebook: str | os.PathLike | dict | list, *,
                           stop_before_cell: str | None = None,
                           training_code: str | None = None) -> ExportedScript:
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
        cells = cells[:ids.index(stop_before_cell)]
    return cells_to_script(cells, training_code=training_code, notebook_path=path,
                           origin=path or "a notebook")


# ---------------------------------------------------------------------------------------------
# The notebook of the running kernel


class _FrontendNotebook:
    """The notebook as the frontend holds it, pushed over the `jupyter_determined.notebook` comm.

    Protocol (the labextension opens the comm): each message's data is
    `{"path": "<absolute or server-relative path>", "cells": [{"id", "cell_type", "source",
    "metadata": {"tags": [...]}}, ...]}`, sent whenever the notebook changes or right before
    cells are executed. Messages on the shell channel are handled in order, so a snapshot sent
    before an execute request has arrived when that cell runs. The kernel answers nothing.
    """

    def __init__(self) -> None:
        self.snapshot: dict | None = None
        self.received_at = 0.0
        self.registered_with: Any = None

    def register(self, ipython: Any) -> None:
        kernel = getattr(ipython, "kernel", None)
        if kernel is None or self.registered_with is kernel:
            return
        manager = getattr(kernel, "comm_manager", None)
        if manager is None:
            try:
                import comm

                manager = comm.get_comm_manager()
            except Exception:
                return
        manager.register_target(COMM_TARGET, self._on_open)
        self.registered_with = kernel

    def _on_open(self, comm: Any, open_msg: dict) -> None:
        comm.on_msg(self._on_message)
        self._on_message(open_msg)

    def _on_message(self, msg: dict) -> None:
        data = (msg.get("content") or {}).get("data") or {}
        if isinstance(data, dict) and isinstance(data.get("cells"), list):
            self.snapshot = data
            self.received_at = time.time()


frontend_notebook = _FrontendNotebook()


def _current_cell_id(ipython: Any) -> str | None:
    """JupyterLab sends the executing cell's id in the execute request's metadata."""
    kernel = getattr(ipython, "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else None
    except Exception:
        parent = None
    metadata = (parent or {}).get("metadata") or {}
    return metadata.get("cellId")


def _notebook_path(ipython: Any) -> str | None:
    path = os.environ.get("JPY_SESSION_NAME") or (ipython.user_ns.get("__session__")
                                                  if ipython is not None else None)
    return str(path) if path else None


def _raw_history(ipython: Any) -> list[str]:
    return [source for _, _, source in ipython.history_manager.get_range(session=0, raw=True)]


def _locate(cells: list[dict], cell_id: str | None, current_source: str | None) -> int | None:
    if cell_id is not None:
        for index, cell in enumerate(cells):
            if cell.get("id") == cell_id:
                return index
    if current_source is not None:
        wanted = current_source.strip()
        for index, cell in enumerate(cells):
            if cell.get("cell_type", "code") == "code" and _cell_source(cell).strip() == wanted:
                return index
    return None


def _select(cells: list[dict], index: int, which: Which) -> list[dict]:
    if which == "above_current":
        return cells[:index]
    if which == "through_current":
        return cells[:index + 1]
    return cells


@dataclasses.dataclass
class NotebookCells:
    cells: list[dict]
    notebook_path: str | None
    source: str  # "frontend" | "file" | "history"
    current_cell_id: str | None
    notes: list[str]


def current_notebook_cells(ipython: Any = None, *, which: Which = "all") -> NotebookCells:
    """The running kernel's notebook: its cells (selected by `which`), path, and where they
    came from, with notes on anything the export could not honour."""
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    if ipython is None:
        raise NotebookExportError("not running in IPython: there is no notebook to export")
    frontend_notebook.register(ipython)
    history = _raw_history(ipython)
    current_source = history[-1] if history else None
    cell_id = _current_cell_id(ipython)
    notes: list[str] = []

    snapshot = frontend_notebook.snapshot
    if snapshot is not None:
        cells = list(snapshot["cells"])
        index = _locate(cells, cell_id, current_source)
        if index is not None:
            return NotebookCells(_select(cells, index, which), snapshot.get("path"), "frontend",
                                 cells[index].get("id"), notes)

    path = _notebook_path(ipython)
    if path and os.path.isfile(path):
        try:
            cells = read_notebook_cells(path)
        except (OSError, ValueError) as exc:
            notes.append(f"cannot read the notebook file {path} ({exc}); exporting the "
                         "kernel's input history instead")
        else:
            index = _locate(cells, cell_id, current_source)
            if index is not None:
                selected = _select(cells, index, which)
                if which != "above_current" and current_source is not None:
                    # The running cell as it ran, even if the file holds an older version.
                    selected[index] = {**selected[index], "source": current_source}
                return NotebookCells(selected, str(Path(path).absolute()), "file",
                                     cells[index].get("id"), notes)
            notes.append(f"the running cell is not in the saved notebook {path} (unsaved "
                         "changes?): exporting the kernel's input history instead (save the "
                         "notebook to honour det-skip tags and export cells in notebook order)")
    elif path is None:
        notes.append("the notebook's path is unknown (JPY_SESSION_NAME is not set): exporting "
                     "the kernel's input history (the cells that ran, in the order they ran)")
    cells = [{"cell_type": "code", "source": source, "id": f"history-{number}"}
             for number, source in enumerate(history, start=1)]
    current_id = cells[-1]["id"] if cells else None
    if which == "above_current":
        cells = cells[:-1]
    elif which == "all":
        notes.append("cells that have not run yet are not in the kernel's history, so they are "
                     "not part of the experiment")
    return NotebookCells(cells, path, "history", current_id, notes)


def current_notebook_export(ipython: Any = None, *, which: Which = "all",
                            training_code: str | None = None) -> ExportedScript:
    """The running notebook as a script; `training_code` (a `%%det_submit` body) goes last,
    recorded under the running cell's id."""
    found = current_notebook_cells(ipython, which=which)
    exported = cells_to_script(found.cells, training_code=training_code,
                               training_cell_id=found.current_cell_id if training_code is not None
                               else None, notebook_path=found.notebook_path,
                               origin=found.notebook_path or "the kernel's input history",
                               source=found.source)
    exported.warnings[:0] = found.notes
    return exported


def current_notebook_script(*, which: Which = "all", warn: bool = True,
                            ) -> tuple[str, str | None, list[str]]:
    """(script_text, notebook_path | None, cell_ids) of the notebook this kernel runs.

    For the Native API called from a notebook (`det.experimental.keras.init(...)` in a cell):
    the whole notebook by default, so the cells after the calling one (`model.fit`) run in the
    trial. Warnings about dropped lines are issued with `warnings.warn` unless `warn=False`.
    """
    exported = current_notebook_export(which=which)
    if warn:
        for message in exported.warnings:
            warnings.warn(message, stacklevel=2)
    return exported.as_tuple()


__all__ = ["COMM_TARGET", "ExportedScript", "NotebookCells", "NotebookExportError", "SKIP_TAG", "cells_to_script",
           "convert_cell", "current_notebook_cells", "current_notebook_export",
           "current_notebook_script", "export_notebook_script", "frontend_notebook"]
