"""The export preview: which cells a submission exports and why the others are left out —
`preview_export` directly, the same script as `%%det_submit` exports, and the endpoint the
labextension calls in a real jupyter_server (pytest-jupyter)."""

from __future__ import annotations

import json

import pytest
import tornado.httpclient

from jupyter_determined.kernel._current_notebook import current_notebook_export, frontend_notebook
from jupyter_determined.server._preview import det_submit_body, preview_export, skip_reason
from tests._support.hosted import hosted_server_config

pytest_plugins = ["pytest_jupyter.jupyter_server"]


def code(source: str, cell_id: str, tags: list[str] | None = None) -> dict:
    return {"cell_type": "code", "id": cell_id, "source": source, "metadata": {"tags": tags or []}}


NOTEBOOK = [
    {"cell_type": "markdown", "id": "intro", "source": "# Training", "metadata": {}},
    code("%load_ext jupyter_determined", "load"),
    code("import os\n!pip install tqdm\n%matplotlib inline\nscale = 2", "setup"),
    code("scratch = undefined_name  # exploring", "scratch", tags=["det-skip"]),
    code("   \n", "blank"),
    code("%%det_submit other.yaml\nprint('another experiment')", "other"),
    code("%%det_submit config.yaml\nprint(scale * 21)\n!nvidia-smi", "submit"),
    code("print('after the submitting cell')", "later"),
]


def by_id(preview) -> dict:
    return {cell.id: cell for cell in preview.cells}


def test_each_cell_says_whether_it_goes_in_and_why_not() -> None:
    preview = preview_export(NOTEBOOK, submit_cell_id="submit", notebook_path="train.ipynb")
    cells = by_id(preview)
    assert preview.mode == "cell" and preview.errors == []
    assert [(c.id, c.status, c.reason) for c in preview.cells] == [
        ("intro", "left_out", "markdown"),
        ("load", "exported", None),
        ("setup", "exported", None),
        ("scratch", "left_out", "det-skip"),
        ("blank", "left_out", "empty"),
        ("other", "left_out", "det_submit"),
        ("submit", "training", None),
        ("later", "left_out", "below"),
    ]
    assert cells["scratch"].note == "tagged det-skip"
    assert "another %%det_submit cell" in cells["other"].note
    # IPython lines: dropped with the warning the submission prints, `pass` in their place.
    assert cells["setup"].warnings == [
        "shell command dropped (it does not run in the trial): !pip install tqdm",
        "IPython magic dropped (it does not run in the trial): %matplotlib inline",
    ]
    assert "pass  # [det] dropped: !pip install tqdm" in cells["setup"].code
    assert cells["submit"].code == "print(scale * 21)\npass  # [det] dropped: !nvidia-smi\n"
    assert cells["submit"].summary == "%%det_submit config.yaml"
    # script_lines point at the cell's code in the script.
    lines = preview.script.splitlines()
    first, last = cells["setup"].script_lines
    assert lines[first - 1 : last] == cells["setup"].code.splitlines()
    assert "undefined_name" not in preview.script and "after the" not in preview.script
    counts = preview.to_json()["counts"]
    assert counts == {"exported": 2, "training": 1, "left_out": 5, "error": 0}


def test_without_a_submitting_cell_the_whole_notebook_is_previewed() -> None:
    """What the toolbar's "Submit to Determined" sends: every cell, no training body."""
    preview = preview_export(NOTEBOOK)
    cells = by_id(preview)
    assert preview.mode == "notebook"
    assert cells["later"].status == "exported" and cells["submit"].reason == "det_submit"


def test_a_line_magic_submission_exports_the_cells_above_it() -> None:
    cells = [code("a = 1", "a"), code("%det_submit config.yaml", "submit"), code("b = 2", "b")]
    preview = preview_export(cells, submit_cell_id="submit")
    assert [(c.status, c.reason) for c in preview.cells] == [
        ("exported", None),
        ("left_out", "submitting"),
        ("left_out", "below"),
    ]


