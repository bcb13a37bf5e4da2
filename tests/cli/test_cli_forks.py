"""`det experiment fork`, `det experiment continue`, `det trial rerun`, `det trial continue`
through a real master-lite, as subprocesses the way a user types them (issue 28 item 10)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests._support import MasterProcess, child_env, submit, wait_for_experiment

pytestmark = pytest.mark.slow

TRAIN_PY = """
import pathlib
from determined import core

with core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(
            steps_completed=op.length, metrics={"loss": 1 / op.length}
        )
        with core_context.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (pathlib.Path(path) / "weights").write_text(str(op.length))
        op.report_completed(1 / op.length)
"""


def _det(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _created_id(answer: subprocess.CompletedProcess) -> int:
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.startswith("Created experiment "), answer.stdout
    return int(answer.stdout.split()[2])


def test_fork_and_continue_from_the_cli(tmp_path) -> None:
    with MasterProcess(tmp_path / "root") as master:
        config = {
            "name": "cli-forks",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 0.2}},
            "searcher": {"name": "random", "metric": "loss", "max_trials": 2, "max_length": 2},
        }
        parent_id = submit(master, config, {"train.py": TRAIN_PY})
        wait_for_experiment(master, parent_id, {"COMPLETED"})
        trials = master.trials(parent_id)
        env = child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})

        # Fork with an override: the parent's config and model definition, one trial.
        forked = _created_id(
            _det(env, "e", "fork", str(parent_id), "--config", "searcher.max_trials=1", "--paused")
        )
        experiment = master.session.get(f"/experiments/{forked}")["experiment"]
        assert experiment["parent_id"] == parent_id and experiment["state"] == "PAUSED"
        assert experiment["config"]["searcher"]["max_trials"] == 1

        # Fork with a config file of one's own: that config, the parent's model definition.
        config_file = tmp_path / "forked.yaml"
        config_file.write_text(
            "name: from-a-file\nentrypoint: python3 train.py\n"
            "searcher: {name: single, metric: loss, max_length: 1}\n"
        )
        from_file = _created_id(
            _det(env, "e", "fork", str(parent_id), "--config-file", str(config_file))
        )
        wait_for_experiment(master, from_file, {"COMPLETED"})
        assert master.session.get(f"/experiments/{from_file}")["experiment"]["name"] == (
            "from-a-file"
        )

        # Re-run a trial's hyperparameters; continue it from its checkpoint, longer.
        rerun = _created_id(_det(env, "trial", "rerun", str(trials[0]["id"])))
        wait_for_experiment(master, rerun, {"COMPLETED"})
        assert master.trials(rerun)[0]["hparams"] == trials[0]["hparams"]
        continued = _created_id(
            _det(env, "t", "continue", str(trials[1]["id"]), "--max-length", "5", "--paused")
        )
        searcher = master.session.get(f"/experiments/{continued}")["experiment"]["config"][
            "searcher"
        ]
        assert searcher["source_trial_id"] == trials[1]["id"] and searcher["max_length"] == 5

        # `det e continue` needs to know which trial when there are several.
        answer = _det(env, "e", "continue", str(parent_id))
        assert answer.returncode == 1
        assert f"experiment {parent_id} has 2 trials: say which to continue" in answer.stderr
        assert _created_id(_det(env, "e", "continue", str(rerun), "--max-length", "4", "--paused"))
