"""Issue 26 row 12: nothing acknowledged is lost when the master dies and comes back.

A core_v2 (unmanaged) run reports a step at a time from its own process and writes each step
to a file once `report_training_metrics` returned (what the script may rely on). The master is
SIGKILLed mid-run, stays down longer than the old courier's ~5 s of retries, and is started
again on the same root dir and port. The run goes on, closes COMPLETED, and every step whose
report returned is stored exactly once.

The same for a managed trial (a Core API script the master started): the restarted master ends
the orphaned run and resumes it from its latest checkpoint; every step any run's report call
returned for is in the trial's series exactly once.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

from tests._support import (
    MasterProcess,
    child_env,
    context_tarball,
    free_port,
    wait_for_experiment,
    wait_until,
)

# How long the master stays down: longer than the harness's old give-up (~5 s of connect
# retries), well inside the run's lease (below). This is the fault's shape, not a wait for
# something to happen. DURABILITY_OUTAGE_S measures longer ones (docs/fault-tolerance.md).
OUTAGE_SECONDS = float(os.environ.get("DURABILITY_OUTAGE_S", "8"))
LEASE_SECONDS = 40.0

RUN_SCRIPT = """
import logging, os, pathlib, sys, time
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
from determined.common.experimental import Determined
from determined.experimental import core_v2

acked = open(sys.argv[1], "a")
stop = pathlib.Path(sys.argv[2])
core_v2.init(
    config=core_v2.Config(
        name="durable", external_experiment_id="durable", external_trial_id="t1",
        searcher={"metric": "loss", "smaller_is_better": True},
    ),
    client=Determined(os.environ["TEST_MASTER_URL"], token=os.environ["TEST_MASTER_TOKEN"]),
    lease_seconds=float(sys.argv[3]),
    capture_output=False,
)
pathlib.Path(sys.argv[1] + ".trial").write_text(str(core_v2.info.trial.trial_id))
step = 0
while not stop.exists():
    step += 1
    core_v2.train.report_training_metrics(step, {"loss": 1.0 / step})
    acked.write(f"{step}\\n")
    acked.flush()
    time.sleep(0.002)  # a training step's pace
core_v2.train.report_validation_metrics(step, {"loss": 1.0 / step})
acked.write(f"v{step}\\n")
acked.flush()
core_v2.close()
"""


def _lines(path: pathlib.Path) -> list[str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n")[:-1] if line]  # the last may be partial


def _steps(path: pathlib.Path) -> list[int]:
    return [int(line) for line in _lines(path) if line.isdigit()]


@pytest.mark.slow
def test_a_core_v2_run_loses_no_acknowledged_report_across_a_master_sigkill(
    tmp_path: pathlib.Path,
) -> None:
    port = free_port()
    with MasterProcess(tmp_path / "root", extra_args=["--port", str(port)]) as master:
        acked, stop = tmp_path / "acked.txt", tmp_path / "stop"
        script = tmp_path / "run.py"
        script.write_text(RUN_SCRIPT)
        env = child_env(
            {
                "TEST_MASTER_URL": master.url,
                "TEST_MASTER_TOKEN": master.token,
                "HOME": str(tmp_path / "home"),
            }
        )
        with open(tmp_path / "run.log", "wb") as log:
            run = subprocess.Popen(
                [sys.executable, str(script), str(acked), str(stop), str(LEASE_SECONDS)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(lambda: len(_steps(acked)) >= 200, 120, "200 reported steps")
            master.kill()
            killed_at = len(_steps(acked))
            # The run keeps training while the master is down: its reports still return.
            wait_until(
                lambda: len(_steps(acked)) >= killed_at + 200 or run.poll() is not None,
                60,
                "200 steps reported while the master is down",
            )
            time.sleep(OUTAGE_SECONDS)  # the outage (see OUTAGE_SECONDS)
            assert run.poll() is None, (tmp_path / "run.log").read_text()
            master.restart()
            assert master.url.endswith(f":{port}"), master.url
            resumed_at = len(_steps(acked))
            wait_until(
                lambda: len(_steps(acked)) >= resumed_at + 200 or run.poll() is not None,
                60,
                "200 steps reported after the restart",
            )
            stop.touch()
            assert run.wait(180) == 0, (tmp_path / "run.log").read_text()
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        trial_id = int((tmp_path / "acked.txt.trial").read_text())
        returned = _steps(acked)
        rows = master.db_rows(
            "SELECT steps_completed FROM metrics WHERE trial_id = ? AND group_name = "
            "'training' AND superseded_by_run IS NULL ORDER BY id",
            (trial_id,),
        )
        stored = [row["steps_completed"] for row in rows]
        missing = sorted(set(returned) - set(stored))
        assert not missing, f"{len(missing)} acknowledged steps lost, e.g. {missing[:10]}"
        assert len(stored) == len(set(stored)), "a report was stored twice"
        assert stored == sorted(stored), "reports were stored out of order"
        validations = master.db_rows(
            "SELECT steps_completed FROM metrics WHERE trial_id = ? AND group_name = 'validation'",
            (trial_id,),
        )
        assert [row["steps_completed"] for row in validations] == [returned[-1]]
        trial = master.session.get(f"/trials/{trial_id}")["trial"]
        assert trial["state"] == "COMPLETED", trial
        assert os.path.exists(master.root_dir / "master.db")


MANAGED_SCRIPT = """
import os, pathlib, time
import determined as det

