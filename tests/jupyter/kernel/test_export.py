"""Notebook → script export: IPython syntax, det-skip, saved vs unsaved notebooks, history."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from jupyter_determined import NotebookExportError, cells_to_script, export_notebook_script
from jupyter_determined.kernel._current_notebook import frontend_notebook
from jupyter_determined.kernel._export import convert_cell


def cell(source: str, cell_id: str, tags: list[str] | None = None) -> dict:
    made = new_code_cell(source)
    made["id"] = cell_id
    if tags:
        made.metadata["tags"] = tags
    return made


# --- converting IPython syntax ---------------------------------------------------------------


def test_magics_with_python_equivalents_are_converted() -> None:
    code, warnings = convert_cell(
        "%cd sub\n%env MODE=fast\n%time y = 2\n%load_ext jupyter_determined\n%det list\n"
    )
    assert "__import__('os').chdir('sub')" in code
    assert "__import__('os').environ['MODE'] = 'fast'" in code
    assert "\ny = 2\n" in code
    assert warnings == []  # our own magics are dropped silently


def test_shell_lines_and_other_magics_are_dropped_with_a_warning() -> None:
    source = (
        "import os\n%matplotlib inline\n%pip install torch\nfor name in ['a']:\n"
        "    !echo $name\n    files = !ls\n    print(name)\n"
    )
    code, warnings = convert_cell(source, "cell 3")
    compile(code, "exported", "exec")  # still valid Python: the loop body keeps its lines
    assert "    pass  # [det] dropped: !echo $name" in code
    assert "    files = None  # [det] dropped: files = !ls" in code
    assert "get_ipython" not in code
    assert sorted(warnings) == sorted(
        [
            "cell 3: IPython magic dropped (it does not run in the trial): %matplotlib inline",
            "cell 3: IPython magic dropped (it does not run in the trial): %pip install torch",
            "cell 3: shell command dropped (it does not run in the trial): !echo $name",
            "cell 3: shell command dropped (it does not run in the trial): files = !ls",
        ]
    )


def test_percent_signs_inside_strings_are_not_magics() -> None:
    source = 'text = """\n%not_a_magic\n!not_a_shell_line\n"""\nratio = 7 % 3\n'
    code, warnings = convert_cell(source)
    assert code == source and warnings == []


def test_cell_magics(tmp_path) -> None:
    timed, _ = convert_cell("%%time\nz = 3\n%time w = 4\n")
    assert timed == "z = 3\nw = 4\n"
    written, _ = convert_cell("%%writefile notes.txt\nhello\n")
    bash, warnings = convert_cell("%%bash\nls\n", "cell 9")
    assert bash.startswith("pass  # [det] dropped")
    assert warnings == ["cell 9: cell magic %%bash dropped (it does not run in the trial)"]
    # The converted writefile really writes the file.
    subprocess.run([sys.executable, "-c", written], cwd=tmp_path, check=True)
    assert (tmp_path / "notes.txt").read_text() == "hello\n"


def test_a_syntax_error_names_the_cell() -> None:
    with pytest.raises(NotebookExportError, match=r"cell 2 \(id bad\): line 1: .*det-skip"):
        cells_to_script([cell("x = 1", "ok"), cell("def broken(:\n", "bad")])


# --- cells → script -------------------------------------------------------------------------


def test_script_order_and_what_is_left_out() -> None:
    cells = [
        cell("import math", "a"),
        new_markdown_cell("# notes"),
        cell("plot_everything()", "b", tags=["det-skip"]),
        cell("%%det_submit other.yaml\nold_training()", "c"),
        cell("   \n", "empty"),
        cell("radius = 2", "d"),
    ]
    exported = cells_to_script(
        cells, training_code="area = math.pi * radius ** 2\nprint(area)\n", training_cell_id="e"
    )
    assert exported.cell_ids == ["a", "d", "e"]
    script = exported.script
    assert "plot_everything" not in script and "old_training" not in script
    assert script.index("import math") < script.index("radius = 2") < script.index("area =")
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "12.566370614359172"


def test_export_notebook_script_from_a_file(tmp_path) -> None:
    notebook = new_notebook(
        cells=[cell("a = 1", "one"), cell("b = a + 1", "two"), cell("print(b)", "three")]
    )
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook, path)
    whole = export_notebook_script(path)
    assert whole.notebook_path == str(path) and whole.cell_ids == ["one", "two", "three"]
    above = export_notebook_script(path, stop_before_cell="three", training_code="print(b * 10)")
    assert above.cell_ids == ["one", "two"]
    out = subprocess.run([sys.executable, "-c", above.script], capture_output=True, text=True)
    assert out.stdout.strip() == "20"
    with pytest.raises(NotebookExportError, match="no cell with id 'nine'"):
        export_notebook_script(path, stop_before_cell="nine")


# --- the running kernel's notebook (an in-process IPython shell) ------------------------------


EXPORT_ABOVE = (
    "from jupyter_determined.kernel._current_notebook import current_notebook_export\n"
    "exported = current_notebook_export(which='above_current')"
)


def run(shell, source: str) -> None:
    result = shell.run_cell(source, store_history=True)
    assert result.success, result.error_in_exec or result.error_before_exec


def test_saved_notebook_is_exported_in_notebook_order_with_det_skip(
    shell, tmp_path, monkeypatch
) -> None:
    cells = [
        cell("b = a * 2", "second"),
        cell("a = 21", "first"),
        cell("print('only here')", "skip", tags=["det-skip"]),
        cell(EXPORT_ABOVE, "export"),
    ]
    path = tmp_path / "saved.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    run(shell, "a = 21")
    run(shell, "b = a * 2")  # run out of notebook order
    run(shell, EXPORT_ABOVE)
    exported = shell.user_ns["exported"]
    assert exported.source == "file" and exported.notebook_path == str(path)
    assert exported.cell_ids == ["second", "first"]  # notebook order, det-skip left out
    assert "only here" not in exported.script
    assert exported.warnings == []


def test_unsaved_changes_fall_back_to_the_kernel_history(shell, tmp_path, monkeypatch) -> None:
    path = tmp_path / "stale.ipynb"
    nbformat.write(new_notebook(cells=[cell("a = 1", "one"), cell("old = True", "two")]), path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    run(shell, "a = 1")
    run(shell, "a = 2  # edited, not saved")
    run(shell, EXPORT_ABOVE)
    exported = shell.user_ns["exported"]
    assert exported.source == "history"
    assert "a = 2  # edited, not saved" in exported.script and "old = True" not in exported.script
    assert any("not in the saved notebook" in w and "unsaved" in w for w in exported.warnings)


def test_without_a_notebook_path_the_history_is_exported(shell) -> None:
    run(shell, "x = 1")
    run(shell, "%config InteractiveShell.ast_node_interactivity = 'last_expr'")
    run(shell, EXPORT_ABOVE)
    exported = shell.user_ns["exported"]
    assert exported.source == "history" and exported.notebook_path is None
    assert exported.cell_ids == ["history-1", "history-2"]
    assert any("JPY_SESSION_NAME" in w for w in exported.warnings)
    assert any("%config InteractiveShell" in w for w in exported.warnings)


def test_the_frontend_snapshot_wins_over_the_saved_file(shell, tmp_path, monkeypatch) -> None:
    path = tmp_path / "saved.ipynb"
    nbformat.write(
        new_notebook(cells=[cell("a = 'from the file'", "one"), cell(EXPORT_ABOVE, "two")]), path
    )
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    # What the labextension pushes over the comm: the notebook with unsaved edits.
    frontend_notebook._on_message(
        {
            "content": {
                "data": {
                    "path": str(path),
                    "cells": [
                        cell("a = 'edited in the browser'", "one"),
                        cell(EXPORT_ABOVE, "two"),
                    ],
                }
            }
        }
    )
    run(shell, EXPORT_ABOVE)
    exported = shell.user_ns["exported"]
    assert exported.source == "frontend"
    assert "edited in the browser" in exported.script and "from the file" not in exported.script


def test_current_notebook_script_for_the_native_api_includes_later_cells(
    shell, tmp_path, monkeypatch
) -> None:
    native = (
        "from jupyter_determined import current_notebook_script\n"
        "result = current_notebook_script(warn=False)"
    )
    cells = [
        cell("%pip install nothing\nsetup = 1", "one"),
        cell(native, "two"),
        cell("model_fit = True", "three"),
    ]
    path = tmp_path / "native.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    run(shell, "setup = 1")
    run(shell, native)
    script, notebook_path, cell_ids = shell.user_ns["result"]
    assert notebook_path == str(path)
    assert cell_ids == ["one", "two", "three"]  # the cells after it run in the trial
    assert "model_fit = True" in script and "setup = 1" in script
