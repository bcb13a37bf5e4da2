"""The Core API tutorial end to end: a real master-lite subprocess running real trial processes.

Each stage of examples/core_api is submitted with `POST /api/v1/experiments` (config + base64
context tarball), and the test asserts on what the master stored: metric series, progress,
checkpoints and their files, pause/activate behaviour.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from determined.common.api import Session
from tests._support import (
    TERMINAL_EXPERIMENT_STATES,
    TERMINAL_TRIAL_STATES,
    MasterProcess,
    context_tarball,
    directory_files,
    trials,
    wait_for_experiment,
    wait_until,
)

ROOT = pathlib.Path(__file__).resolve().parents[3]
STAGES = ROOT / "examples" / "core_api"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("core-e2e-master")) as process:
        yield process.session


def submit(session: Session, config_name: str) -> int:
    body = {
        "config": (STAGES / config_name).read_text(),
        "context": context_tarball(directory_files(STAGES)),
    }
    return session.post("/experiments", body)["experiment"]["id"]


def submit_script(session: Session, tmp_path: pathlib.Path, script: str, config: str) -> int:
    body = {"config": config, "context": context_tarball({"probe.py": script})}
    return session.post("/experiments", body)["experiment"]["id"]


def trial_logs(session: Session, exp_id: int) -> str:
    lines = []
    for trial in trials(session, exp_id):
        lines += [entry["line"] for entry in session.get(f"/trials/{trial['id']}/logs")["logs"]]
    return "\n".join(lines)


def series(session: Session, trial_id: int, group: str) -> list[tuple[int, dict]]:
    reports = session.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"]
    return [(r["steps_completed"], r["metrics"]) for r in reports]


def checkpoints(session: Session, exp_id: int) -> list[dict]:
    found = session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    return sorted(found, key=lambda c: c["steps_completed"])


def test_stage_0_runs_to_completion(master):
    exp_id = submit(master, "0_start.yaml")
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    assert "x is now 100" in trial_logs(master, exp_id)


def test_stage_1_reports_the_exact_series(master):
    exp_id = submit(master, "1_metrics.yaml")
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    logs = trial_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs
    (trial,) = trials(master, exp_id)
    assert series(master, trial["id"], "training") == [(s, {"x": s}) for s in range(10, 101, 10)]
    assert series(master, trial["id"], "validation") == [(100, {"x": 100})]
    assert trial["progress"] == pytest.approx(1.0)
    for level in ("DEBUG", "INFO", "WARNING", "ERROR"):
        assert f"{level.lower()}-level message" in logs
    assert checkpoints(master, exp_id) == []


def test_stage_2_pause_and_resume_from_the_checkpoint(master):
    exp_id = submit(master, "2_checkpoints.yaml")
    # Pause once the trial has checkpointed at least once (and is still far from done).
    wait_until(
        lambda: checkpoints(master, exp_id),
        120,
        "a checkpoint",
        details=lambda: trial_logs(master, exp_id),
    )
    master.post(f"/experiments/{exp_id}/pause")
    paused = wait_for_experiment(master, exp_id, {"PAUSED"} | TERMINAL_EXPERIMENT_STATES)
    assert paused["state"] == "PAUSED", trial_logs(master, exp_id)
    (trial,) = trials(master, exp_id)
    saved = checkpoints(master, exp_id)
    paused_at = saved[-1]["steps_completed"]
    assert paused_at < 100, "the trial finished before the pause reached it; nothing was tested"
    assert trial["latest_checkpoint"] == saved[-1]["uuid"]
    paused_state = pathlib.Path(saved[-1]["path"]) / "state"
    assert paused_state.read_text() == f"{paused_at},{paused_at},{trial['id']}"
    assert [s for s, _ in series(master, trial["id"], "training")] == list(
        range(10, paused_at + 1, 10)
    )
    assert series(master, trial["id"], "validation") == []

    master.post(f"/experiments/{exp_id}/activate")
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    (trial,) = trials(master, exp_id)
    assert trial["run_id"] >= 2
    # Resumed at the same batch: every step reported exactly once, x continued from the checkpoint.
    assert series(master, trial["id"], "training") == [(s, {"x": s}) for s in range(10, 101, 10)]
    assert series(master, trial["id"], "validation") == [(100, {"x": 100})]

    saved = checkpoints(master, exp_id)
    assert [c["steps_completed"] for c in saved] == list(range(10, 101, 10))
    assert saved[-1]["state"] == "COMPLETED"  # GC may delete older ones after the experiment ends
    for checkpoint in saved:
        steps = checkpoint["steps_completed"]
        assert checkpoint["metadata"] == {"steps_completed": steps}
        directory = pathlib.Path(checkpoint["path"])
        if checkpoint["state"] == "DELETED":
            assert not (directory / "state").exists()
            continue
        assert set(checkpoint["resources"]) == {"state", "metadata.json"}
        assert sorted(p.name for p in directory.iterdir()) == ["metadata.json", "state"]
        assert (directory / "state").read_text() == f"{steps},{steps},{trial['id']}"
        assert json.loads((directory / "metadata.json").read_text()) == {"steps_completed": steps}


def check_hpsearch_trial(session: Session, trial: dict) -> list[int]:
    """Every validation is at an op length, with x = length * increment_by; returns the lengths."""
    inc = trial["hparams"]["increment_by"]
    training = series(session, trial["id"], "training")
    steps = [s for s, _ in training]
    assert steps == sorted(set(steps)), f"trial {trial['id']} reported a step twice: {steps}"
    assert all(m == {"x": s * inc} for s, m in training)
    validations = series(session, trial["id"], "validation")
    assert validations, f"trial {trial['id']} never validated"
    assert all(m == {"x": s * inc} for s, m in validations)
    return [s for s, _ in validations]


@pytest.mark.timeout(360)
def test_stage_3_random_search(master):
    exp_id = submit(master, "3_hpsearch_random.yaml")
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=300)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    found = trials(master, exp_id)
    assert len(found) == 4
    for trial in found:
        assert trial["state"] == "COMPLETED"
        assert check_hpsearch_trial(master, trial) == [100]
        assert trial["progress"] == pytest.approx(1.0)


@pytest.mark.timeout(480)
def test_stage_3_adaptive_asha(master):
    exp_id = submit(master, "3_hpsearch.yaml")
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES, timeout=400)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    found = trials(master, exp_id)
    assert len(found) == 10
    lengths = [check_hpsearch_trial(master, trial) for trial in found]
    assert all(set(ls) <= {25, 100} for ls in lengths), lengths
    assert any(ls[-1] == 100 for ls in lengths)
    assert any(ls == [25] for ls in lengths), "ASHA stopped no trial at the first rung"
    assert experiment["best_validation"] is not None


PROBE = r"""
import json, logging, sys
import determined as det
from determined import core

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
results = {}
with det.core.init() as ctx:
    results["types"] = [type(ctx.train).__name__, type(ctx.checkpoint).__name__, type(ctx.searcher).__name__]
    results["best_before"] = ctx.train.get_experiment_best_validation()
    ctx.train.set_status("probing")
    try:
        with ctx.checkpoint.store_path({"note": "no steps"}) as (path, uuid):
            (path / "f").write_text("x")
    except ValueError as e:
        results["missing_steps"] = str(e)
    with ctx.checkpoint.store_path({"steps_completed": 5, "k": "v"}) as (path, kept):
        (path / "model").write_text("weights")
    results["metadata"] = ctx.checkpoint.get_metadata(kept)
    with ctx.checkpoint.store_path({"steps_completed": 6}) as (path, doomed):
        (path / "model").write_text("gone")
    ctx.checkpoint.delete(doomed)
    results["doomed_exists"] = path.exists()
    ctx.train.report_metrics("custom", 5, {"a": 1})
    for op in ctx.searcher.operations():
        results.setdefault("ops", []).append(op.length)
        ctx.train.report_training_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        op.report_progress(op.length / 2)
        ctx.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.25, "blob": b"x"})
        op.report_completed(0.25)
    results["preempt"] = ctx.preempt.should_preempt()
    results["kept"] = kept
    results["reporter"] = type(ctx.train._shipper).__name__
