"""A real master-lite subprocess for end-to-end tests, and small helpers to drive it.

Used by test_gpus.py, test_multislot.py and test_ray_rm.py (imported as a sibling module).
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from collections.abc import Iterator

import pytest

from determined.common.api import Session

ROOT = pathlib.Path(__file__).resolve().parents[2]
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


def master_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DET_", "MASTER_LITE_", "RAY_ADDRESS"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "harness"), str(ROOT)])
    # Entrypoints say `python3`: make that the interpreter running the tests (it has torch).
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra or {})
    return env


@contextlib.contextmanager
def running_master(root: pathlib.Path, extra_env: dict[str, str] | None = None,
                   start_timeout: float = 90) -> Iterator[Session]:
    root.mkdir(parents=True, exist_ok=True)
    log = open(root / "master.log", "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "master_lite", "--port", "0", "--root-dir", str(root)],
        env=master_env(extra_env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + start_timeout
        while not (root / "master.json").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("master-lite did not start:\n" + (root / "master.log").read_text())
            time.sleep(0.2)
        time.sleep(0.2)
        info = json.loads((root / "master.json").read_text())
        session = Session(info["url"], info["token"])
        try:
            yield session
        finally:
            session.close()
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(40)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


def context(files: dict[str, str]) -> str:
    """A base64 tar.gz of `files` (name -> source text, dedented)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in sorted(files.items()):
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


def submit(session: Session, config: dict, files: dict[str, str]) -> int:
    body = {"config": json.dumps(config), "context": context(files)}
    return session.post("/experiments", body)["experiment"]["id"]


def trials(session: Session, exp_id: int) -> list[dict]:
    return session.get(f"/experiments/{exp_id}/trials")["trials"]


def logs(session: Session, trial_id: int, **query) -> list[dict]:
    return session.get(f"/trials/{trial_id}/logs", query or None)["logs"]


def all_logs(session: Session, exp_id: int) -> str:
    lines = []
    for trial in trials(session, exp_id):
        lines += [f"[trial {trial['id']} rank={entry.get('rank')}] {entry['line']}"
                  for entry in logs(session, trial["id"])]
    return "\n".join(lines)


def wait_for(session: Session, exp_id: int, states: set[str] = TERMINAL,
             timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        experiment = session.get(f"/experiments/{exp_id}")["experiment"]
        if experiment["state"] in states:
            return experiment
        if time.monotonic() > deadline:
            pytest.fail(f"experiment {exp_id} still {experiment['state']} after {timeout} s; "
                        f"logs:\n{all_logs(session, exp_id)[-4000:]}")
        time.sleep(0.3)


def wait_until(predicate, what: str, timeout: float = 120, interval: float = 0.3):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def marked_values(text: str, marker: str) -> list[dict]:
    """JSON objects printed by trial scripts as `<marker> {...}` lines."""
    found = []
    for line in text.splitlines():
        _, sep, rest = line.partition(marker + " {")
        if sep:
            found.append(json.loads("{" + rest))
    return found
