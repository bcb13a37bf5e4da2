"""A real `python -m master_lite` process for end-to-end tests, and helpers to drive it.

Usage::

    from tests._master_fixtures import MasterProcess, context_tarball, wait_for_experiment

    with MasterProcess(tmp_path / "root") as master:
        exp_id = master.create_experiment(config_text, context_tarball({"train.py": SCRIPT}))
        wait_for_experiment(master.session, exp_id, {"COMPLETED"})

The master runs in its own session (process group) so a test can SIGKILL it alone and leave its
trials orphaned, as a crash would. `restart()` starts a new master on the same root dir.
"""
from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from typing import Any

from determined.common.api import Session

ROOT = pathlib.Path(__file__).resolve().parents[1]
TERMINAL_EXPERIMENT_STATES = {"COMPLETED", "CANCELED", "ERROR"}


def master_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DET_", "MASTER_LITE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    # Entrypoints say `python3 x.py`: make that the interpreter running the tests.
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra or {})
    return env


class MasterProcess:
    def __init__(self, root_dir: pathlib.Path, *, cpu_slots: int = 2,
                 extra_args: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.root_dir = pathlib.Path(root_dir)
        self.cpu_slots = cpu_slots
        self.extra_args = list(extra_args or [])
        self.env = env
        self.process: subprocess.Popen | None = None
        self.session: Session = None  # type: ignore[assignment]
        self.url = ""
        self.token = ""
        self.start()

    # -- process ------------------------------------------------------------------------------
    def start(self, timeout: float = 60) -> None:
        self.root_dir.mkdir(parents=True, exist_ok=True)
        master_json = self.root_dir / "master.json"
        log = open(self.root_dir / "master.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "master_lite", "--port", "0", "--root-dir",
             str(self.root_dir), "--cpu-slots", str(self.cpu_slots), *self.extra_args],
            env=master_env(self.env), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if master_json.exists():
                try:
                    info = json.loads(master_json.read_text())
                except ValueError:  # being written
                    info = {}
                if info.get("pid") == self.process.pid:
                    break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("master-lite did not start:\n" + self.log_text()[-5000:])
            time.sleep(0.05)
        self.url, self.token = info["url"], info["token"]
        self.session = Session(self.url, self.token)

    def log_text(self) -> str:
        path = self.root_dir / "master.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM: a clean stop (running trials are paused); returns the exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        finally:
            self._close_session()

    def kill(self) -> None:
        """SIGKILL the master alone (its trials keep running, orphaned, as after a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self._close_session()

    def restart(self) -> None:
        self.start()

    def _close_session(self) -> None:
        if self.session is not None:
            try:
                self.session.close()
            except Exception:
                pass

    def __enter__(self) -> "MasterProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.stop(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
        self._kill_leftover_trials()

    def _kill_leftover_trials(self) -> None:
        """Whatever a SIGKILLed master left and no later master cleaned up."""
        for row in self.db_rows("SELECT pgid FROM allocations WHERE end_time IS NULL"):
            if row["pgid"]:
                try:
                    os.killpg(row["pgid"], signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    # -- API ----------------------------------------------------------------------------------
    def create_experiment(self, config: str | dict, context: str | None = None, **body: Any) -> int:
        answer = self.session.post("/experiments", {"config": config, "context": context, **body})
        return answer["experiment"]["id"]

    def trials(self, exp_id: int) -> list[dict]:
        return self.session.get(f"/experiments/{exp_id}/trials")["trials"]

    def series(self, trial_id: int, group: str) -> list[tuple[int, dict]]:
        reports = self.session.get(f"/trials/{trial_id}/metrics", {"group": group})["metrics"]
        return [(r["steps_completed"], r["metrics"]) for r in reports]

    def logs(self, trial_id: int) -> list[str]:
        return [entry["line"] for entry in self.session.get(f"/trials/{trial_id}/logs")["logs"]]

    def db_rows(self, sql: str, params: tuple = ()) -> list[dict]:
        """Read the master's SQLite store directly (e.g. pids, which the API does not show)."""
        path = self.root_dir / "master.db"
        if not path.exists():
            return []
        conn = sqlite3.connect(path, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in conn.execute(sql, params)]
        finally:
            conn.close()


# A trial like the Core API tutorial's stage 2, for fault-tolerance tests: x grows by
# hparams.increment_by per step for 100 steps; training metrics every 10 steps, a checkpoint every
# 30 (so a crash can lose reported steps that were never checkpointed), a preemption check every
# 10 (checkpointing before it exits). The state file holds "x,steps,trial_id"; a checkpoint of
# another trial (a warm start) keeps x but starts again at step 0. STEP_SLEEP sets the pace.
CHECKPOINTING_SCRIPT = """
import logging, os, pathlib, time
import determined as det

def save(core, x, step, trial_id):
    with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
        (path / "state").write_text(f"{x},{step},{trial_id}")

def main(core, info):
    inc = info.trial.hparams["increment_by"]
    trial_id = info.trial.trial_id
    x, start = 0, 0
    print(f"latest checkpoint {info.latest_checkpoint}", flush=True)
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            x, start, owner = map(int, (pathlib.Path(path) / "state").read_text().split(","))
        if owner != trial_id:
            start = 0
    print(f"starting at step {start} with x {x}", flush=True)
    sleep = float(os.environ.get("STEP_SLEEP", "0.05"))
    for step in range(start + 1, 101):
        x += inc
        time.sleep(sleep)
        if step % 10:
            continue
        core.train.report_training_metrics(steps_completed=step, metrics={"x": x})
        core.train.report_progress(step / 100)
        if step % 30 == 0 or step == 100:
            save(core, x, step, trial_id)
        if core.preempt.should_preempt():
            if step % 30:
                save(core, x, step, trial_id)
            print(f"preempted at step {step}", flush=True)
            return
    core.train.report_validation_metrics(steps_completed=100, metrics={"x": x})

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    with det.core.init() as core:
        main(core, info)
"""


def clean_series(increment_by: int, start_x: int = 0) -> dict[str, list[tuple[int, dict]]]:
    """What one uninterrupted run of CHECKPOINTING_SCRIPT reports."""
    return {"training": [(s, {"x": start_x + s * increment_by}) for s in range(10, 101, 10)],
            "validation": [(100, {"x": start_x + 100 * increment_by})]}


def context_tarball(files: dict[str, str | bytes]) -> str:
    """Base64 tar.gz of the given files, the body's `context` field."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in sorted(files.items()):
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


def wait_until(predicate: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_for_experiment(master: MasterProcess, exp_id: int,
                        states: set[str] = frozenset(TERMINAL_EXPERIMENT_STATES),
                        timeout: float = 120) -> dict:
    def reached() -> dict | None:
        experiment = master.session.get(f"/experiments/{exp_id}")["experiment"]
        return experiment if experiment["state"] in states else None

    try:
        return wait_until(reached, timeout, f"experiment {exp_id} to reach {sorted(states)}", 0.2)
    except AssertionError as exc:
        logs = "\n".join(line for trial in master.trials(exp_id)
                         for line in master.logs(trial["id"]))
        raise AssertionError(f"{exc}; trial logs:\n{logs[-4000:]}\nmaster log:\n"
                             f"{master.log_text()[-3000:]}") from None


__all__ = ["CHECKPOINTING_SCRIPT", "clean_series", "MasterProcess", "context_tarball", "master_env", "wait_for_experiment", "wait_until",
           "TERMINAL_EXPERIMENT_STATES"]
