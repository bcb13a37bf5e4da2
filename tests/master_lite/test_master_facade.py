"""The Master facade driven directly (no HTTP), with real trial subprocesses."""

import asyncio
import getpass
import io
import os
import signal
import tarfile

import pytest

from master_lite import errors
from master_lite._core import MetricsQuery
from master_lite._core._auth import TrialPrincipal, UserPrincipal
from master_lite._master import Master
from tests._support import tar_gz, wait_until_async

# Checkpoint uuids are UUIDs (the master refuses others).
CKPT_1 = "00000000-0000-4000-8000-0000000000c1"
U1 = "00000000-0000-4000-8000-0000000000a1"


def until(predicate, timeout=30.0, what="condition"):
    """The facade tests' waits: short and polled often (a whole test has 120 s)."""
    return wait_until_async(predicate, timeout, what, 0.05)


def config(*, max_trials=1, max_restarts=0, entrypoint="python3 train.py", **extra):
    return {
        "name": "facade-test",
        "entrypoint": entrypoint,
        "max_restarts": max_restarts,
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": max_trials,
            "max_length": {"batches": 10},
        },
        "hyperparameters": {
            "lr": {"type": "double", "minval": 0.1, "maxval": 1.0},
            "layers": {"type": "int", "minval": 1, "maxval": 4},
        },
        **extra,
    }


def run(test):
    """Run an async test body against a started master; always stop it."""

    def wrapper(tmp_path):
        async def body():
            master = Master(
                tmp_path / "root",
                cpu_slots=2,
                gpus=[],
                preemption_grace_seconds=1,
                terminate_grace_seconds=1,
                context_size_limit=1024 * 1024,
            )
            await master.start("http://127.0.0.1:9")
            try:
                await test(master, tmp_path)
            finally:
                await master.stop(pause_running=False)

        asyncio.run(asyncio.wait_for(body(), 120))

    wrapper.__name__ = test.__name__
    return wrapper


def experiment_state(master, exp_id):
    return master.views.get_experiment(exp_id)["state"]


TRAIN_OK = (
    b"import json, os, sys\n"
    b"hp = json.loads(os.environ['DET_HPARAMS'])\n"
    b"print('lr', hp['lr'], 'run', os.environ['DET_TRIAL_RUN_ID'])\n"
    b"sys.stderr.write('to stderr\\n')\n"
)


@pytest.mark.slow
@run
async def test_random_search_runs_four_trials_to_completion(master, tmp_path):
    context = tar_gz({"train.py": TRAIN_OK})
    exp = master.experiments.create_experiment(config(max_trials=4), context)
    assert exp["state"] == "ACTIVE" and exp["num_trials"] == 4
    await until(lambda: experiment_state(master, exp["id"]) == "COMPLETED", what="COMPLETED")
    trials = master.views.list_trials(exp["id"])
    assert len(trials) == 4
    assert {t["state"] for t in trials} == {"COMPLETED"}
    assert len({t["hparams"]["lr"] for t in trials}) == 4
    for trial in trials:
        assert 0.1 <= trial["hparams"]["lr"] < 1.0 and 1 <= trial["hparams"]["layers"] <= 4
        assert trial["exit_code"] == 0 and trial["end_time"] is not None
        logs = master.logs.get_logs(trial["id"])
        stdout = [entry["line"] for entry in logs if entry["stream"] == "stdout"]
        assert stdout == [f"lr {trial['hparams']['lr']} run 1"]
        assert [entry["line"] for entry in logs if entry["stream"] == "stderr"] == ["to stderr"]
    finished = master.views.get_experiment(exp["id"])
    assert finished["end_time"] is not None and finished["config"]["max_restarts"] == 0
    assert master.experiments.get_experiment_context(exp["id"]) == context


@pytest.mark.slow
@run
async def test_identical_contexts_are_stored_once(master, tmp_path):
    context = tar_gz({"train.py": TRAIN_OK})
    first = master.experiments.create_experiment(config(), context)
    second = master.experiments.create_experiment(config(), context)
    assert first["context_hash"] == second["context_hash"]
    assert len(list((tmp_path / "root" / "contexts").iterdir())) == 1


