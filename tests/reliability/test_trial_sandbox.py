"""Issue 26 row 6: a process trial running as the master's own Unix user cannot read the user
token (its file, the master's environment or files through /proc), the store, nor signal the
master — while it still reaches its work dir, saves and restores a checkpoint, and reports.

The trial is real (a master-lite subprocess runs it) and plays the attacker: it looks in every
place it knows and reports what it found in one log line; the test then checks that the token
it would have used is where it looked, for the master's user outside the sandbox.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from master_lite.runners.process import _sandbox
from master_lite.runners.process._sandbox import SANDBOX_ENV, sandbox_argv
from tests._support import MasterProcess, context_tarball, marked_values, wait_for_experiment

pytestmark = pytest.mark.slow

MARKER = "SANDBOX-REPORT"

TRIAL = r"""
import json, os, signal, sqlite3, urllib.request
import determined as det

root = os.environ["ROOT"]
master_pid = int(os.environ["MASTER_PID"])
found = {}

def attempt(name, read):
    try:
        value = read()
    except Exception as exc:
        found[name] = type(exc).__name__
    else:
        found[name] = (value if isinstance(value, str) else repr(value))[:100]

def read(path):
    with open(path, "rb") as file:
        return file.read().decode(errors="replace")

attempt("token_file", lambda: read(f"{root}/private/user_token"))
attempt("private_listing", lambda: sorted(os.listdir(f"{root}/private")))
attempt("master_db", lambda: read(f"{root}/master.db"))
attempt("master_db_sql", lambda: sqlite3.connect(f"file:{root}/master.db?mode=ro", uri=True)
        .execute("SELECT count(*) FROM experiments").fetchone())
attempt("master_json", lambda: read(f"{root}/master.json"))
attempt("proc_root", lambda: read(f"/proc/{master_pid}/root{root}/private/user_token"))
attempt("proc_environ", lambda: read(f"/proc/{master_pid}/environ"))
attempt("signal_master", lambda: os.kill(master_pid, 0))
attempt("own_env_token", lambda: os.environ["DET_MASTER_TOKEN"])

# Whatever looked like a token: try it as the user token against the API.
candidates = {v.strip() for v in found.values() if isinstance(v, str) and 20 <= len(v.strip()) < 200}
accepted = []
for candidate in candidates:
    request = urllib.request.Request(
        os.environ["DET_MASTER"] + "/api/v1/models",
        headers={"Authorization": f"Bearer {candidate}"},
    )
    try:
        urllib.request.urlopen(request, timeout=10)
        accepted.append(candidate)
    except Exception:
        pass
found["accepted_tokens"] = len(accepted)
print("SANDBOX-REPORT " + json.dumps(found), flush=True)

with det.core.init() as core:
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "weights").write_text("w")
    with core.checkpoint.restore_path(uuid) as path:
        assert (path / "weights").read_text() == "w"
    core.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5})
"""


def _sandbox_problem() -> str | None:
    result = subprocess.run(
        [*sandbox_argv(())[:-1], "--probe"], capture_output=True, text=True, timeout=60
    )
    return None if result.returncode == 0 else result.stderr.strip() or "probe failed"


def _run_trial(root: Path, env: dict[str, str] | None = None) -> tuple[MasterProcess, dict]:
    master = MasterProcess(root, cpu_slots=1, env=env)
    config = {
        "name": "snoop",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "environment": {
            "environment_variables": [f"ROOT={root.absolute()}", f"MASTER_PID={master.pid}"]
        },
    }
    exp_id = master.create_experiment(config, context_tarball({"train.py": TRIAL}))
    experiment = wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    lines = "\n".join(master.logs(trial["id"]))
    assert experiment["state"] == "COMPLETED", lines
    (report,) = marked_values(lines, MARKER)
    return master, {"report": report, "trial": trial, "logs": lines}


def test_a_same_uid_process_trial_cannot_reach_the_user_token(tmp_path: Path) -> None:
    problem = _sandbox_problem()
    if problem:
        pytest.skip(f"this platform cannot sandbox trials: {problem}")
    root = tmp_path / "root"
    master, seen = _run_trial(root)
    with master:
        report = seen["report"]
        # Outside the sandbox, as the same user, everything it looked for is there.
        assert (root / "private" / "user_token").read_text().strip() == master.token
        assert (root / "master.db").stat().st_size > 0

        # Inside: the token file is gone, the store cannot be opened, and no process outside
        # the trial (the master) can be named through /proc or signalled.
        assert report["token_file"] == "FileNotFoundError"
        assert report["private_listing"] == "[]"
        assert report["master_db"] in ("PermissionError", "OSError")
        assert report["master_db_sql"] == "OperationalError"
        assert report["proc_root"] == "FileNotFoundError"
        assert report["proc_environ"] == "FileNotFoundError"
        assert report["signal_master"] == "ProcessLookupError"
        assert report["own_env_token"] == "KeyError"
        assert report["accepted_tokens"] == 0
        assert master.token not in seen["logs"]
        # master.json stays readable (it names the URL and the token file's path, no token).
        assert "token_file" in report["master_json"]

        # The trial itself ran normally: its checkpoint and metrics are stored.
        trial = master.session.get(f"/trials/{seen['trial']['id']}")["trial"]
        assert trial["latest_checkpoint"]
        assert master.series(seen["trial"]["id"], "validation") == [(1, {"loss": 0.5})]


def test_without_the_sandbox_the_same_trial_finds_the_token(tmp_path: Path) -> None:
    """What the sandbox prevents (the check of the test above: it sees the difference)."""
    master, seen = _run_trial(tmp_path / "root", env={SANDBOX_ENV: "0"})
    with master:
        assert seen["report"]["token_file"].strip() == master.token
        assert seen["report"]["accepted_tokens"] == 1


def test_the_probe_fails_cleanly_where_namespaces_are_refused() -> None:
    """Where unprivileged user namespaces are refused, the trampoline says why in one line
    and exits 125 (the runner then warns once and starts trials as before)."""
    if not Path("/proc/sys/user/max_user_namespaces").exists():
        pytest.skip("no /proc/sys/user/max_user_namespaces")
    # The probe inside a user namespace (of `unshare`) whose limit of nested ones is 0.
    script = (
        "echo 0 > /proc/sys/user/max_user_namespaces && "
        f"{sys.executable} -I -S {sandbox_argv(())[3]} --probe"
    )
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "max_user_namespaces" in result.stderr or result.returncode not in (0, 125):
        pytest.skip(f"cannot limit user namespaces here: {result.stderr.strip()}")
    assert result.returncode == 125, result.stderr
    assert result.stderr.startswith("sandbox: unshare"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_platform_without_namespaces_warns_once_and_runs_trials_as_before(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_sandbox.sys, "platform", "darwin")
    monkeypatch.delenv(SANDBOX_ENV, raising=False)
    sandbox = _sandbox.Sandbox()
    with caplog.at_level(logging.WARNING, logger="master_lite"):
        assert sandbox.prefix([Path("/x/private")]) == []
        assert sandbox.prefix([Path("/x/private")]) == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not sandboxed (darwin has no Linux namespaces)" in warnings[0]