# Closing the context ended the report courier's child, after it posted everything.
results["courier_exit"] = ctx.train._shipper._proc.poll()
print("PROBE " + json.dumps(results), flush=True)
"""

PROBE_CONFIG = """
name: core-api-probe
entrypoint: python3 probe.py
searcher: {name: single, metric: loss, max_length: 7}
max_restarts: 0
"""


def test_core_api_on_the_master(master, tmp_path):
    exp_id = submit_script(master, tmp_path, PROBE, PROBE_CONFIG)
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    logs = trial_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs
    (line,) = [entry for entry in logs.splitlines() if entry.startswith("PROBE ")]
    results = json.loads(line[len("PROBE ") :])
    assert results["types"] == ["TrainContext", "CheckpointContext", "SearcherContext"]
    assert results["best_before"] is None
    assert "steps_completed" in results["missing_steps"]
    assert results["metadata"] == {"steps_completed": 5, "k": "v"}
    assert results["doomed_exists"] is False
    assert results["ops"] == [7]
    assert results["preempt"] is False
    assert (results["reporter"], results["courier_exit"]) == ("ReportCourier", 0)
    (trial,) = trials(master, exp_id)
    assert series(master, trial["id"], "training") == [(7, {"loss": 0.5})]
    assert series(master, trial["id"], "validation") == [(7, {"loss": 0.25})]  # bytes dropped
    assert series(master, trial["id"], "custom") == [(5, {"a": 1})]
    assert experiment["best_validation"] == pytest.approx(0.25)
    reported = {
        c["uuid"]: c for c in master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    }
    kept = reported[results["kept"]]
    assert kept["state"] == "COMPLETED" and kept["steps_completed"] == 5
    assert kept["resources"] == {
        "model": len("weights"),
        "metadata.json": kept["resources"]["metadata.json"],
    }
    # the deleted one is marked DELETED (or gone); the one without steps_completed was never reported
    assert all(c["state"] == "DELETED" for u, c in reported.items() if u != results["kept"])
    assert len(reported) <= 2


INVALID_HP = r"""
import determined as det
with det.core.init() as ctx:
    raise det.InvalidHP("this point cannot train")
