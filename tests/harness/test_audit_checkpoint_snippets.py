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
    fetch = "import sys\n" + code.split("\nimport sys\n", 1)[1].split("trial = pytorch.", 1)[0]
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
