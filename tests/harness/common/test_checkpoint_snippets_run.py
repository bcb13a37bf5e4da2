"""The PyTorch "Use in notebook" cell fetches the experiment's code and unpacks it, on every
Python the package supports: here the code-fetching part of the cell runs for real in each
interpreter on this machine (a stand-in `client` serves a real tarball), e.g. Debian 12's
Python 3.11.2, whose tarfile has no extraction filters (they came in 3.10.12 and 3.11.4)."""

from __future__ import annotations

import io
import pathlib
import subprocess
import sys
import tarfile
import textwrap

import pytest

from determined.common.checkpoint_snippets import checkpoint_snippet


def after_download(code: str) -> str:
    """The cell's code after the checkpoint's download, up to the loader."""
    rest = code.split("path = checkpoint.download()", 1)[1].split("\n", 1)[1]
    return rest.split("trial = pytorch.", 1)[0]


def interpreters() -> list[str]:
    found = {sys.executable}
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if pathlib.Path(candidate).exists():
            found.add(candidate)
    return sorted(found)


STAND_IN_CLIENT = """
import pathlib


class _Experiment:
    def download_code(self, output_dir):
        pathlib.Path(output_dir).mkdir(parents=True, exist_ok=True)
        return TARBALL


class client:
    @staticmethod
    def get_experiment(experiment_id):
        assert experiment_id == 7, experiment_id
        return _Experiment()
"""


@pytest.mark.parametrize("python", interpreters())
def test_the_pytorch_cell_unpacks_the_experiments_code_on_every_python(tmp_path, python):
    code = checkpoint_snippet(
        {
            "uuid": "u-1",
            "trial_id": 3,
            "experiment_id": 7,
            "steps_completed": 10,
            "metadata": {"framework": "torch-2.5.1", "format": "pickle"},
        }
    )["code"]
    # The part of the cell before the loader (which needs torch and a real checkpoint).
    fetch = after_download(code)
    fetch = fetch.replace("from determined import pytorch\n", "")

    data = b"class MyTrial:\n    pass\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("model_def.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tarball = tmp_path / "exp-7_model_def.tar.gz"
    tarball.write_bytes(buffer.getvalue())

    script = (
        f"TARBALL = {str(tarball)!r}\n"
        + textwrap.dedent(STAND_IN_CLIENT)
        + fetch
        + "\nimport model_def\nprint('imported', model_def.MyTrial.__name__)\n"
    )
    result = subprocess.run(
        [python, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "imported MyTrial"
    assert (tmp_path / "checkpoints" / "experiment-7-code" / "model_def.py").read_bytes() == data


def model_def_tarball(path: pathlib.Path, marker: str) -> pathlib.Path:
    data = f"class MyTrial:\n    MARKER = {marker!r}\n".encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("model_def.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return path


def test_a_second_experiments_cell_loads_that_experiments_trial_class_not_the_first(tmp_path):
    """Two experiments whose code has the same module name (model_def.py), used one after the
    other in one kernel: each cell must import its own experiment's trial class, as the
    loader does (importlib.import_module of the module the checkpoint names)."""
    cells = []
    for exp_id in (7, 8):
        code = checkpoint_snippet(
            {
                "uuid": f"u-{exp_id}",
                "trial_id": 1,
                "experiment_id": exp_id,
                "metadata": {"framework": "torch-2.5.1", "format": "pickle"},
            }
        )["code"]
        fetch = after_download(code)
        cells.append(fetch.replace("from determined import pytorch\n", ""))
    tarballs = {
        7: model_def_tarball(tmp_path / "exp-7.tar.gz", "first"),
        8: model_def_tarball(tmp_path / "exp-8.tar.gz", "second"),
    }
    client = """
import importlib
import pathlib


class _Experiment:
    def __init__(self, experiment_id):
        self.experiment_id = experiment_id

    def download_code(self, output_dir):
        pathlib.Path(output_dir).mkdir(parents=True, exist_ok=True)
        return TARBALLS[self.experiment_id]


class client:
    @staticmethod
    def get_experiment(experiment_id):
        return _Experiment(experiment_id)
"""
    load = "print(importlib.import_module('model_def').MyTrial.MARKER)\n"
    script = (
        f"TARBALLS = {{7: {str(tarballs[7])!r}, 8: {str(tarballs[8])!r}}}\n"
        + client
        + cells[0]
        + load
        + cells[1]
        + load
        + cells[0]  # and back to the first
        + load
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["first", "second", "first"]