def test_a_syntax_error_is_shown_on_its_cell_and_the_submission_would_fail() -> None:
    cells = [
        code("ok = 1", "ok"),
        code("def broken(:\n    pass", "broken"),
        code("%%det_submit\nprint(ok)", "submit"),
    ]
    preview = preview_export(cells, submit_cell_id="submit")
    broken = by_id(preview)["broken"]
    assert broken.status == "error" and broken.reason == "syntax_error"
    assert broken.note.startswith("cell 2 (id broken): line 1:") and "det-skip" in broken.note
    assert preview.errors == [broken.note] and preview.script is None
    assert by_id(preview)["ok"].status == "exported"
    # Tagging it det-skip is the fix the message names.
    cells[1]["metadata"]["tags"] = ["det-skip"]
    assert preview_export(cells, submit_cell_id="submit").errors == []


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="submit_cell_id: no cell with id 'nope'"):
        preview_export(NOTEBOOK, submit_cell_id="nope")
    with pytest.raises(ValueError, match=r"cells\[1\]: expected a cell object"):
        preview_export([code("a = 1", "a"), "b = 2"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="cells: expected a list"):
        preview_export({"cells": []})  # type: ignore[arg-type]


def test_helpers() -> None:
    assert det_submit_body("\n%%det_submit cfg --wait\nx = 1\ny = 2\n") == "x = 1\ny = 2\n"
    assert det_submit_body("%det_submit cfg") is None
    assert skip_reason({"cell_type": "raw", "source": "x"}) == "raw"
    assert skip_reason(code("x", "x", tags=["det-skip", "other"])) == "det-skip"
    assert skip_reason({"cell_type": "code", "source": ["x = 1\n", "y = 2"]}) is None


# --- the same script as the magic -------------------------------------------------------------


def test_the_preview_is_what_det_submit_exports(shell) -> None:
    captured = {}

    def det_submit(line: str, cell: str) -> None:  # what %%det_submit exports, minus the POST
        captured["export"] = current_notebook_export(
            shell, which="above_current", training_code=cell
        )

    shell.register_magic_function(det_submit, "cell", "det_submit")
    frontend_notebook._on_message({"content": {"data": {"path": "train.ipynb", "cells": NOTEBOOK}}})
    result = shell.run_cell(NOTEBOOK[6]["source"], store_history=True)
    assert result.success, result.error_in_exec
    exported = captured["export"]
    preview = preview_export(NOTEBOOK, submit_cell_id="submit", notebook_path="train.ipynb")
    # The prelude's cell table holds execution counts only the kernel knows; the code is equal.
    assert exported.script.split("\n# --- ", 1)[1] == preview.script.split("\n# --- ", 1)[1]
    assert [(c.index, c.line_offset + 1, c.line_offset + c.num_lines) for c in exported.cells] == [
        (c.index, *c.script_lines) for c in preview.cells if c.script_lines
    ]
    assert exported.cell_ids == [
        c.id for c in preview.cells if c.status in ("exported", "training")
    ]


# --- the endpoint in a real jupyter_server ----------------------------------------------------


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch):
    return hosted_server_config(tmp_path, monkeypatch, cpu_slots=1)


# The first preview imports IPython's transformers in a worker thread: seconds on a loaded
# two-core CI machine, past tornado's 20 s default when browser tests run beside it.
PATIENT = {"request_timeout": 120}


async def test_the_endpoint_answers_the_preview(jp_fetch) -> None:
    response = await jp_fetch(
        "determined",
        "export-preview",
        method="POST",
        body=json.dumps({"cells": NOTEBOOK, "submit_cell_id": "submit", "path": "train.ipynb"}),
        **PATIENT,
    )
    answer = json.loads(response.body)
    assert answer["mode"] == "cell" and answer["notebook_path"] == "train.ipynb"
    assert answer["counts"] == {"exported": 2, "training": 1, "left_out": 5, "error": 0}
    scratch = next(cell for cell in answer["cells"] if cell["id"] == "scratch")
    assert scratch["status"] == "left_out" and scratch["note"] == "tagged det-skip"
    assert answer["script"].startswith("# Exported from train.ipynb by jupyter_determined")


async def test_the_endpoint_refuses_bad_requests_with_a_message(jp_fetch) -> None:
    for body, message in [
        (
            {"cells": NOTEBOOK, "submit_cell_id": "%%nope"},
            "submit_cell_id: no cell with id '%%nope'",
        ),
        ([1, 2], 'expected a JSON object with "cells"'),
        ({"cells": "x = 1"}, "cells: expected a list"),
    ]:
        with pytest.raises(tornado.httpclient.HTTPClientError) as error:
            await jp_fetch(
                "determined", "export-preview", method="POST", body=json.dumps(body), **PATIENT
            )
        assert error.value.code == 400
        assert message in json.loads(error.value.response.body)["message"]


async def test_the_endpoint_needs_jupyters_authentication(jp_fetch) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as error:
        await jp_fetch(
            "determined",
            "export-preview",
            method="POST",
            body=json.dumps({"cells": []}),
            headers={"Authorization": ""},
        )
    assert error.value.code == 403
