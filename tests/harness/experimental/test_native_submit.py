"""The Native API's submit side and trial runner, without a master and without TensorFlow."""

from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest

from determined.common import expconf
from determined.exec import native as exec_native
from determined.experimental import (
    Mode,
    RunpyGlobals,
    _native,
    build_native_config,
    notebook_to_script,
)
from determined.experimental._mode import resolve_mode

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_native_config_merges_defaults_and_sets_the_native_command():
    config = build_native_config(
        {
            "searcher": {"name": "single", "metric": "val_loss", "max_length": {"batches": 7}},
            "hyperparameters": {"global_batch_size": 8},
        },
        ["train.py", "--lr", "0.1"],
    )
    assert config["internal"]["native"]["command"] == ["train.py", "--lr", "0.1"]
    assert config["entrypoint"] == "python3 -m determined.exec.native"
    # The user's section replaces the default one as a whole (shallow merge, Determined 0.12.5).
    assert config["searcher"] == {
        "name": "single",
        "metric": "val_loss",
        "max_length": {"batches": 7},
    }
    assert config["scheduling_unit"] == 100
    assert config["resources"] == {"slots_per_trial": 1, "native_parallel": False}
    expconf.check(config)  # the validator accepts internal.native.command


def test_keras_defaults_give_a_searcher_metric():
    from determined.experimental.keras import KERAS_DEFAULTS

    config = build_native_config(
        {"hyperparameters": {"global_batch_size": 8}}, ["t.py"], defaults=KERAS_DEFAULTS
    )
    assert config["searcher"]["metric"] == "val_loss"
    assert config["searcher"]["max_length"] == {"batches": 100}


def test_native_test_config_is_one_batch_of_one_sample():
    config = build_native_config(
        {
            "searcher": {
                "name": "random",
                "metric": "val_accuracy",
                "smaller_is_better": False,
                "max_trials": 5,
                "max_length": {"batches": 500},
            },
            "hyperparameters": {
                "global_batch_size": 8,
                "hidden": {"type": "int", "minval": 4, "maxval": 9},
            },
        },
        ["train.py"],
        test=True,
    )
    assert config["searcher"] == {
        "name": "single",
        "metric": "val_accuracy",
        "smaller_is_better": False,
        "max_length": {"batches": 1},
    }
    assert config["scheduling_unit"] == 1 and config["max_restarts"] == 0
    hidden = config["hyperparameters"]["hidden"]
    assert hidden["type"] == "const" and 4 <= hidden["val"] <= 9
    assert config["description"].startswith("[test-mode] ")
    assert config["internal"]["native"]["command"] == ["train.py"]


def test_invalid_native_config_lists_the_problem_with_its_path():
    with pytest.raises(expconf.InvalidConfig) as info:
        build_native_config(
            {"searcher": {"name": "random", "metric": "x", "max_length": {"batches": 5}}}, ["t.py"]
        )
    assert any(error.startswith("searcher.max_trials") for error in info.value.errors)


@pytest.mark.parametrize("command", [[], [""], ["train.sh"]])
def test_bad_commands_are_refused(command):
    with pytest.raises(ValueError, match="command="):
        build_native_config({}, command)


def test_default_command_is_the_script_relative_to_the_context(tmp_path, monkeypatch):
    script = tmp_path / "sub" / "train.py"
    script.parent.mkdir()
    script.write_text("")
    monkeypatch.setattr(sys, "argv", [str(script), "--epochs", "3"])
    assert _native.default_command(str(tmp_path)) == ["sub/train.py", "--epochs", "3"]
    with pytest.raises(ValueError, match="not inside it"):
        _native.default_command(str(tmp_path / "sub" / "elsewhere"))


def test_config_may_be_yaml_text_or_a_file(tmp_path):
    text = "searcher:\n  name: single\n  metric: val_loss\n  max_length: {batches: 3}\n"
    assert build_native_config(text, ["t.py"])["searcher"]["max_length"] == {"batches": 3}
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert build_native_config(str(path), ["t.py"])["searcher"]["max_length"] == {"batches": 3}