"""


def test_invalid_hp_is_an_early_exit(master, tmp_path):
    exp_id = submit_script(
        master, tmp_path, INVALID_HP, PROBE_CONFIG.replace("core-api-probe", "invalid-hp")
    )

    # The trial exits 0 after reporting INVALID_HP; the searcher then replaces the point with a new
    # trial (which raises again, so the experiment is killed once that is seen).
    def replaced() -> list[dict] | None:
        found = trials(master, exp_id)
        return found if len(found) >= 2 and found[0]["state"] in TERMINAL_TRIAL_STATES else None

    found = wait_until(
        replaced,
        120,
        "a second trial after the first one ended",
        0.3,
        details=lambda: trial_logs(master, exp_id),
    )
    master.post(f"/experiments/{exp_id}/kill")
    assert found[0]["state"] == "COMPLETED" and found[0]["exit_code"] == 0, trial_logs(
        master, exp_id
    )
    wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)


@pytest.mark.rendezvous_ports
def test_stage_4_two_slots_allgather_and_ranked_logs(master):
    """Stage 4 launches one worker per slot; each batch adds the allgathered increments."""
    config = (
        (STAGES / "4_distributed.yaml")
        .read_text()
        .replace("slots_per_trial: 8", "slots_per_trial: 2")
    )
    body = {"config": config, "context": context_tarball(directory_files(STAGES))}
    exp_id = master.post("/experiments", body)["experiment"]["id"]
    experiment = wait_for_experiment(master, exp_id, TERMINAL_EXPERIMENT_STATES)
    assert experiment["state"] == "COMPLETED", trial_logs(master, exp_id)
    (trial,) = trials(master, exp_id)
    increment_by = trial["hparams"]["increment_by"]
    training = series(master, trial["id"], "training")
    # Only rank 0 reports; x grows by increment_by x world size (2) per batch.
    assert training == [(s, {"x": 2 * increment_by * s}) for s in range(10, 101, 10)]
    assert training[-1][1]["x"] == 200 * increment_by
    assert [c["steps_completed"] for c in checkpoints(master, exp_id)][-1] == 100
    logs = master.get(f"/trials/{trial['id']}/logs")["logs"]
    # As in the tutorial only rank 0 logs; wrap_rank's `[rank=0] ` prefix is stored as the rank.
    progress_lines = [entry for entry in logs if "x is now" in entry["line"]]
    assert progress_lines and all(entry["rank"] == 0 for entry in progress_lines)
    assert all(not entry["line"].startswith("[rank=") for entry in logs)
