"""A master on Ray outlives its cluster (issue 31, row 4): started while the Ray head is down it
listens at once and says "waiting for the Ray cluster"; when the head goes away mid-trial it
stays up, says so (GET /master, the trial's log), leaves no trial process behind, and when a head
is back on the same address it reconnects and the trial resumes from its checkpoint without
counting a failure. A one-node cluster of its own (the head is stopped and started again)."""

from __future__ import annotations

import socket

import pytest

from tests._support import (
    MasterProcess,
    all_logs,
    marked_values,
    submit,
    trials,
    wait_for_experiment,
    wait_until,
)
from tests.master_lite.runners.ray.test_actor import _alive
from tests.master_lite.runners.ray.test_ray import config

pytestmark = pytest.mark.slow

# Checkpoints every step, says where it resumed from, and leaves a child running (an orphan
# unless the whole group dies with the Ray worker).
RESUMING = """
    import json, os, subprocess, sys, time
    import determined as det

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    info = det.get_cluster_info()
    with det.core.init() as core_context:
        start = 0
        if info.latest_checkpoint:
            with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = json.loads((path / "state.json").read_text())["step"]
        print("RESUMED " + json.dumps({"step": start, "run": info.trial._trial_run_id,
                                      "pids": [os.getpid(), child.pid]}), flush=True)
        steps = info.trial.hparams["steps"]
        for step in range(start + 1, steps + 1):
            time.sleep(0.2)
            core_context.train.report_training_metrics(step, {"loss": 1.0 / step})
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step}))
        core_context.train.report_validation_metrics(steps, {"loss": 1.0 / steps})
    child.kill()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _head(port: int):
    """A one-node cluster whose head listens on `port`; tried a few times (a raylet on a busy
    machine can time out starting: see test_ray's `cluster`)."""
    from ray.cluster_utils import Cluster

    failures = []
    for _ in range(3):
        try:
            return Cluster(
                initialize_head=True,
                head_node_args={
                    "gcs_server_port": port,
                    "num_cpus": 2,
                    "num_gpus": 0,
                    "include_dashboard": False,
                    "no_monitor": True,
                    "include_log_monitor": False,
                },
            )
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{type(exc).__name__}: {exc}")
    pytest.fail("could not start a Ray head (is the machine overloaded?): " + " | ".join(failures))


def test_the_master_outlives_the_ray_head_and_resumes_the_trial(tmp_path):
    port = _free_port()
    address = f"127.0.0.1:{port}"
    cluster = None
    with MasterProcess(
        tmp_path / "root",
        cpu_slots=None,
        env={"MASTER_LITE_RESOURCE_MANAGER": "ray", "MASTER_LITE_RAY_ADDRESS": address},
    ) as process:
        master = process.session
        try:
            # Listening although nothing is at the address, and saying why nothing runs.
            status = master.get("/master")["cluster"]
            assert status["state"] != "connected"
            assert f"waiting for the Ray cluster at {address}" in status["message"]
            assert master.get("/resources")["slots"] == []
            exp_id = submit(
                master,
                config("head-loss", "python3 resuming.py", hparams={"steps": 50}),
                {"resuming.py": RESUMING},
            )
            cluster = _head(port)
            wait_until(
                lambda: master.get("/master")["cluster"]["state"] == "connected",
                timeout=90,
                what="the master to connect to the new head",
            )
            assert len(master.get("/resources")["slots"]) == 2  # the head's CPUs
            wait_until(
                lambda: master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
                timeout=120,
                what="a first checkpoint",
            )
            (first,) = marked_values(all_logs(master, exp_id), "RESUMED")

            cluster.shutdown()  # the head (the whole one-node cluster) goes away
            cluster = None
            wait_until(
                lambda: "waiting for the Ray cluster" in all_logs(master, exp_id),
                timeout=60,
                what="the trial's log to say the cluster was lost",
            )
            status = master.get("/master")["cluster"]
            assert (
                status["state"] == "waiting" and "waiting for the Ray cluster" in status["message"]
            )
            assert master.get("/resources")["slots"] == []
            wait_until(
                lambda: not any(_alive(pid) for pid in first["pids"]),
                timeout=30,
                what="the trial's processes to end with their Ray worker",
            )
            assert process.process is not None and process.process.poll() is None  # still up
            (trial,) = trials(master, exp_id)
            assert trial["state"] == "ACTIVE" and trial["restarts"] == 0

            cluster = _head(port)
            experiment = wait_for_experiment(master, exp_id, timeout=180)
            text = all_logs(master, exp_id)
            assert experiment["state"] == "COMPLETED", text
            assert trials(master, exp_id)[0]["restarts"] == 0, text  # not counted (max_restarts 0)
            # The run that started on the new head resumed from the checkpoint (a relaunch in
            # between may have been lost with the dying cluster before it printed).
            resumed = marked_values(text, "RESUMED")
            assert len(resumed) == 2 and resumed[0]["run"] == 1, text
            assert resumed[1]["step"] >= 1, text
        finally:
            if cluster is not None:
                cluster.shutdown()