info = det.get_cluster_info()
acked = open(os.environ["ACKED_FILE"], "a")
with det.core.init() as core:
    start = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            start = int((pathlib.Path(path) / "step").read_text())
    for step in range(start + 1, 1501):
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        acked.write(f"{info.trial._trial_run_id} {step}\\n")
        acked.flush()
        if step % 100 == 0:
            with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                (path / "step").write_text(str(step))
        time.sleep(0.01)  # a training step's pace
"""

MANAGED_CONFIG = """
name: durable-managed
entrypoint: python3 train.py
max_restarts: 3
searcher: {name: single, metric: loss, max_length: {batches: 1500}}
environment:
  environment_variables: ["ACKED_FILE=%s"]
"""


def _managed_steps(path: pathlib.Path) -> list[tuple[int, int]]:
    return [(int(run), int(step)) for run, step in (line.split() for line in _lines(path))]


@pytest.mark.slow
def test_a_managed_trial_loses_no_acknowledged_report_across_a_master_sigkill(
    tmp_path: pathlib.Path,
) -> None:
    acked = tmp_path / "acked-managed.txt"
    with MasterProcess(tmp_path / "root") as master:
        exp_id = master.create_experiment(
            MANAGED_CONFIG % acked, context_tarball({"train.py": MANAGED_SCRIPT})
        )
        wait_until(lambda: len(_managed_steps(acked)) >= 150, 120, "150 reported steps")
        master.kill()
        killed_at = len(_managed_steps(acked))
        # The orphaned run trains on while no master runs; its reports still return.
        wait_until(
            lambda: len(_managed_steps(acked)) >= killed_at + 50,
            60,
            "50 steps reported while the master is down",
        )
        time.sleep(OUTAGE_SECONDS)  # the outage (see OUTAGE_SECONDS)
        master.restart()
        final = wait_for_experiment(master, exp_id, timeout=300)
        assert final["state"] == "COMPLETED", final
        [trial] = master.trials(exp_id)
        rows = master.db_rows(
            "SELECT steps_completed FROM metrics WHERE trial_id = ? AND group_name = "
            "'training' AND superseded_by_run IS NULL ORDER BY steps_completed",
            (trial["id"],),
        )
        stored = [row["steps_completed"] for row in rows]
        returned = {step for _, step in _managed_steps(acked)}
        assert len({run for run, _ in _managed_steps(acked)}) >= 2, "the run was resumed"
        missing = sorted(returned - set(stored))
        assert not missing, f"{len(missing)} acknowledged steps lost, e.g. {missing[:10]}"
        assert stored == list(range(1, 1501)), "each step is in the series exactly once"
