"""What a Ray trial's process gets, and how a master on Ray stops (issue 31 rows 1, 3, 6), on a
real one-node Ray cluster whose raylet has a variable of its own, driven by a real master-lite
subprocess (resource_manager = ray):

* the trial's environment is the node's (its raylet's variables, what the Ray runtime_env adds)
  under the run's own (`DET_*`, the config's environment_variables), never the master's;
* `python3` is the node's interpreter (a runtime_env's `py_executable`);
* DET_MASTER is the master's advertised URL;
* SIGTERM to the master is the clean stop: the trial is preempted with a checkpoint, the
  master exits 0, and the next master on the same root dir resumes it.

One module-scoped cluster (a head node only: the fewest Ray processes).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests._support import (
    MasterProcess,
    all_logs,
    free_port,
    marked_values,
    submit,
    trials,
    wait_for_experiment,
    wait_until,
)
from tests.master_lite.runners.ray.test_ray import CHECKPOINTING, config

pytestmark = pytest.mark.slow

NODE_VARIABLE = ("REACH_NODE_ONLY", "from-the-raylet")
MASTER_VARIABLE = ("REACH_MASTER_PRIVATE", "the-masters-own")

SHOW_ENV = """
    import json, os, shutil, sys
    names = ["REACH_NODE_ONLY", "REACH_MASTER_PRIVATE", "FROM_CONFIG", "FROM_RUNTIME_ENV",
             "VIA_PY_EXECUTABLE", "DET_MASTER", "MASTER_LITE_RESOURCE_MANAGER"]
    print("ENV " + json.dumps({
        "vars": {name: os.environ.get(name) for name in names},
        "python": sys.executable, "python3": shutil.which("python3")}), flush=True)
"""


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    failures = []
    for _ in range(3):  # see test_ray.cluster: a busy machine may miss Ray's start deadline
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": 2,
                    "include_dashboard": False,
                    "no_monitor": True,
                    "include_log_monitor": False,
                    "env_vars": dict([NODE_VARIABLE]),
                },
            )
            break
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{type(exc).__name__}: {exc}")
    else:
        pytest.fail("could not start a local Ray cluster: " + " | ".join(failures))
    yield cluster
    cluster.shutdown()


@pytest.fixture(scope="module")
def py_executable(tmp_path_factory) -> Path:
    """A node's interpreter at a path of its own: a wrapper that marks its environment."""
    wrapper = tmp_path_factory.mktemp("node-python") / "python"
    wrapper.write_text(f'#!/bin/sh\nexport VIA_PY_EXECUTABLE=1\nexec {sys.executable} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def ray_master(cluster, root: Path, *args: str, **env: str) -> MasterProcess:
    return MasterProcess(
        root,
        cpu_slots=None,
        extra_args=list(args),
        env={
            "MASTER_LITE_RESOURCE_MANAGER": "ray",
            "MASTER_LITE_RAY_ADDRESS": cluster.address,
            **env,
        },
    )


def test_a_ray_trial_gets_the_nodes_environment_and_the_runs_not_the_masters(
    cluster, py_executable, tmp_path
):
    port = free_port()
    runtime_env = {"py_executable": str(py_executable), "env_vars": {"FROM_RUNTIME_ENV": "rt"}}
    with ray_master(
        cluster,
        tmp_path / "root",
        "--port",
        str(port),
        "--advertised-url",
        f"http://localhost:{port}",
        MASTER_LITE_RAY_RUNTIME_ENV=json.dumps(runtime_env),
        **dict([MASTER_VARIABLE]),
    ) as master:
        conf = config("env", "python3 show_env.py")
        conf["environment"] = {"environment_variables": ["FROM_CONFIG=yes"]}
        exp_id = submit(master.session, conf, {"show_env.py": SHOW_ENV})
        experiment = wait_for_experiment(master.session, exp_id, timeout=120)
        text = all_logs(master.session, exp_id)
    assert experiment["state"] == "COMPLETED", text
    (shown,) = marked_values(text, "ENV")
    assert shown["vars"] == {
        "REACH_NODE_ONLY": "from-the-raylet",  # the node's own environment is kept
        "REACH_MASTER_PRIVATE": None,  # the master's is not imposed on the node
        "MASTER_LITE_RESOURCE_MANAGER": None,
        "FROM_CONFIG": "yes",  # the config's environment_variables
        "FROM_RUNTIME_ENV": "rt",  # the runtime_env's env_vars
        "VIA_PY_EXECUTABLE": "1",  # the worker ran under the runtime_env's py_executable
        "DET_MASTER": f"http://localhost:{port}",  # the advertised URL
    }
    # `python3` is the node worker's interpreter, first on PATH.
    assert shown["python3"] and os.path.dirname(shown["python3"]) == os.path.dirname(
        shown["python"]
    )


def test_a_bad_runtime_env_is_refused_at_start_naming_the_variable(cluster, tmp_path):
    with pytest.raises(RuntimeError, match=r"MASTER_LITE_RAY_RUNTIME_ENV is not JSON"):
        ray_master(cluster, tmp_path / "root", MASTER_LITE_RAY_RUNTIME_ENV="{py_executable")


def test_sigterm_preempts_the_ray_trial_with_a_checkpoint_and_the_next_master_resumes(
    cluster, tmp_path
):
    root = tmp_path / "root"
    with ray_master(cluster, root) as master:
        exp_id = submit(
            master.session,
            config("sigterm", "python3 checkpointing.py", hparams={"steps": 40}),
            {"checkpointing.py": CHECKPOINTING},
        )
        wait_until(
            lambda: master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
            what="a first checkpoint",
        )
        # stop(): SIGTERM, then SIGKILL (status -9) if the master outlives 60 s.
        assert master.stop(timeout=60) == 0, master.log_text()[-3000:]
        (stored,) = master.db_rows("SELECT state FROM trials")
        assert stored["state"] == "PAUSED", master.log_text()[-3000:]

        master.restart()
        experiment = wait_for_experiment(master.session, exp_id, timeout=120)
        text = all_logs(master.session, exp_id)
        assert experiment["state"] == "COMPLETED", text
        preempted = marked_values(text, "PREEMPTED")
        resumed = marked_values(text, "RESUMED")
        assert len(preempted) == 1 and len(resumed) == 2, text
        assert resumed[1]["step"] == preempted[0]["step"] >= 1  # from the preemption's checkpoint
        assert trials(master.session, exp_id)[0]["restarts"] == 0  # not counted as a failure
