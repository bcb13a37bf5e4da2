"""Determined's exit wording in a failed trial's logs, beside this master's own.

Determined's e2e `test_core.py` runs `det experiment create --test-mode --config=entrypoint=exit 99`
and greps the CLI's stdout for "resources failed with non-zero exit code"; its `test_launch.py`
greps a trial's logs for "failed with non-zero exit code: 1" (its agents say `container`). Both
are checked here against a real master and the real CLI, with this master's own
`exited with code N` line still there.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support import MasterProcess, all_logs, child_env, submit, wait_for_experiment

pytestmark = pytest.mark.slow

CONFIG = """
name: exit-wording
entrypoint: python3 train.py
searcher: {name: single, metric: loss, max_length: {batches: 1}}
max_restarts: 0
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterProcess]:
    root = tmp_path_factory.mktemp("exit-wording-master")
    with MasterProcess(root, env={"MASTER_LITE_ROOT_DIR": str(root)}) as process:
        yield process


def test_test_mode_exit_99_prints_determineds_words(master: MasterProcess, tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text("print('never run')\n")
    (tmp_path / "const.yaml").write_text(CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "determined.cli", "experiment", "create", "--test-mode"]
        + ["--config=entrypoint=exit 99", str(tmp_path / "const.yaml"), str(context)],
        env=child_env({"MASTER_LITE_ROOT_DIR": str(master.root_dir)}),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    assert "resources failed with non-zero exit code" in done.stdout, done.stdout
    assert "process failed with non-zero exit code: 99 (exit code 99)" in done.stdout
    assert "exited with code 99" in done.stdout  # ours, still there


def test_a_failing_trial_logs_both_lines(master: MasterProcess) -> None:
    exp_id = submit(
        master,
        {
            "name": "exit-1",
            "entrypoint": "python3 train.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
            "max_restarts": 0,
        },
        {"train.py": "import sys\nsys.exit(1)\n"},
    )
    experiment = wait_for_experiment(master, exp_id, timeout=120)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "ERROR", logs[-3000:]
    assert "exited with code 1" in logs
    assert "failed with non-zero exit code: 1" in logs  # Determined's test_launch grep
    assert "crashed: resources failed with non-zero exit code" in logs