@pytest.mark.slow
@run
async def test_failing_trial_is_restarted_then_errors(master, tmp_path):
    script = b"import os\nprint('run', os.environ['DET_TRIAL_RUN_ID'])\nraise SystemExit(1)\n"
    exp = master.experiments.create_experiment(config(max_restarts=2), tar_gz({"train.py": script}))
    await until(
        lambda: experiment_state(master, exp["id"]) in ("ERROR", "COMPLETED"), what="experiment end"
    )
    [trial] = master.views.list_trials(exp["id"])
    assert trial["state"] == "ERROR" and trial["restarts"] == 2 and trial["exit_code"] == 1
    assert trial["run_id"] == 3
    runs = [entry["line"] for entry in master.logs.get_logs(trial["id"], stream="stdout")]
    assert runs == ["run 1", "run 2", "run 3"]
    assert experiment_state(master, exp["id"]) == "ERROR"


LONG_FIRST_RUN = (
    b"import os, time\n"
    b"print('started run', os.environ['DET_TRIAL_RUN_ID'],"
    b" os.environ.get('DET_LATEST_CHECKPOINT'), flush=True)\n"
    b"if os.environ['DET_TRIAL_RUN_ID'] == '1':\n"
    b"    time.sleep(60)\n"
)


def running_pid(master, trial_id):
    rows = master.store.select(
        "allocations", "trial_id = ? AND end_time IS NULL AND pid IS NOT NULL", (trial_id,)
    )
    return rows[0]["pid"] if rows else None


@pytest.mark.slow
@run
async def test_killed_process_is_restarted(master, tmp_path):
    exp = master.experiments.create_experiment(
        config(max_restarts=1), tar_gz({"train.py": LONG_FIRST_RUN})
    )
    [trial] = master.views.list_trials(exp["id"])
    pid = await until(lambda: running_pid(master, trial["id"]), what="trial start")
    await until(lambda: master.logs.get_logs(trial["id"], stream="stdout"), what="first output")
    os.killpg(pid, signal.SIGKILL)
    await until(lambda: experiment_state(master, exp["id"]) == "COMPLETED", what="COMPLETED")
    trial = master.views.get_trial(trial["id"])
    assert trial["state"] == "COMPLETED" and trial["restarts"] == 1 and trial["run_id"] == 2


@pytest.mark.slow
@run
async def test_pause_terminates_unresponsive_trial_and_activate_resumes(master, tmp_path):
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": LONG_FIRST_RUN}))
    [trial] = master.views.list_trials(exp["id"])
    await until(lambda: master.logs.get_logs(trial["id"], stream="stdout"), what="first output")
    allocation_id = master.views.get_trial(trial["id"])["allocation_id"]
    assert allocation_id == f"trial-{trial['id']}.1"
    assert await master.runs.wait_preemption(allocation_id, 0) is False
    master.checkpoints.report_checkpoint(
        {
            "uuid": CKPT_1,
            "trialId": trial["id"],
            "allocationId": allocation_id,
            "metadata": {"steps_completed": 5},
            "resources": {"model.pt": 10},
        }
    )

    waiter = asyncio.ensure_future(master.runs.wait_preemption(allocation_id, 30))
    paused = master.experiments.experiment_action(exp["id"], "pause")
    assert paused["state"] == "PAUSED"
    assert await waiter is True
    # The script ignores the signal: after the 1 s grace period it is terminated.
    await until(lambda: master.views.get_trial(trial["id"])["state"] == "PAUSED", what="PAUSED")
    assert master.views.get_trial(trial["id"])["restarts"] == 0

    with pytest.raises(errors.Conflict):
        master.experiments.experiment_action(exp["id"], "archive")
    master.experiments.experiment_action(exp["id"], "activate")
    await until(lambda: experiment_state(master, exp["id"]) == "COMPLETED", what="COMPLETED")
    lines = [entry["line"] for entry in master.logs.get_logs(trial["id"], stream="stdout")]
    assert lines == ["started run 1 None", f"started run 2 {CKPT_1}"]
    with pytest.raises(errors.Conflict):
        master.experiments.experiment_action(exp["id"], "activate")
    assert master.experiments.experiment_action(exp["id"], "archive")["archived"] is True
    assert master.views.list_experiments(archived=True)[0]["id"] == exp["id"]


