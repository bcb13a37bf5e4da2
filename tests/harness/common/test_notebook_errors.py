"""determined.common.notebook_errors: a script's frames named by notebook cell, and the marker."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

from determined.common import notebook_errors
from determined.common.notebook_errors import NotebookScript, ScriptCell

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_cell_lines_with_and_without_a_line_map() -> None:
    plain = ScriptCell(id="a", index=2, execution_count=None, line_offset=10, num_lines=3)
    assert [plain.cell_line(n) for n in (10, 11, 13, 14)] == [None, 1, 3, None]
    timed = ScriptCell(
        id="b", index=3, execution_count=4, line_offset=20, num_lines=2, line_map=(2, 3)
    )  # a %%time cell: its body starts on the cell's line 2
    assert [timed.cell_line(n) for n in (21, 22)] == [2, 3]
    assert plain.label() == "cell 3 (id a)" and timed.label() == "cell 4 (id b, In [4])"
    assert ScriptCell(None, 0, None, 0, 1).label() == "cell 1"


def test_marker_round_trip_and_other_lines() -> None:
    record = {
        "notebook": "/w/nb.ipynb",
        "cell_id": "c",
        "cell_index": 1,
        "line": 2,
        "exception": "ValueError: boom",
    }
    line = notebook_errors.marker_line(record)
    assert line.startswith("DET_NOTEBOOK_ERROR {") and "\n" not in line
    assert notebook_errors.parse_marker(line) == record
    assert notebook_errors.parse_marker("ordinary output") is None
    assert notebook_errors.parse_marker("DET_NOTEBOOK_ERROR not json") is None
    assert notebook_errors.parse_marker("DET_NOTEBOOK_ERROR [1, 2]") is None
    assert notebook_errors.parse_marker(" DET_NOTEBOOK_ERROR {}") is None  # not at the start


def test_exception_text_is_one_short_line() -> None:
    assert notebook_errors.exception_text(ValueError("boom")) == "ValueError: boom"
    assert notebook_errors.exception_text(KeyError()) == "KeyError"
    assert notebook_errors.exception_text(json.JSONDecodeError("bad", "x", 0)).startswith(
        "json.decoder.JSONDecodeError: bad"
    )
    long = notebook_errors.exception_text(RuntimeError("x" * 5000))
    assert len(long) == notebook_errors.MAX_EXCEPTION_CHARS and long.endswith("...")


SCRIPT = """\
import sys
sys.path.insert(0, {helpers!r})
__import__("determined.common.notebook_errors").common.notebook_errors.install(
    __file__, {table!r})
import helper_module
def f():
    helper_module.fail()
f()
"""


def test_the_hook_renames_only_the_scripts_frames(tmp_path: pathlib.Path) -> None:
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    (helpers / "helper_module.py").write_text("def fail():\n    raise ValueError('boom')\n")
    table = {
        "notebook": "/w/nb.ipynb",
        "cells": [
            {"id": "def", "index": 1, "execution_count": 7, "line_offset": 4, "num_lines": 3},
            {"id": "call", "index": 3, "execution_count": None, "line_offset": 7, "num_lines": 1},
        ],
    }
    script = tmp_path / "_det_notebook_cell.py"
    script.write_text(SCRIPT.format(helpers=str(helpers), table=table))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "harness")}
    done = subprocess.run(
        [sys.executable, script.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "Traceback (most recent call last):",
        '  File "Cell In[ ] (cell 4)", line 1, in <module>',
        "    f()",
        '  File "Cell In[7]", line 3, in f',
        "    helper_module.fail()",
        f'  File "{helpers / "helper_module.py"}", line 2, in fail',
        "    raise ValueError('boom')",
        "ValueError: boom",
        'DET_NOTEBOOK_ERROR {"notebook": "/w/nb.ipynb", "cell_id": "def", "cell_index": 1, '
        '"line": 3, "exception": "ValueError: boom", "execution_count": 7, '
        '"code_number": null, "first_line": null}',
    ]


def test_a_relative_script_name_still_matches_after_a_chdir(tmp_path: pathlib.Path) -> None:
    """runpy.run_path("x__det__.py") compiles with the relative name; `%cd` in a cell (exported
    as os.chdir) moves away from it before the failure."""
    script = tmp_path / "nb__det__.py"
    (tmp_path / "sub").mkdir()
    table = {
        "notebook": None,
        "cells": [
            {"id": "only", "index": 0, "execution_count": None, "line_offset": 3, "num_lines": 2}
        ],
    }
    script.write_text(
        textwrap.dedent(f"""\
        __import__("determined.common.notebook_errors").common.notebook_errors.install(
            __file__, {table!r})
        # the cell:
        __import__("os").chdir("sub")
        raise KeyError("k")
        """)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "harness")}
    done = subprocess.run(
        [sys.executable, "-c", "import runpy; runpy.run_path('nb__det__.py', run_name='__main__')"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert '  File "Cell In[ ] (cell 1)", line 2, in <module>' in done.stderr
    marker = done.stderr.strip().splitlines()[-1]
    assert notebook_errors.parse_marker(marker) == {
        "notebook": None,
        "cell_id": "only",
        "cell_index": 0,
        "line": 2,
        "exception": "KeyError: 'k'",
        "execution_count": None,
        "code_number": None,
        "first_line": None,
    }


def test_an_exception_outside_the_cells_prints_as_usual_without_a_marker() -> None:
    script = NotebookScript(
        "/x/_det_notebook_cell.py", "/w/nb.ipynb", [ScriptCell("a", 0, None, 10, 2)]
    )
    try:
        raise RuntimeError("not in a cell")
    except RuntimeError as exc:
        error = exc
    text = script.format_exception(type(error), error, error.__traceback__)
    assert "test_notebook_errors.py" in text and "nb.ipynb" not in text
    assert script.error_record(error, error.__traceback__) is None


def test_an_error_re_raised_outside_the_cells_is_named_by_its_cause() -> None:
    """A harness that wraps the user's exception in its own: the cell is the cause's."""
    script = NotebookScript("/x/nb__det__.py", "/w/nb.ipynb", [ScriptCell("cell", 4, None, 0, 3)])
    cell_code = compile(
        "def train():\n    x = 1\n    raise ZeroDivisionError('in the cell')\n",
        "/x/nb__det__.py",
        "exec",
    )
    namespace: dict = {}
    exec(cell_code, namespace)
    try:
        try:
            namespace["train"]()
        except ZeroDivisionError as inner:
            raise RuntimeError("the harness failed") from inner
    except RuntimeError as exc:
        outer = exc
    assert script.error_record(outer, outer.__traceback__) == {
        "notebook": "/w/nb.ipynb",
        "cell_id": "cell",
        "cell_index": 4,
        "line": 3,
        "exception": "ZeroDivisionError: in the cell",
        "execution_count": None,
        "code_number": None,
        "first_line": None,
    }
