"""`det model ...` through a real master-lite: every verb as a subprocess, as a user types it,
with its table, CSV and JSON output, and the one-line errors of Determined's registry rules."""

from __future__ import annotations

import csv
import io
import json
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
        for step in range(1, op.length + 1):
            core_context.train.report_validation_metrics(
                steps_completed=step, metrics={"loss": 1 / step}
            )
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (pathlib.Path(path) / "weights").write_text(str(step))
        op.report_completed(1 / op.length)
"""


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("model-cli-root")) as process:
        yield process


@pytest.fixture(scope="module")
def checkpoints(master) -> list[str]:
    """The uuids of a finished experiment's checkpoints (all kept), by step."""
    config = {
        "name": "model-cli",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 2}},
        "checkpoint_storage": {"save_trial_best": 5, "save_trial_latest": 5},
    }
    exp_id = submit(master, config, {"train.py": TRAIN_PY})
    wait_for_experiment(master, exp_id, {"COMPLETED"})
    found = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    return [c["uuid"] for c in sorted(found, key=lambda c: c["steps_completed"])]


@pytest.fixture(scope="module")
def env(master) -> dict:
    return child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})


def det(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def failed(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stdout
    assert "Traceback" not in result.stderr
    return result.stderr


def test_create_list_describe_and_edit(env):
    made = json.loads(
        ok(det(env, "model", "create", "cli-model", "--description", "digits", "--json"))
    )
    assert (made["name"], made["description"], made["num_versions"]) == ("cli-model", "digits", 0)
    ok(det(env, "m", "create", "cli-other", "--label", "nlp", "--metadata", '{"team": "x"}'))

    table = ok(det(env, "model", "list", "--sort-by", "name"))
    assert table.index("cli-model") < table.index("cli-other")
    rows = list(csv.reader(io.StringIO(ok(det(env, "model", "ls", "--csv", "--label", "nlp")))))
    assert rows[0][:2] == ["ID", "Name"] and [r[1] for r in rows[1:]] == ["cli-other"]
    listed = json.loads(ok(det(env, "model", "list", "--json", "--order-by", "desc")))
    assert [m["name"] for m in listed][:2] == ["cli-other", "cli-model"]

    ok(det(env, "model", "edit", "cli-model", "--notes", "readme", "--label", "cv"))
    ok(det(env, "model", "add-metadata", "cli-model", "accuracy=0.9", "owner=ml", "tags=[1,2]"))
    ok(det(env, "model", "remove-metadata", "cli-model", "owner"))
    described = json.loads(ok(det(env, "model", "describe", "cli-model", "--json")))
    assert described["notes"] == "readme" and described["labels"] == ["cv"]
    assert described["metadata"] == {"accuracy": 0.9, "tags": [1, 2]}
    assert described["model_version"] is None
    text = ok(det(env, "model", "describe", str(made["id"])))  # an id works as well
    assert "cli-model" in text and "readme" in text

    ok(det(env, "model", "edit", "cli-other", "--name", "cli-renamed"))
    assert "cli-renamed" in ok(det(env, "model", "list"))


def test_versions(env, checkpoints):
    first, second = checkpoints
    ok(det(env, "model", "create", "cli-versions"))
    out = ok(det(env, "model", "register-version", "cli-versions", first, "--name", "base"))
    assert f"Registered checkpoint {first} as version 1 of cli-versions" in out
    version = json.loads(
        ok(det(env, "model", "register-version", "cli-versions", second, "--json"))
    )
    assert version["version"] == 2 and version["checkpoint"]["steps_completed"] == 2

    table = ok(det(env, "model", "list-versions", "cli-versions"))
    assert first in table and second in table and "base" in table
    versions = json.loads(ok(det(env, "model", "list-versions", "cli-versions", "--json")))
    assert [v["version"] for v in versions] == [1, 2]
    latest = json.loads(ok(det(env, "model", "describe", "cli-versions", "--json")))
    assert latest["model_version"]["checkpoint_uuid"] == second
    chosen = ok(det(env, "model", "describe", "cli-versions", "--version", "1"))
    assert first in chosen and second not in chosen

    ok(det(env, "model", "edit-version", "cli-versions", "1", "--notes", "the baseline"))
    versions = json.loads(ok(det(env, "model", "list-versions", "cli-versions", "--json")))
    assert versions[0]["notes"] == "the baseline"

    refused = failed(det(env, "model", "delete-version", "cli-versions", "9"))
    assert "model 'cli-versions' has no version 9 (its versions: 1, 2)" in refused
    ok(det(env, "model", "delete-version", "cli-versions", "2"))
    versions = json.loads(ok(det(env, "model", "list-versions", "cli-versions", "--json")))
    assert [v["version"] for v in versions] == [1]


def test_archive_delete_and_errors(env, checkpoints):
    ok(det(env, "model", "create", "cli-archived"))
    assert "Archived model cli-archived" in ok(det(env, "model", "archive", "cli-archived"))
    assert "cli-archived" in ok(det(env, "model", "list", "--archived"))
    assert "cli-archived" not in ok(det(env, "model", "list", "--unarchived"))
    refused = failed(det(env, "model", "register-version", "cli-archived", checkpoints[0]))
    assert "archived and cannot register new versions: unarchive it first" in refused
    assert "Unarchived" in ok(det(env, "model", "unarchive", "cli-archived"))
    ok(det(env, "model", "register-version", "cli-archived", checkpoints[0]))
    deleted = ok(det(env, "model", "delete", "cli-archived"))
    assert "Deleted model cli-archived and its 1 version(s)" in deleted

    ok(det(env, "model", "create", "cli-dup"))
    assert "a model named 'cli-dup' already exists" in failed(
        det(env, "model", "create", "cli-dup")
    )
    assert "cannot be only numbers" in failed(det(env, "model", "create", "42"))
    assert "model 'nope' not found" in failed(det(env, "model", "describe", "nope"))
    assert "checkpoint missing-uuid not found" in failed(
        det(env, "model", "register-version", "cli-dup", "missing-uuid")
    )
    assert "--metadata: expected a JSON object" in failed(
        det(env, "model", "create", "cli-bad", "--metadata", "[1]")
    )
    assert "nothing to change" in failed(det(env, "model", "edit", "cli-dup"))