@pytest.mark.slow
@run
async def test_kill_experiment_cancels_running_trials(master, tmp_path):
    exp = master.experiments.create_experiment(
        config(max_trials=2), tar_gz({"train.py": LONG_FIRST_RUN})
    )
    await until(
        lambda: all(running_pid(master, t["id"]) for t in master.views.list_trials(exp["id"])),
        what="both trials running",
    )
    assert master.experiments.experiment_action(exp["id"], "kill")["state"] in (
        "STOPPING_CANCELED",
        "CANCELED",
    )
    await until(lambda: experiment_state(master, exp["id"]) == "CANCELED", what="CANCELED")
    assert {t["state"] for t in master.views.list_trials(exp["id"])} == {"CANCELED"}


@pytest.mark.slow
@run
async def test_searcher_operations_and_metrics(master, tmp_path):
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": LONG_FIRST_RUN}))
    [trial] = master.views.list_trials(exp["id"])
    op = await master.reports.next_operation(trial["id"], 1)
    assert op == {"completed": False, "op": {"validateAfter": {"length": "10"}}}

    with pytest.raises(errors.InvalidRequest) as bad:
        master.reports.report_metrics(
            trial["id"],
            [
                {"group": "validation", "steps_completed": 10, "metrics": {"loss": None}},
                {"group": "a.b", "steps_completed": 10, "metrics": {}},
            ],
        )
    assert any("reports[0].metrics.loss" in e for e in bad.value.errors)
    assert any("reports[1].group" in e for e in bad.value.errors)
    assert master.views.get_metrics(MetricsQuery(trial_id=trial["id"])) == []

    accepted = master.reports.report_metrics(
        trial["id"],
        [
            {"group": "training", "steps_completed": 5, "metrics": {"loss": 0.9}},
            {"group": "validation", "steps_completed": 10, "metrics": {"loss": 0.5}},
            {"group": "validation", "steps_completed": 10, "metrics": {"loss": 0.7}},
        ],
    )
    assert accepted == 3
    current = master.views.get_trial(trial["id"])
    assert current["latest_training"]["metrics"] == {"loss": 0.9}
    assert current["latest_validation"]["metrics"] == {"loss": 0.7}
    assert current["best_validation"]["metrics"] == {"loss": 0.5}
    assert current["steps_completed"] == 10 and current["searcher_metric"] == 0.7
    assert master.views.best_validation(exp["id"]) == 0.5
    validation = master.views.get_metrics(MetricsQuery(experiment_id=exp["id"], group="validation"))
    assert [m["metrics"]["loss"] for m in validation] == [0.5, 0.7]
    assert (
        master.views.get_metrics(MetricsQuery(trial_id=trial["id"], after_id=validation[0]["id"]))
        == validation[1:]
    )

    master.reports.complete_operation(trial["id"], 10, 0.5)
    assert await master.reports.next_operation(trial["id"], 1) == {"completed": True, "op": None}
    master.experiments.kill_trial(trial["id"])
    await until(lambda: master.views.get_trial(trial["id"])["state"] == "CANCELED", what="CANCELED")


@pytest.mark.slow
@run
async def test_checkpoints(master, tmp_path):
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": LONG_FIRST_RUN}))
    [trial] = master.views.list_trials(exp["id"])
    with pytest.raises(errors.InvalidRequest, match="steps_completed"):
        master.checkpoints.report_checkpoint({"uuid": U1, "trialId": trial["id"], "metadata": {}})
    assert master.checkpoints.list_checkpoints(experiment_id=exp["id"]) == []
    checkpoint = master.checkpoints.report_checkpoint(
        {
            "uuid": U1,
            "trialId": trial["id"],
            "metadata": {"steps_completed": 3},
            "resources": {"w.bin": 4},
        }
    )
    expected_dir = tmp_path / "root" / "checkpoints" / U1
    assert os.path.normpath(checkpoint["path"]) == str(expected_dir)
    assert master.views.get_trial(trial["id"])["latest_checkpoint"] == U1
    expected_dir.mkdir(parents=True)
    (expected_dir / "w.bin").write_bytes(b"abcd")
    archive = master.checkpoints.checkpoint_archive(U1)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert tar.extractfile("w.bin").read() == b"abcd"
    master.checkpoints.mark_checkpoints_deleted([{"uuid": U1, "resources": {}}])
    assert (
        master.checkpoints.list_checkpoints(trial_id=trial["id"], state="DELETED")[0]["uuid"] == U1
    )
    with pytest.raises(errors.NotFound):
        master.checkpoints.get_checkpoint("nope")


