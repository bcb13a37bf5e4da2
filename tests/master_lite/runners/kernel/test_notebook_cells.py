"""A notebook's script in a kernel trial runs cell by cell: one traceback, in the notebook's
coordinates (`Cell In[7], line 3`, as IPython names a notebook's own cells), and a post-mortem
debugger that lists the cell's lines, not the exported script's."""

from __future__ import annotations

import io
import json
import pdb
import re
import sys

import pytest
from IPython.core.interactiveshell import InteractiveShell
from nbformat.v4 import new_code_cell, new_markdown_cell
from traitlets.config import Config

from determined.common import notebook_errors
from jupyter_determined import cells_to_script
from master_lite.runners.kernel._program import (
    KernelProgram,
    program_cell,
    setup_cell,
    trial_traceback,
)

BUILD = "def build(n):\n    x = n * 2\n    raise ValueError(f'bad {x}')\n"
CALL = "%%time\nm = 1\nmodel = build(m)\n"  # IPython syntax: line 1 is gone from the script


def code(source: str, cell_id: str, count: int | None):
    made = new_code_cell(source, execution_count=count)
    made["id"] = cell_id
    return made


@pytest.fixture
def shell():
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    instance = InteractiveShell.instance(config=config)
    saved_path, saved_argv, saved_hook = list(sys.path), list(sys.argv), sys.excepthook
    yield instance
    sys.path[:], sys.argv[:], sys.excepthook = saved_path, saved_argv, saved_hook
    InteractiveShell.clear_instance()


def test_a_failing_notebook_shows_one_traceback_in_cells_and_pdb_lists_the_cell(
    shell, tmp_path, capsys
) -> None:
    cells = [
        new_markdown_cell("# Failing"),
        code(BUILD, "build", 5),
        code("print('never ran')", "idle", None),
        code(CALL, "call", 7),
    ]
    exported = cells_to_script(cells, notebook_path="/w/nb.ipynb")
    script = tmp_path / "_det_notebook_cell.py"
    script.write_text(exported.script)
    shell.run_cell(setup_cell(cwd=str(tmp_path)), silent=True)
    capsys.readouterr()

    sent: list[list[str]] = []  # what the kernel sends in its `error` message
    show = shell._showtraceback
    shell._showtraceback = lambda etype, value, stb: (sent.append(stb), show(etype, value, stb))
    result = shell.run_cell(program_cell(KernelProgram("path", str(script), [])))

    assert isinstance(result.error_in_exec, ValueError)
    out, err = capsys.readouterr()
    both = re.sub(r"\x1b\[[0-9;]*m", "", out + err)  # as the runner logs it: no colours
    # IPython's own traceback, once, naming the cells as their prompts do; no script lines.
    assert both.count("Traceback (most recent call last)") == 1, both
    assert "Cell In[7], line 3" in both and "Cell In[5], line 3" in both, both
    assert "_det_notebook_cell.py:" not in both, both  # IPython's frame of a file: `File x.py:9`
    assert "never ran" in both  # the cells above did run, in order
    [marker] = [line for line in err.splitlines() if line.startswith(notebook_errors.MARKER)]
    assert json.loads(marker.split(" ", 1)[1]) == {
        "notebook": "/w/nb.ipynb",
        "cell_id": "build",
        "cell_index": 1,
        "line": 3,
        "exception": "ValueError: bad 2",
        "execution_count": 5,
        "code_number": 1,
        "first_line": "def build(n):",
    }

    # The trial's log (the runner's lines of that message): the program's frames only, not
    # the runner's cell, which the kernel calls `Cell In[1]` (a number of no notebook cell).
    logged = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(trial_traceback(sent[0])))
    assert logged.count("Cell In[") == 2 and "_determined_run_trial" not in logged, logged
    assert "skipping hidden" not in logged and logged.endswith("ValueError: bad 2"), logged

    # Debug in console: `%debug` is pdb on the kept traceback; `list` shows the cell's lines.
    commands, shown = io.StringIO("where\nlist\nup\nlist\nquit\n"), io.StringIO()
    debugger = pdb.Pdb(stdin=commands, stdout=shown)
    debugger.use_rawinput = False
    debugger.reset()
    debugger.interaction(None, sys.last_traceback)
    text = shown.getvalue()
    assert "> <Cell In[5]>(3)build()" in text, text
    assert "  3  ->\t    raise ValueError(f'bad {x}')" in text, text
    assert "> <Cell In[7]>(3)<module>()" in text, text
    assert "  3  ->\tmodel = build(m)" in text, text


def test_a_script_that_is_no_notebook_export_compiles_whole(tmp_path) -> None:
    assert notebook_errors.compile_cells("x = 1\n", str(tmp_path / "plain.py")) is None
    # Naming the hook without its table: still run whole (the interpreter reports the rest).
    odd = "import x\nx.notebook_errors.install(__file__)\n"
    assert notebook_errors.compile_cells(odd, str(tmp_path / "odd.py")) is None
