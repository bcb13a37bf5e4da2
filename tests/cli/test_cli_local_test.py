"""`det e create --local --test`: one batch of a Trial class in this process, no master."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "pytorch_digits"


def _det(*args: str, cwd: pathlib.Path, tmp_path: pathlib.Path) -> subprocess.CompletedProcess:
    # No DET_MASTER and an empty root dir: a command that needs a master would fail.
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "MASTER_LITE_ROOT_DIR": str(tmp_path / "no-master"),
        "PYTHONPATH": f"{REPO / 'harness'}:{REPO}",
    }
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_local_test_runs_one_batch_of_a_trial_class_without_a_master(tmp_path):
    storage = tmp_path / "ckpts"
    result = _det(
        "e",
        "create",
        "--local",
        "--test",
        "const.yaml",
        ".",
        "--config",
        f"checkpoint_storage.host_path={storage}",
        "--config",
        "checkpoint_storage.type=shared_fs",
        cwd=EXAMPLE,
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Local test of one batch passed" in result.stdout
    # The one checkpoint of the test run holds the trainer's files and its metadata.
    metadata = list(storage.rglob("metadata.json"))
    assert len(metadata) == 1, sorted(storage.rglob("*"))
    assert (metadata[0].parent / "state_dict.pth").exists()


def test_local_test_refuses_a_script_entrypoint_with_advice(tmp_path):
    (tmp_path / "exp.yaml").write_text(
        "name: x\nentrypoint: python3 train.py\nsearcher: {name: single, metric: x}\n"
    )
    result = _det(
        "e", "create", "--local", "--test", "exp.yaml", ".", cwd=tmp_path, tmp_path=tmp_path
    )
    assert result.returncode == 1
    assert "needs a Trial class entrypoint" in result.stderr
    assert "Traceback" not in result.stderr
