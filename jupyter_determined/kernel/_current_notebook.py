"""The notebook this kernel runs, exported: what `%%det_submit` and the Native API submit.

Where the cells come from, in order of preference (`current_notebook_script`):
1. the frontend: the labextension opens a comm to target `jupyter_determined.notebook` and
   sends the notebook as it holds it (unsaved edits included) before it executes cells;
2. the saved notebook file (`JPY_SESSION_NAME` / `__session__`), if it holds the running cell;
3. the kernel's raw input history (what ran, in the order it ran; no tags, no later cells).

The conversion itself is `_export.py`'s (pure functions of cells).
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from pathlib import Path
from typing import Any

from jupyter_determined.kernel._export import (
    COMM_TARGET,
    ExportedScript,
    NotebookExportError,
    Which,
    _cell_source,
    cells_to_script,
    first_line,
    read_notebook_cells,
)


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


class _CellCounts:
    """The execution count of each cell this kernel ran (by the cell's id, which JupyterLab
    sends with the request): the number its prompt shows, `[7]`. The frontend's snapshot has
    none (it is sent before a run-all runs the cells), and a saved file's may be of an older
    session; a failed trial's banner names the cell by it. Registered by `%load_ext`."""

    def __init__(self) -> None:
        self.by_id: dict[str, int] = {}
        self._shell: Any = None

    def register(self, ipython: Any) -> None:
        if ipython is None or self._shell is ipython:
            return
        ipython.events.register("post_run_cell", self._on_run)
        self._shell = ipython
        self.by_id.clear()

    def _on_run(self, result: Any) -> None:
        info = getattr(result, "info", None)
        cell_id = getattr(info, "cell_id", None)
        count = getattr(result, "execution_count", None)
        if cell_id and isinstance(count, int):  # None: a run outside the history
            self.by_id[str(cell_id)] = count


cell_counts = _CellCounts()


def _prompt_counts(cells: list[dict], history: list[tuple[int, str]]) -> list[dict]:
    """`cells` with each code cell's execution count as its prompt shows it in this kernel:
    its id's last run, else the last run of its exact source (cells that ran before `%load_ext`),
    else the count it came with."""
    by_source = {source.strip(): count for count, source in history}
    counted = []
    for cell in cells:
        if cell.get("cell_type", "code") == "code":
            count = cell_counts.by_id.get(str(cell.get("id")))
            if count is None:
                count = by_source.get(_cell_source(cell).strip())
            if count is not None:
                cell = {**cell, "execution_count": count}
        counted.append(cell)
    return counted


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
    path = os.environ.get("JPY_SESSION_NAME") or (
        ipython.user_ns.get("__session__") if ipython is not None else None
    )
    return str(path) if path else None


def _raw_history(ipython: Any) -> list[tuple[int, str]]:
    """(execution count, source) of each input this kernel ran, in order."""
    return [
        (number, source)
        for _, number, source in ipython.history_manager.get_range(session=0, raw=True)
    ]


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


def _running(cells: list[dict], index: int, count: int | None) -> list[dict]:
    """The running cell (if selected) with the kernel's execution count: the file's or the
    frontend's count is the one of its previous run."""
    if count is None or index >= len(cells):
        return cells
    cells = list(cells)
    cells[index] = {**cells[index], "execution_count": count}
    return cells


def _select(cells: list[dict], index: int, which: Which) -> list[dict]:
    if which == "above_current":
        return cells[:index]
    if which == "through_current":
        return cells[: index + 1]
    return cells


@dataclasses.dataclass
class NotebookCells:
    cells: list[dict]
    notebook_path: str | None
    source: str  # "frontend" | "file" | "history"
    current_cell_id: str | None
    notes: list[str]
    current_cell_index: int | None = None  # among all the notebook's cells
    current_execution_count: int | None = None
    current_source: str | None = None  # the running cell's source, as it ran


