"""`det.import_from_path(path)` (Determined 0.21+): a context manager importing from a directory."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import pytest

import determined as det

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _write(directory: pathlib.Path, source: str, name: str = "model_def.py") -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(textwrap.dedent(source))
    return directory


def test_imports_a_same_named_module_from_each_directory_and_cleans_up(tmp_path, monkeypatch):
    current = _write(tmp_path / "current", "VERSION = 'current'\n")
    checkpoint = _write(tmp_path / "checkpoint", "VERSION = 'checkpoint'\n")
    _write(checkpoint / "helpers", "", "__init__.py")
    _write(checkpoint / "helpers", "VALUE = 3\n", "util.py")
    monkeypatch.chdir(current)
    monkeypatch.syspath_prepend("")  # the script's directory, as `python train.py` has it
    monkeypatch.delitem(sys.modules, "model_def", raising=False)
    path_before = list(sys.path)

    import model_def as new_model_def  # noqa: PLC0415 (from the current directory)

    assert new_model_def.VERSION == "current"
    with det.import_from_path(checkpoint):
        assert sys.path[0] == str(checkpoint) and "" not in sys.path
        import model_def as old_model_def  # noqa: PLC0415
        from helpers import util  # noqa: PLC0415

    assert old_model_def.VERSION == "checkpoint" and util.VALUE == 3
    assert old_model_def is not new_model_def
    # Afterwards: the current module is back, the checkpoint's ones are gone, sys.path restored.
    assert sys.modules["model_def"] is new_model_def
    assert "helpers" not in sys.modules and "helpers.util" not in sys.modules
    assert sys.path == path_before
    assert not list(checkpoint.rglob("__pycache__"))  # nothing written into the checkpoint
    sys.modules.pop("model_def", None)


def test_accepts_a_pathlike_and_restores_state_after_an_error(tmp_path):
    checkpoint = _write(tmp_path / "ckpt", "raise ValueError('broken model_def')\n")
    path_before, dont_write = list(sys.path), sys.dont_write_bytecode
    with pytest.raises(ValueError, match="broken model_def"):
        with det.import_from_path(checkpoint):
            import model_def  # noqa: F401, PLC0415
    assert sys.path == path_before and sys.dont_write_bytecode == dont_write
    assert "model_def" not in sys.modules
    with det.import_from_path(str(checkpoint)):  # usable again after the failure
        pass


def test_nesting_and_concurrent_use_are_refused(tmp_path):
    with det.import_from_path(tmp_path):
        with pytest.raises(RuntimeError, match="does not support nesting"):
            with det.import_from_path(tmp_path):
                pass
        errors: list[BaseException] = []

        def other_thread() -> None:
            try:
                with det.import_from_path(tmp_path):
                    pass
            except RuntimeError as err:
                errors.append(err)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert len(errors) == 1
    with det.import_from_path(tmp_path):  # released after the outer block
        pass


def test_import_determined_exports_it_without_frameworks():
    code = (
        "import sys, determined as det; "
        "assert callable(det.import_from_path) and 'import_from_path' in det.__all__; "
        "print(sorted(m for m in ('tensorflow', 'torch') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "harness"), str(ROOT)])}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