@run
async def test_bad_config_lists_errors_and_stores_nothing(master, tmp_path):
    bad = config()
    del bad["searcher"]["max_trials"]
    bad["max_restarts"] = -1
    with pytest.raises(errors.InvalidRequest) as raised:
        master.experiments.create_experiment(bad, tar_gz({"train.py": TRAIN_OK}))
    assert len(raised.value.errors) >= 2
    assert any("max_trials" in e for e in raised.value.errors)
    assert any("max_restarts" in e for e in raised.value.errors)
    assert master.views.list_experiments() == []
    assert list((tmp_path / "root" / "contexts").iterdir()) == []


@run
async def test_context_too_large(master, tmp_path):
    big = tar_gz({"train.py": TRAIN_OK, "data.bin": os.urandom(2 * 1024 * 1024)})
    with pytest.raises(errors.TooLarge, match="limit"):
        master.experiments.create_experiment(config(), big)
    assert master.views.list_experiments() == []


@run
async def test_context_escaping_with_dotdot_is_rejected(master, tmp_path):
    with pytest.raises(errors.InvalidRequest):
        master.experiments.create_experiment(
            config(), tar_gz({"train.py": TRAIN_OK, "../escape.txt": b"xxx"})
        )
    assert master.views.list_experiments() == []
    assert list((tmp_path / "root" / "contexts").iterdir()) == []
    assert not (tmp_path / "root" / "escape.txt").exists()


@pytest.mark.slow
@run
async def test_trial_token_authenticates_only_as_its_trial(master, tmp_path):
    script = (
        b"import os, time\nprint('token=' + os.environ['DET_SESSION_TOKEN'], flush=True)\n"
        b"assert 'DET_MASTER_TOKEN' not in os.environ\ntime.sleep(60)\n"
    )
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": script}))
    [trial] = master.views.list_trials(exp["id"])
    lines = await until(lambda: master.logs.get_logs(trial["id"], stream="stdout"), what="token")
    token = lines[0]["line"].split("=", 1)[1]
    principal = master.authenticate(token)
    assert principal == TrialPrincipal(
        trial_id=trial["id"], experiment_id=exp["id"], allocation_id=f"trial-{trial['id']}.1"
    )
    # The master token is the owner account's: user 1, an admin, named after the login.
    owner = master.authenticate(master.user_token)
    assert owner == UserPrincipal(name=getpass.getuser(), user_id=1, admin=True)
    assert master.authenticate("trial.not-a-token") is None
    assert master.authenticate(master.user_token + "x") is None
    stored = master.store.select("trial_tokens", order="token_hash")
    assert stored and all(token not in row.values() for row in stored)  # only hashes stored
    master.experiments.kill_trial(trial["id"])
    await until(lambda: master.views.get_trial(trial["id"])["state"] == "CANCELED", what="CANCELED")
    assert master.authenticate(token) is None  # revoked when the run ends


@pytest.mark.slow
def test_four_fake_gpus_give_distinct_devices(tmp_path):
    async def body():
        master = Master(tmp_path / "root", gpus=4, preemption_grace_seconds=1)
        await master.start("http://127.0.0.1:9")
        try:
            script = (
                b"import os, json\nprint(os.environ['CUDA_VISIBLE_DEVICES'],"
                b" json.loads(os.environ['DET_GPU_UUIDS'])[0])\n"
            )
            exp = master.experiments.create_experiment(
                config(max_trials=4), tar_gz({"train.py": script})
            )
            assert len(master.runs.resources()["slots"]) == 4
            await until(
                lambda: experiment_state(master, exp["id"]) == "COMPLETED", what="COMPLETED"
            )
            seen = [
                master.logs.get_logs(t["id"], stream="stdout")[0]["line"]
                for t in master.views.list_trials(exp["id"])
            ]
            devices = [line.split()[0] for line in seen]
            assert sorted(devices) == ["0", "1", "2", "3"]
            assert all(line.split()[1] == f"GPU-fake-{line.split()[0]}" for line in seen)
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 120))


@pytest.mark.slow
def test_master_restart_resumes_paused_trials(tmp_path):
    async def body():
        master = Master(tmp_path / "root", preemption_grace_seconds=1, terminate_grace_seconds=1)
        await master.start("http://127.0.0.1:9")
        exp = master.experiments.create_experiment(config(), tar_gz({"train.py": LONG_FIRST_RUN}))
        [trial] = master.views.list_trials(exp["id"])
        await until(lambda: master.logs.get_logs(trial["id"], stream="stdout"), what="first run")
        await master.stop(pause_running=True)

        again = Master(tmp_path / "root", preemption_grace_seconds=1, terminate_grace_seconds=1)
        await again.start("http://127.0.0.1:9")
        try:
            assert again.views.get_trial(trial["id"])["restarts"] == 0
            await until(
                lambda: experiment_state(again, exp["id"]) == "COMPLETED",
                what="COMPLETED after restart",
            )
            lines = [entry["line"] for entry in again.logs.get_logs(trial["id"], stream="stdout")]
            assert lines == ["started run 1 None", "started run 2 None"]
        finally:
            await again.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 120))


