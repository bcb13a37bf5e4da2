"""End to end through the `det` CLI only: a real master-lite subprocess, real trial processes.

Every interaction goes through `python -m determined.cli ...` in a subprocess that finds the master
through `MASTER_LITE_ROOT_DIR/master.json`, exactly as a user's shell would.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

from tests._support import MasterProcess, child_env

pytestmark = pytest.mark.slow


TRAIN_PY = """
import json
import pathlib

import determined as det
from determined import core

info = det.get_cluster_info()
hparams = info.trial.hparams
print("hparams " + json.dumps(hparams, sort_keys=True), flush=True)
if hparams.get("fail"):
    raise SystemExit("failing on purpose")

with core.init() as core_context:
    steps = 0
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            loss = hparams["lr"] * hparams["layers"] / steps
            core_context.train.report_training_metrics(steps_completed=steps, metrics={"loss": loss})
        core_context.train.report_validation_metrics(steps_completed=steps, metrics={"loss": loss})
        with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, uuid):
            (pathlib.Path(path) / "weights.json").write_text(json.dumps({"steps": steps, **hparams}))
        op.report_completed(loss)
print("done training", flush=True)
"""

CONFIG = """
name: cli-e2e
entrypoint: python3 train.py
max_restarts: 0
searcher:
  name: random
  metric: loss
  max_trials: 4
  max_length: {batches: 3}
  max_concurrent_trials: 2
hyperparameters:
  lr: {type: double, minval: 0.001, maxval: 0.1}
  layers: {type: int, minval: 1, maxval: 4}
  opt: {type: categorical, vals: [sgd, adam]}
  fail: false
reproducibility: {experiment_seed: 1234}
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    """The master's root dir: the CLI finds the master through its master.json."""
    root = tmp_path_factory.mktemp("master-root")
    with MasterProcess(root, cpu_slots=None, env=_env(root)):
        yield root


def _env(root: pathlib.Path) -> dict:
    """What the user's shell would have: no DET_* settings, MASTER_LITE_ROOT_DIR naming the root."""
    return child_env({"MASTER_LITE_ROOT_DIR": str(root)})