def _notebook():
    return {
        "cells": [
            {"cell_type": "markdown", "source": ["# title\n", "import nothing\n"]},
            {
                "cell_type": "code",
                "source": ["!pip install foo\n", "import os\n", "%matplotlib inline\n", "x = 1\n"],
            },
            {"cell_type": "code", "source": "%%bash\necho hi\n"},
            {"cell_type": "code", "source": "  !ls\nprint(x + 1)"},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_notebook_to_script_keeps_code_and_drops_shell_and_magics():
    script = notebook_to_script(_notebook())
    assert script == "import os\nx = 1\n\nprint(x + 1)\n"
    compile(script, "nb", "exec")


def test_runner_converts_an_ipynb_command_beside_the_notebook(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pathlib.Path("nb.ipynb").write_text(json.dumps(_notebook()))
    script = exec_native.script_for("nb.ipynb")
    assert script == "nb__det__.py"
    assert pathlib.Path(script).read_text() == "import os\nx = 1\n\nprint(x + 1)\n"
    assert exec_native.script_for("train.py") == "train.py"


def test_runner_reports_a_script_that_never_starts_training(tmp_path, capsys):
    script = tmp_path / "plain.py"
    script.write_text("import sys\nRESULT = sys.argv\n")
    assert exec_native.run([str(script), "--flag"]) == 1
    assert "finished without starting training" in capsys.readouterr().err
    assert RunpyGlobals.get() is None


def test_runner_runs_what_the_script_registered(tmp_path):
    marker = tmp_path / "trained"
    script = tmp_path / "native.py"
    script.write_text(
        "import sys, pathlib\n"
        "from determined.experimental import RunpyGlobals, StopLoadingImplementation\n"
        "g = RunpyGlobals.get()\n"
        "seen = ' '.join(sys.argv[1:])\n"
        f"g.register(lambda: pathlib.Path({str(marker)!r}).write_text(seen), 'test')\n"
        "raise StopLoadingImplementation()\n"
        "raise SystemExit('the rest of the script must not run')\n"
    )
    assert exec_native.run([str(script), "--a", "1"]) == 0
    # While loading, the script saw its own command line as sys.argv.
    assert marker.read_text() == "--a 1"


def test_registering_twice_is_refused():
    with RunpyGlobals() as runpy_globals:
        runpy_globals.register(lambda: None, "first")
        with pytest.raises(RuntimeError, match="Please don't load twice"):
            runpy_globals.register(lambda: None, "second")
    assert RunpyGlobals.get() is None


def test_native_command_comes_from_the_config():
    assert exec_native.native_command({"internal": {"native": {"command": ["a.py", "x"]}}}) == [
        "a.py",
        "x",
    ]
    with pytest.raises(ValueError, match="internal.native.command"):
        exec_native.native_command({})


def test_pack_context_adds_extra_files(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("")
    packed = _native.pack_context(
        str(tmp_path), {"__det_notebook__.py": b"x = 1\n", "pkg/extra.txt": b"e"}
    )
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(packed))) as tar:
        names = set(tar.getnames())
        assert tar.extractfile("__det_notebook__.py").read() == b"x = 1\n"
    assert {"train.py", "pkg/a.py", "pkg/extra.txt", "__det_notebook__.py"} <= names
    with pytest.raises(ValueError, match="relative path"):
        _native.pack_context(str(tmp_path), {"../x": b""})


@pytest.mark.parametrize(
    "local, test, mode, expected",
    [
        (False, False, None, (False, False)),
        (True, False, None, (True, False)),
        (True, True, None, (True, True)),
        (False, False, Mode.LOCAL, (True, True)),
        (False, True, Mode.CLUSTER, (False, True)),
        (Mode.LOCAL, False, None, (True, True)),
        (Mode.CLUSTER, False, None, (False, False)),
        (False, False, "local", (True, True)),
    ],
)
def test_mode_maps_onto_the_flags(local, test, mode, expected):
    assert resolve_mode(local, test, mode) == expected


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="Mode.CLUSTER or Mode.LOCAL"):
        resolve_mode(False, False, "submit")


def test_keras_init_without_context_dir_says_what_to_pass(monkeypatch):
    from determined.experimental import keras as native_keras

    for name in [k for k in os.environ if k.startswith("DET_")]:
        monkeypatch.delenv(name)
    with pytest.raises(ValueError, match="context_dir"):
        native_keras.init({"hyperparameters": {"global_batch_size": 8}})


def test_importing_the_native_api_does_not_import_tensorflow():
    code = (
        "import sys, determined as det\n"
        "import determined.experimental, determined.experimental.keras, determined.exec.native\n"
        "det.experimental.Mode, det.experimental.create\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'framework imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "harness"), str(ROOT)])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


class _Stopped(Exception):
    pass


def test_in_a_notebook_the_jupyter_hooks_export_submit_and_stop(monkeypatch):
    """The harness reaches jupyter_determined only through determined.common.hooks."""
    from determined.common import hooks

    registered = {
        hooks.NOTEBOOK_SCRIPT: lambda: ("x = 1\n", "/nb/demo.ipynb", ["c1"]),
        hooks.NOTEBOOK_SUBMITTED: lambda experiment_id: _Stopped(experiment_id),
    }
    monkeypatch.setattr(hooks, "get", registered.get)
    submitted = []
    monkeypatch.setattr(
        _native, "submit_native", lambda *args, **kwargs: submitted.append((args, kwargs)) or 7
    )
    with pytest.raises(_Stopped) as stopped:
        _native.submit_notebook_and_stop({}, ".", master_url=None, test=False, defaults=None)
    assert stopped.value.args == (7,)
    [(args, kwargs)] = submitted
    assert args[2] == ["demo__det__.py"]
    assert kwargs["extra_files"] == {"demo__det__.py": b"x = 1\n"}
    assert kwargs["notebook"] == {"path": "/nb/demo.ipynb", "cell_ids": ["c1"], "script": "x = 1\n"}


def test_in_a_notebook_without_jupyter_determined_nothing_is_submitted(monkeypatch):
    from determined.common import hooks

    monkeypatch.setattr(hooks, "get", lambda name: None)
    monkeypatch.setattr(_native, "submit_native", lambda *a, **k: pytest.fail("submitted"))
    with pytest.raises(ValueError, match=r"pass command=\['my_notebook.ipynb'\]"):
        _native.submit_notebook_and_stop({}, ".", master_url=None, test=False, defaults=None)