@pytest.mark.slow
def test_events_are_published(tmp_path):
    async def body():
        master = Master(tmp_path / "root", gpus=[], preemption_grace_seconds=1)
        await master.start("http://127.0.0.1:9")
        try:
            subscription = master.events.subscribe(types=["experiment", "log"])
            exp = master.experiments.create_experiment(config(), tar_gz({"train.py": TRAIN_OK}))
            # Log events name only their trial; the bus adds the experiment so that a
            # subscription to one experiment (the widget's, the sidebar's) receives them.
            by_experiment = master.events.subscribe(experiment_id=exp["id"], types=["log"])
            seen = []
            while not any(t == "experiment" and p["state"] == "COMPLETED" for t, p in seen):
                item = await subscription.get(timeout=30)
                assert item is not None, "no more events before COMPLETED"
                seen.append(item)
            assert {t for t, _ in seen} == {"experiment", "log"}
            assert any(t == "log" and p["line"].startswith("lr ") for t, p in seen)
            assert all(p["id"] == exp["id"] for t, p in seen if t == "experiment")
            first_log = await by_experiment.get(timeout=5)
            assert first_log is not None and first_log[0] == "log"
            assert first_log[1]["experiment_id"] == exp["id"]
            subscription.close()
            assert await subscription.get(timeout=1) is None
            other = master.events.subscribe(experiment_id=exp["id"] + 1, types=["log"])
            master.events.publish(
                "log", {"id": 0, "trial_id": first_log[1]["trial_id"], "line": "x"}
            )
            assert await other.get(timeout=0.5) is None
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 120))


@pytest.mark.slow
@run
async def test_searcher_stop_preempts_and_completes_the_trial(master, tmp_path):
    asha = config(max_trials=4, resources={"slots_per_trial": 0})
    asha["searcher"] = {
        "name": "adaptive_asha",
        "metric": "loss",
        "time_metric": "batches",
        "max_time": 100,
        "max_trials": 4,
        "max_concurrent_trials": 4,
        "mode": "aggressive",
        "divisor": 2,
        "max_rungs": 2,
    }
    exp = master.experiments.create_experiment(asha, tar_gz({"train.py": LONG_FIRST_RUN}))
    trials = master.views.list_trials(exp["id"])
    assert len(trials) == 4  # slots_per_trial 0: all run at once on a 2-slot master
    await until(lambda: all(running_pid(master, t["id"]) for t in trials), what="all running")
    good, bad = trials[0]["id"], trials[1]["id"]
    master.reports.report_metrics(
        good,
        [{"group": "validation", "steps_completed": 50, "metrics": {"loss": 0.1, "batches": 50}}],
    )
    master.reports.report_metrics(
        bad,
        [{"group": "validation", "steps_completed": 50, "metrics": {"loss": 0.9, "batches": 50}}],
    )
    stopped = master.views.get_trial(bad)
    assert stopped["state"] == "STOPPING_COMPLETED"
    assert await master.runs.wait_preemption(stopped["allocation_id"], 5) is True
    assert await master.reports.next_operation(bad, 0) == {"completed": True, "op": None}
    # The script ignores the signal; after the grace period it is terminated -> COMPLETED.
    await until(
        lambda: master.views.get_trial(bad)["state"] == "COMPLETED", what="stopped trial done"
    )
    assert master.views.get_trial(good)["state"] == "ACTIVE"
    master.experiments.experiment_action(exp["id"], "cancel")
    await until(lambda: experiment_state(master, exp["id"]) == "CANCELED", what="CANCELED")