def det(master: pathlib.Path, *args: str, cwd: pathlib.Path | None = None, timeout: float = 240):
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=_env(master),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def det_json(master: pathlib.Path, *args: str):
    result = det(master, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def create(master: pathlib.Path, tmp_path: pathlib.Path, config: str, *flags: str):
    context = tmp_path / "model"
    context.mkdir(exist_ok=True)
    (context / "train.py").write_text(TRAIN_PY)
    config_path = tmp_path / "exp.yaml"
    config_path.write_text(config)
    return det(master, "e", "create", str(config_path), str(context), *flags)


def created_id(result) -> int:
    assert result.returncode == 0, result.stdout + result.stderr
    match = re.search(r"Created experiment (\d+)", result.stdout)
    assert match, result.stdout
    return int(match.group(1))


def sorted_hparams(described: dict) -> list[str]:
    return sorted(json.dumps(t["hparams"], sort_keys=True) for t in described["trials"])


def test_random_search_runs_to_completion_with_hparams_in_range(master, tmp_path):
    exp_id = created_id(create(master, tmp_path, CONFIG))

    waited = det(master, "e", "wait", str(exp_id), "--polling-interval", "0.5")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "COMPLETED" in waited.stdout

    described = det_json(master, "e", "describe", str(exp_id))
    assert described["experiment"]["state"] == "COMPLETED"
    trials = described["trials"]
    assert len(trials) == 4
    for trial in trials:
        assert trial["state"] == "COMPLETED"
        hp = trial["hparams"]
        assert 0.001 <= hp["lr"] <= 0.1
        assert isinstance(hp["layers"], int) and 1 <= hp["layers"] <= 4
        assert hp["opt"] in ("sgd", "adam")
        assert trial["latest_validation"]["steps_completed"] == 3

    logs = det(master, "t", "logs", str(trials[0]["id"]))
    assert logs.returncode == 0, logs.stderr
    printed = "hparams " + json.dumps(trials[0]["hparams"], sort_keys=True)
    log_lines = logs.stdout.splitlines()
    assert any(line.startswith("[") and line.endswith(printed) for line in log_lines), logs.stdout
    assert any(line.endswith("done training") for line in log_lines)

    tail = det(master, "t", "logs", str(trials[0]["id"]), "--tail", "1")
    assert tail.stdout.splitlines() == log_lines[-1:]

    listed = det_json(master, "e", "list")
    assert exp_id in [e["id"] for e in listed]
    table = det(master, "e", "list")
    assert [h.strip() for h in table.stdout.splitlines()[0].split(" | ")][:3] == [
        "ID",
        "Owner",  # Determined's columns (docs/cli.md)
        "Name",
    ]

    # The same experiment seed gives the same hyperparameters.
    again = created_id(create(master, tmp_path, CONFIG))
    assert det(master, "e", "wait", str(again), "--polling-interval", "0.5").returncode == 0
    assert sorted_hparams(det_json(master, "e", "describe", str(again))) == sorted_hparams(
        described
    )


def test_checkpoint_list_and_download(master, tmp_path):
    single = CONFIG.replace("name: random", "name: single").replace("  max_trials: 4\n", "")
    single = single.replace("  max_concurrent_trials: 2\n", "")
    single = single.replace(
        "hyperparameters:\n  lr: {type: double, minval: 0.001, maxval: 0.1}\n  layers: "
        "{type: int, minval: 1, maxval: 4}",
        "hyperparameters:\n  lr: 0.05\n  layers: 2",
    ).replace("  opt: {type: categorical, vals: [sgd, adam]}\n", "  opt: sgd\n")
    exp_id = created_id(create(master, tmp_path, single))
    assert det(master, "e", "wait", str(exp_id), "--polling-interval", "0.5").returncode == 0

    checkpoints = det_json(master, "checkpoint", "list", str(exp_id))
    assert checkpoints and checkpoints[0]["state"] == "COMPLETED"
    uuid = checkpoints[-1]["uuid"]
    assert checkpoints[-1]["steps_completed"] == 3

    direct = det(master, "c", "download", uuid, "-o", str(tmp_path / "direct"), "-q")
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout.strip() == str(tmp_path / "direct")
    through_master = det(
        master, "c", "download", uuid, "-o", str(tmp_path / "via"), "--mode", "master"
    )
    assert through_master.returncode == 0, through_master.stderr
    assert uuid in through_master.stdout
    for dest in (tmp_path / "direct", tmp_path / "via"):
        weights = json.loads((dest / "weights.json").read_text())
        assert weights["steps"] == 3 and weights["lr"] == 0.05
        assert json.loads((dest / "metadata.json").read_text())["steps_completed"] == 3

    default = det(master, "c", "download", uuid, "-q", cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert (tmp_path / "checkpoints" / uuid / "weights.json").exists()


def test_invalid_config_prints_every_error_and_creates_nothing(master, tmp_path):
    before = det_json(master, "e", "list", "--all")
    bad = CONFIG.replace("minval: 0.001, maxval: 0.1", "minval: 0.1, maxval: 0.001").replace(
        "  max_trials: 4\n", ""
    )
    result = create(master, tmp_path, bad)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "searcher.max_trials" in result.stderr and "hyperparameters.lr" in result.stderr

    malformed = create(master, tmp_path, "name: x\nsearcher: {name: single\n")
    assert (
        malformed.returncode == 1
        and "exp.yaml" in malformed.stderr
        and "Traceback" not in malformed.stderr
    )
    assert det_json(master, "e", "list", "--all") == before


def test_failing_experiment_wait_and_follow_exit_1(master, tmp_path):
    failing = CONFIG.replace("  max_trials: 4\n", "  max_trials: 1\n").replace(
        "fail: false", "fail: true"
    )
    followed = create(master, tmp_path, failing, "-f")
    assert followed.returncode == 1, followed.stdout + followed.stderr
    assert "Waiting for first trial to begin..." in followed.stdout
    assert re.search(r"Following first trial with ID \d+", followed.stdout)
    assert "failing on purpose" in followed.stdout
    assert "ERROR" in followed.stderr
    exp_id = created_id(subprocess.CompletedProcess([], 0, followed.stdout, ""))

    waited = det(master, "e", "wait", str(exp_id), "--polling-interval", "0.5")
    assert waited.returncode == 1
    assert "ERROR" in waited.stdout

    missing = det(master, "e", "wait", "999999")
    assert (
        missing.returncode == 1
        and "not found" in missing.stderr
        and "Traceback" not in missing.stderr
    )


def test_follow_successful_experiment_exits_0(master, tmp_path):
    one = CONFIG.replace("  max_trials: 4\n", "  max_trials: 1\n")
    followed = create(master, tmp_path, one, "-f")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert "done training" in followed.stdout
    assert "completed" in followed.stdout


def test_test_mode_runs_one_batch_in_an_archived_experiment(master, tmp_path):
    before = {e["id"] for e in det_json(master, "e", "list")}
    result = create(master, tmp_path, CONFIG, "--test")
    assert result.returncode == 0, result.stdout + result.stderr
    for stage in (
        "Scheduling task",
        "Testing training",
        "Testing validation",
        "Testing checkpointing",
    ):
        assert f"[x] {stage}" in result.stdout
    assert "Model definition test succeeded!" in result.stdout
    test_id = int(re.search(r"Created test experiment (\d+)", result.stdout).group(1))

    assert {e["id"] for e in det_json(master, "e", "list")} == before  # archived: hidden by default
    described = det_json(master, "e", "describe", str(test_id))
    experiment = described["experiment"]
    assert experiment["archived"] is True
    assert experiment["description"].startswith("[test-mode] ")
    assert experiment["config"]["searcher"]["name"] == "single"
    assert [t["steps_completed"] for t in described["trials"]] == [1]
