"""What a submission would export, cell by cell: the data behind the labextension's preview.

`preview_export(cells, submit_cell_id=...)` answers, for every cell of a notebook, whether it
goes into the experiment's script and why not when it does not (markdown, `det-skip`, empty,
another `%%det_submit` cell, below the submitting cell, a syntax error), with the IPython lines
the export drops or replaces. The script itself comes from `cells_to_script`, the function the
submission uses, so the preview cannot show something else than what is submitted.

The labextension posts the notebook as it holds it (unsaved edits and tags included) to
`<base_url>determined/export-preview` (`jupyter_determined.server._extension`); no kernel is involved.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, Literal

from jupyter_determined.kernel._export import (
    SKIP_TAG,
    NotebookExportError,
    _cell_label,
    _cell_source,
    _ipython_call,
    cell_magic_name,
    cells_to_script,
    convert_cell,
    skip_reason,
)

Status = Literal["exported", "training", "left_out", "error"]

# Why a cell is left out: a code for the frontend, a sentence for people.
REASONS = {
    "markdown": "a markdown cell",
    "raw": "a raw cell",
    "det-skip": f"tagged {SKIP_TAG}",
    "empty": "empty",
    "det_submit": "another %%det_submit cell (the training code of its own experiment)",
    "below": "below the submitting cell (a submission exports the cells above it)",
    "submitting": "the submitting cell (%det_submit exports the cells above it)",
    "syntax_error": "not valid Python",
}
SUMMARY_CHARS = 120


@dataclasses.dataclass(frozen=True)
class CellPreview:
    """One notebook cell in the preview. `index` is 0-based among all the notebook's cells;
    `script_lines` the first and last line (1-based) of its code in the exported script."""

    index: int
    id: str | None
    cell_type: str
    status: Status
    reason: str | None  # a key of REASONS when the cell is not exported
    note: str | None  # the sentence shown for it (the error message for "error")
    summary: str  # its first non-blank line
    warnings: list[str]  # IPython lines dropped or replaced, without the "cell N:" label
    code: str | None  # the Python it becomes in the script
    script_lines: tuple[int, int] | None

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["script_lines"] = list(self.script_lines) if self.script_lines else None
        return data


@dataclasses.dataclass(frozen=True)
class ExportPreview:
    """What a submission exports. `mode` "notebook": every cell (the toolbar's "Submit to
    Determined"); "cell": the cells above `submit_cell_id` plus that cell's `%%det_submit` body.
    `script` is None when a cell has a syntax error (`errors`): the submission would fail."""

    mode: Literal["notebook", "cell"]
    notebook_path: str | None
    submit_cell_id: str | None
    cells: list[CellPreview]
    script: str | None
    warnings: list[str]
    errors: list[str]

    def to_json(self) -> dict:
        return {
            "mode": self.mode,
            "notebook_path": self.notebook_path,
            "submit_cell_id": self.submit_cell_id,
            "cells": [cell.to_json() for cell in self.cells],
            "script": self.script,
            "warnings": list(self.warnings),
            "errors": list(self.errors),
            "counts": {
                status: sum(cell.status == status for cell in self.cells)
                for status in ("exported", "training", "left_out", "error")
            },
        }


def det_submit_body(source: str) -> str | None:
    """The body of a `%%det_submit` cell as IPython hands it to the magic, else None."""
    if cell_magic_name(source) != "det_submit":
        return None
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None
    for node in tree.body:
        call = _ipython_call(node.value) if isinstance(node, ast.Expr) else None
        if call and call[0] == "run_cell_magic" and len(call[1]) >= 3:
            return str(call[1][2])
    return None


def _summary(source: str) -> str:
    line = next((line.strip() for line in source.splitlines() if line.strip()), "")
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


def _checked_cells(cells: Any) -> list[dict]:
    if not isinstance(cells, list):
        raise ValueError(f"cells: expected a list of nbformat cells, got {type(cells).__name__}")
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise ValueError(f"cells[{index}]: expected a cell object, got {type(cell).__name__}")
        source = cell.get("source", "")
        if not (
            isinstance(source, str)
            or (isinstance(source, list) and all(isinstance(s, str) for s in source))
        ):
            raise ValueError(f"cells[{index}].source: expected a string or a list of strings")
    return cells


def preview_export(
    cells: list[dict], *, submit_cell_id: str | None = None, notebook_path: str | None = None
) -> ExportPreview:
    """What submitting `cells` (nbformat cell dicts, notebook order) would export.

    Without `submit_cell_id`: the whole notebook, as the toolbar's "Submit to Determined" sends
    it. With it: what that cell submits — a `%%det_submit` cell the cells above it and its body
    (the training code), a cell running `%det_submit` the cells above it.
    """
    cells = _checked_cells(cells)
    submit_index: int | None = None
    training_code: str | None = None
    if submit_cell_id is not None:
        ids = [cell.get("id") for cell in cells]
        if submit_cell_id not in ids:
            raise NotebookExportError(
                f"submit_cell_id: no cell with id {submit_cell_id!r} in the notebook"
            )
        submit_index = ids.index(submit_cell_id)
        training_code = det_submit_body(_cell_source(cells[submit_index]))

    previews: list[CellPreview] = []
    errors: list[str] = []
    warnings: list[str] = []
    # What goes to cells_to_script: cells with a syntax error are replaced by a stand-in it
    # leaves out, so the rest of the script can still be shown (the submission would fail).
    exportable: list[dict] = []
    converted: dict[int, tuple[str, list[str]]] = {}
    last = submit_index if submit_index is not None else len(cells)
    for index, cell in enumerate(cells[:last]):
        reason: str | None = skip_reason(cell)
        if reason is None:
            label = _cell_label(cell, index)
            try:
                code, cell_warnings = convert_cell(_cell_source(cell), label)
            except NotebookExportError as exc:
                errors.append(str(exc))
                exportable.append({"cell_type": "raw", "source": ""})
                continue
            converted[index] = (code, [w.removeprefix(f"{label}: ") for w in cell_warnings])
            warnings.extend(cell_warnings)
        exportable.append(cell)

    training_ok = training_code is not None
    if training_code is not None:
        label = "the submitting cell" + (f" (id {submit_cell_id})" if submit_cell_id else "")
        try:
            code, cell_warnings = convert_cell(training_code, label)
            converted[last] = (code, [w.removeprefix(f"{label}: ") for w in cell_warnings])
            warnings.extend(cell_warnings)
        except NotebookExportError as exc:
            errors.append(str(exc))
            training_ok = False

    exported = cells_to_script(
        exportable,
        training_code=training_code if training_ok else None,
        training_cell_id=submit_cell_id,
        training_cell_index=submit_index,
        training_line_offset=1,
        notebook_path=notebook_path,
        origin=notebook_path or "a notebook",
        source="cells",
    )
    placed = {cell.index: cell for cell in exported.cells}

    for index, cell in enumerate(cells):
        source = _cell_source(cell)
        base: dict[str, Any] = dict(
            index=index,
            id=str(cell["id"]) if cell.get("id") else None,
            cell_type=str(cell.get("cell_type", "code")),
            summary=_summary(source),
        )
        where = placed.get(index)
        lines = (where.line_offset + 1, where.line_offset + where.num_lines) if where else None
        cell_code, cell_warnings = converted.get(index, (None, []))
        if index == submit_index:
            if training_code is None:
                previews.append(
                    CellPreview(
                        **base,
                        status="left_out",
                        reason="submitting",
                        note=REASONS["submitting"],
                        warnings=[],
                        code=None,
                        script_lines=None,
                    )
                )
            elif training_ok:
                previews.append(
                    CellPreview(
                        **base,
                        status="training",
                        reason=None,
                        note="the training code (this cell's body)",
                        warnings=cell_warnings,
                        code=cell_code,
                        script_lines=lines,
                    )
                )
            else:
                previews.append(
                    CellPreview(
                        **base,
                        status="error",
                        reason="syntax_error",
                        note=errors[-1],
                        warnings=[],
                        code=None,
                        script_lines=None,
                    )
                )
            continue
        if submit_index is not None and index > submit_index:
            reason = "below"
        else:
            reason = skip_reason(cell)
        if reason is None and index not in converted:
            message = next(
                (error for error in errors if error.startswith(_cell_label(cell, index) + ":")),
                None,
            )
            previews.append(
                CellPreview(
                    **base,
                    status="error",
                    reason="syntax_error",
                    note=message or REASONS["syntax_error"],
                    warnings=[],
                    code=None,
                    script_lines=None,
                )
            )
        elif reason is None and where is not None:
            previews.append(
                CellPreview(
                    **base,
                    status="exported",
                    reason=None,
                    note=None,
                    warnings=cell_warnings,
                    code=cell_code,
                    script_lines=lines,
                )
            )
        else:
            previews.append(
                CellPreview(
                    **base,
                    status="left_out",
                    reason=reason,
                    note=REASONS.get(reason or "", "left out"),
                    warnings=[],
                    code=None,
                    script_lines=None,
                )
            )

    return ExportPreview(
        "cell" if submit_cell_id is not None else "notebook",
        notebook_path,
        submit_cell_id,
        previews,
        None if errors else exported.script,
        warnings,
        errors,
    )


__all__ = [
    "CellPreview",
    "ExportPreview",
    "REASONS",
    "det_submit_body",
    "preview_export",
    "skip_reason",
]