@pytest.mark.slow
@run
async def test_created_paused_runs_nothing_until_activated(master, tmp_path):
    exp = master.experiments.create_experiment(
        config(max_trials=2), tar_gz({"train.py": TRAIN_OK}), activate=False
    )
    assert exp["state"] == "PAUSED"
    await asyncio.sleep(0.5)
    assert {t["state"] for t in master.views.list_trials(exp["id"])} == {"PAUSED"}
    assert master.store.scalar("SELECT COUNT(*) FROM allocations") == 0
    master.experiments.experiment_action(exp["id"], "activate")
    await until(lambda: experiment_state(master, exp["id"]) == "COMPLETED", what="COMPLETED")


@pytest.mark.slow
def test_restart_after_crash_kills_orphans_and_resumes(tmp_path):
    async def body():
        crashed = Master(tmp_path / "root", preemption_grace_seconds=1)
        await crashed.start("http://127.0.0.1:9")
        exp = crashed.experiments.create_experiment(config(), tar_gz({"train.py": LONG_FIRST_RUN}))
        [trial] = crashed.views.list_trials(exp["id"])
        pid = await until(lambda: running_pid(crashed, trial["id"]), what="trial start")
        await until(lambda: crashed.logs.get_logs(trial["id"], stream="stdout"), what="output")
        # Simulate a crash: the master disappears without stopping its trial.
        crashed._closed = True
        crashed._log_writer.close()
        crashed.store.close()
        os.kill(pid, 0)  # the orphan is still alive

        master = Master(tmp_path / "root", preemption_grace_seconds=1)
        await master.start("http://127.0.0.1:9")
        try:
            await until(
                lambda: experiment_state(master, exp["id"]) == "COMPLETED",
                what="COMPLETED after crash",
            )
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
            resumed = master.views.get_trial(trial["id"])
            assert resumed["run_id"] == 2 and resumed["restarts"] == 0
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 120))


@pytest.mark.slow
@run
async def test_invalid_hp_early_exit_gets_a_replacement_trial(master, tmp_path):
    exp = master.experiments.create_experiment(
        config(max_trials=1), tar_gz({"train.py": LONG_FIRST_RUN})
    )
    [trial] = master.views.list_trials(exp["id"])
    master.reports.report_early_exit(trial["id"], "EXITED_REASON_INVALID_HP")
    with pytest.raises(errors.InvalidRequest, match="already reported"):
        master.reports.report_early_exit(trial["id"], "EXITED_REASON_INVALID_HP")
    with pytest.raises(errors.InvalidRequest, match="unknown early exit reason"):
        master.reports.report_early_exit(trial["id"], "BORED")
    trials = master.views.list_trials(exp["id"])
    assert len(trials) == 2 and trials[1]["request_id"] != trials[0]["request_id"]
    master.experiments.experiment_action(exp["id"], "kill")
    await until(lambda: experiment_state(master, exp["id"]) == "CANCELED", what="CANCELED")
    with pytest.raises(errors.Conflict, match="CANCELED"):
        master.experiments.experiment_action(exp["id"], "pause")
    with pytest.raises(errors.NotFound, match="experiment 999 not found"):
        master.experiments.experiment_action(999, "pause")


@pytest.mark.slow
@run
async def test_resources_logs_tail_and_filters(master, tmp_path):
    script = b"for i in range(5):\n    print(f'[rank={i % 2}] line {i}')\n"
    exp = master.experiments.create_experiment(config(), tar_gz({"train.py": script}))
    [trial] = master.views.list_trials(exp["id"])
    slots = master.runs.resources()["slots"]
    assert [s["type"] for s in slots] == ["cpu", "cpu"] and master.runs.resources()["gpus"] == []
    await until(lambda: experiment_state(master, exp["id"]) == "COMPLETED", what="COMPLETED")
    assert all(s["allocation_id"] is None for s in master.runs.resources()["slots"])
    stdout = master.logs.get_logs(trial["id"], stream="stdout")
    assert [entry["line"] for entry in stdout] == [f"line {i}" for i in range(5)]
    assert [entry["rank"] for entry in stdout] == [0, 1, 0, 1, 0]
    assert [
        entry["line"] for entry in master.logs.get_logs(trial["id"], stream="stdout", tail=2)
    ] == [
        "line 3",
        "line 4",
    ]
    assert [entry["line"] for entry in master.logs.get_logs(trial["id"], rank=1)] == [
        "line 1",
        "line 3",
    ]
    after = master.logs.get_logs(trial["id"], after_id=stdout[2]["id"], stream="stdout")
    assert [entry["line"] for entry in after] == ["line 3", "line 4"]