def current_notebook_cells(ipython: Any = None, *, which: Which = "all") -> NotebookCells:
    """The running kernel's notebook: its cells (selected by `which`), path, and where they
    came from, with notes on anything the export could not honour."""
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    if ipython is None:
        raise NotebookExportError("not running in IPython: there is no notebook to export")
    frontend_notebook.register(ipython)
    cell_counts.register(ipython)
    history = _raw_history(ipython)
    current_source = history[-1][1] if history else None
    cell_id = _current_cell_id(ipython)
    # The running cell is the last input in the history, under its execution count (by the
    # time a cell's code runs, `ipython.execution_count` already names the next one).
    count = history[-1][0] if history else None
    notes: list[str] = []

    snapshot = frontend_notebook.snapshot
    if snapshot is not None:
        cells = _prompt_counts(list(snapshot["cells"]), history)
        index = _locate(cells, cell_id, current_source)
        if index is not None:
            return NotebookCells(
                _running(_select(cells, index, which), index, count),
                snapshot.get("path"),
                "frontend",
                cells[index].get("id"),
                notes,
                index,
                count,
                current_source,
            )

    path = _notebook_path(ipython)
    if path and os.path.isfile(path):
        try:
            cells = _prompt_counts(read_notebook_cells(path), history)
        except (OSError, ValueError) as exc:
            notes.append(
                f"cannot read the notebook file {path} ({exc}); exporting the "
                "kernel's input history instead"
            )
        else:
            index = _locate(cells, cell_id, current_source)
            if index is not None:
                selected = _select(cells, index, which)
                if which != "above_current" and current_source is not None:
                    # The running cell as it ran, even if the file holds an older version.
                    selected[index] = {**selected[index], "source": current_source}
                return NotebookCells(
                    _running(selected, index, count),
                    str(Path(path).absolute()),
                    "file",
                    cells[index].get("id"),
                    notes,
                    index,
                    count,
                    current_source,
                )
            notes.append(
                f"the running cell is not in the saved notebook {path} (unsaved "
                "changes?): exporting the kernel's input history instead (save the "
                "notebook to honour det-skip tags and export cells in notebook order)"
            )
    elif path is None:
        notes.append(
            "the notebook's path is unknown (JPY_SESSION_NAME is not set): exporting "
            "the kernel's input history (the cells that ran, in the order they ran)"
        )
    cells = [
        {
            "cell_type": "code",
            "source": source,
            "id": f"history-{number}",
            "execution_count": execution_count,
        }
        for number, (execution_count, source) in enumerate(history, start=1)
    ]
    current_id = cells[-1]["id"] if cells else None
    current_index = len(cells) - 1 if cells else None
    if which == "above_current":
        cells = cells[:-1]
    elif which == "all":
        notes.append(
            "cells that have not run yet are not in the kernel's history, so they are "
            "not part of the experiment"
        )
    return NotebookCells(
        cells, path, "history", current_id, notes, current_index, count, current_source
    )


def current_notebook_export(
    ipython: Any = None, *, which: Which = "all", training_code: str | None = None
) -> ExportedScript:
    """The running notebook as a script; `training_code` (a `%%det_submit` body) goes last,
    recorded under the running cell's id."""
    found = current_notebook_cells(ipython, which=which)
    submitting = training_code is not None
    exported = cells_to_script(
        found.cells,
        training_code=training_code,
        training_cell_id=found.current_cell_id if submitting else None,
        training_cell_index=found.current_cell_index if submitting else None,
        training_execution_count=found.current_execution_count if submitting else None,
        # The body of a `%%det_submit` cell: below the magic's line.
        training_line_offset=1 if submitting else 0,
        # The banner names the submitting cell by its first line: the magic's, as shown.
        training_first_line=first_line(found.current_source or "") if submitting else None,
        notebook_path=found.notebook_path,
        origin=found.notebook_path or "the kernel's input history",
        source=found.source,
    )
    exported.warnings[:0] = found.notes
    return exported


def current_notebook_script(
    *,
    which: Which = "all",
    warn: bool = True,
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


__all__ = [
    "NotebookCells",
    "current_notebook_cells",
    "current_notebook_export",
    "current_notebook_script",
    "frontend_notebook",
]