def test_event_bus_filters_and_drops_oldest_for_slow_consumers():
    import threading

    from master_lite._core._events import EventBus

    async def body():
        bus = EventBus(queue_size=3)
        bus.attach(asyncio.get_running_loop())
        trial_only = bus.subscribe(trial_id=7)
        everything = bus.subscribe()
        thread = threading.Thread(
            target=lambda: [
                bus.publish("log", {"id": i, "trial_id": 7 if i % 2 else 8, "line": str(i)})
                for i in range(10)
            ]
        )
        thread.start()
        thread.join()
        await asyncio.sleep(0.05)  # let the loop run the hand-offs from the other thread
        bus.publish("trial", {"id": 7, "experiment_id": 1})
        got = [await everything.get(timeout=5) for _ in range(3)]
        assert [p["id"] for _, p in got] == [8, 9, 7]  # bounded: the oldest were dropped
        assert everything.dropped == 8
        kinds = [await trial_only.get(timeout=5) for _ in range(3)]
        assert [(t, p["id"]) for t, p in kinds] == [("log", 7), ("log", 9), ("trial", 7)]
        trial_only.close()
        bus.publish("log", {"id": 11, "trial_id": 7})
        assert await trial_only.get(timeout=0.1) is None

    asyncio.run(asyncio.wait_for(body(), 30))


@pytest.mark.slow
@run
async def test_a_better_validation_is_announced_on_the_experiment(master, tmp_path):
    """The sidebar's experiment list shows best_validation: it must hear when that moves."""
    exp = master.experiments.create_experiment(
        config(), tar_gz({"train.py": b"import time; time.sleep(60)\n"})
    )
    [trial] = master.views.list_trials(exp["id"])
    experiment_events = master.events.subscribe(experiment_id=exp["id"], types=["experiment"])
    while await experiment_events.get(timeout=0.3) is not None:  # drain the creation events
        pass

    def validation(step, loss):
        return {"group": "validation", "steps_completed": step, "metrics": {"loss": loss}}

    master.reports.report_metrics(trial["id"], [validation(5, 0.5)])
    announced = await experiment_events.get(timeout=5)
    assert announced is not None and announced[1]["best_validation"] == 0.5
    master.reports.report_metrics(trial["id"], [validation(6, 0.9)])  # worse: the best stays
    while (other := await experiment_events.get(timeout=0.5)) is not None:
        assert other[1]["best_validation"] == 0.5
    master.reports.report_metrics(trial["id"], [validation(7, 0.25)])
    announced = await experiment_events.get(timeout=5)
    assert announced is not None and announced[1]["best_validation"] == 0.25


def test_the_master_keeps_start_stop_and_wiring_only() -> None:
    """Handlers call the typed parts (`master.views.get_trial(id)`); the Master itself keeps
    start/stop and what needs more than one part, not a delegation per use case."""
    public = sorted(name for name in vars(Master) if not name.startswith("_"))
    assert len(public) <= 20, public
    assert {"start", "stop", "authenticate"} <= set(public)
    for part in ("views", "experiments", "edits", "runs", "reports", "logs", "checkpoints"):
        assert part not in public  # attributes set by __init__, not methods of the class


TYPED_PARTS = {
    "views",
    "experiments",
    "edits",
    "runs",
    "reports",
    "logs",
    "checkpoints",
    "models",
    "tensorboards",
    "unmanaged",
    "users",
    "forks",
    "workspaces",
}


def test_the_masters_public_attributes_are_its_typed_parts_and_what_hosts_need(tmp_path) -> None:
    """Settings, the scheduler and the wiring-only parts are private: the public attributes
    are the parts handlers call, plus what the API and jupyter_determined read or set."""
    master = Master(tmp_path / "root", cpu_slots=1, gpus=[])
    attributes = {name for name in vars(master) if not name.startswith("_")}
    assert attributes == TYPED_PARTS | {
        "root_dir",  # where its files are (tests, the server extension)
        "user_token",  # the token master.json publishes
        "jupyter_host",  # set by jupyter_determined before start()
        "cluster_id",  # /api/v1/master
        "events",  # the event bus the streaming endpoints subscribe to
    }
    methods = {name for name in vars(Master) if not name.startswith("_")}
    # 26: the workspaces part (issue 29) is one more part, not a delegation; 27: `identify`,
    # the asynchronous `authenticate` of a master run as a JupyterHub service (the Hub last).
    assert len(attributes | methods) <= 27, sorted(attributes | methods)
