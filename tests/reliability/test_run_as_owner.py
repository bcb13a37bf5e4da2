"""Issue 29: trials run as their owner's Unix user (`run_trials_as = "owner"`).

A real master (as root) with two users named like two real Unix users: alice's trial runs as
alice's uid and writes a checkpoint; bob's trial, as bob, tries to read alice's checkpoint, the
store, master.json, the user token and the master's /proc environ, and reports what it saw:
each one is refused. Neither sees the Hub token of the master's environment. The owner account's
experiments still run as the master's own user; a user with no Unix account runs as the
fallback account, and with none set fails to start with a message naming the setting.

The Unix users are real (useradd, as root); the interpreter they run is a `.venv-trials` made by
scripts/make_trial_venv.py (what `make install` does).
"""

from __future__ import annotations

import io
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from determined.common.api import Session
from tests._support import (
    MasterProcess,
    child_env,
    context_tarball,
    free_port,
    trial_logs,
    trials,
    wait_for_experiment,
    wait_until,
)
from tests._support.containers import HOST_USR, remove_containers_of

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ALICE, BOB, FALLBACK, NO_UNIX = "runas_alice", "runas_bob", "runas_fallback", "runas_hubonly"
HUB_TOKEN = "hub-token-that-no-trial-may-see"

# Reports who it ran as, and saves a checkpoint.
WRITER = """
import json, os
import determined as det

seen = {
    "uid": os.getuid(),
    "hub_token": os.environ.get("JUPYTERHUB_API_TOKEN"),
    "jupyterhub_vars": sorted(k for k in os.environ if k.startswith("JUPYTERHUB_")),
    "home": os.environ.get("HOME"),
    "user": os.environ.get("USER"),
    "umask": os.umask(0o077),
}
print("SEEN " + json.dumps(seen), flush=True)
with det.core.init() as core:
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "weights").write_text("alice's weights")
    core.train.report_validation_metrics(steps_completed=1, metrics={"uid": os.getuid()})
"""

# Tries to read what is not its own (targets.json: path -> "file" or "dir"), reports each.
READER = """
import json, os
import determined as det

seen = {}
for path, kind in json.load(open("targets.json")).items():
    try:
        if kind == "dir":
            os.listdir(path)
        elif kind == "write":
            open(os.path.join(path, "bob-was-here"), "w").write("x")
        else:
            open(path, "rb").read(1)
        seen[path] = "read"
    except OSError as exc:
        seen[path] = type(exc).__name__
print("SEEN " + json.dumps({"uid": os.getuid(), "tries": seen,
                            "hub_token": os.environ.get("JUPYTERHUB_API_TOKEN")}), flush=True)
with det.core.init() as core:
    core.train.report_validation_metrics(steps_completed=1, metrics={"uid": os.getuid()})
"""


def _config(name: str) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "uid", "max_length": 1},
    }


def _useradd(name: str) -> None:
    subprocess.run(["userdel", "-r", name], capture_output=True, check=False)  # a leftover
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True)


@pytest.fixture(scope="module")
def unix_users() -> Iterator[dict[str, pwd.struct_passwd]]:
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root and useradd: trials run as other real Unix users")
    names = (ALICE, BOB, FALLBACK)
    subprocess.run(["userdel", "-r", NO_UNIX], capture_output=True, check=False)
    for name in names:
        _useradd(name)
    try:
        yield {name: pwd.getpwnam(name) for name in names}
    finally:
        for name in names:
            subprocess.run(["userdel", "-r", name], capture_output=True, check=False)


@pytest.fixture(scope="module")
def place(unix_users: dict) -> Iterator[Path]:
    """A directory every user may enter (as /home or /srv is), holding the root dir and the
    trial venv (made as `make install` makes it)."""
    parent = Path(tempfile.mkdtemp(prefix="det-runas-"))
    parent.chmod(0o755)
    made = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "make_trial_venv.py"),
            "--venv",
            sys.prefix,
            "--out",
            str(parent / "venv-trials"),
            "--check-user",
            ALICE,
        ],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _seen(session: Session | MasterProcess, exp_id: int) -> dict:
    trial_id = trials(session, exp_id)[0]["id"]
    for entry in trial_logs(session, trial_id):
        if entry["line"].startswith("SEEN "):
            return dict(json.loads(entry["line"][5:]))
    raise AssertionError(f"experiment {exp_id} printed nothing it saw")


def _user_session(master: MasterProcess, name: str) -> Session:
    master.session.post("/users", {"user": {"username": name}, "password": "pw-" + name})
    token = master.session.post("/auth/login", {"username": name, "password": "pw-" + name})
    return Session(master.url, token["token"])


def _submit(session: Session, name: str, files: dict[str, str]) -> int:
    body = {"config": json.dumps(_config(name)), "context": context_tarball(files)}
    return int(session.post("/experiments", body)["experiment"]["id"])


def test_trials_run_as_their_owner_and_read_nothing_of_others(unix_users, place) -> None:
    root = place / "root"
    env = {
        "JUPYTERHUB_API_TOKEN": HUB_TOKEN,
        "JUPYTERHUB_CLIENT_ID": "service-determined",
        "MASTER_LITE_TRIAL_PYTHON": str(place / "venv-trials" / "bin" / "python"),
    }
    with MasterProcess(
        root, cpu_slots=3, extra_args=["--run-trials-as", "owner"], env=env
    ) as master:
        alice = _user_session(master, ALICE)
        bob = _user_session(master, BOB)
        hub_only = _user_session(master, NO_UNIX)
        alice_exp = _submit(alice, "alice", {"train.py": WRITER})
        owner_exp = _submit(master.session, "owner", {"train.py": WRITER})
        orphan_exp = _submit(hub_only, "hub-only", {"train.py": WRITER})
        for exp_id in (alice_exp, owner_exp):
            assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED", master.logs(
                trials(master, exp_id)[0]["id"]
            )

        # Alice's trial ran as alice, in her account's environment, without the Hub's token.
        seen = _seen(master, alice_exp)
        assert seen["uid"] == unix_users[ALICE].pw_uid
        assert seen["hub_token"] is None and seen["jupyterhub_vars"] == []
        assert (seen["user"], seen["home"]) == (ALICE, unix_users[ALICE].pw_dir)
        assert seen["umask"] == 0o077
        # The owner account's experiment still runs as the master's own user (root here).
        owner_seen = _seen(master, owner_exp)
        assert owner_seen["uid"] == os.geteuid() and owner_seen["hub_token"] is None

        # A Hub-only user (no Unix account, no fallback) fails to start, naming the setting.
        assert wait_for_experiment(master, orphan_exp)["state"] == "ERROR"
        orphan_log = "\n".join(master.logs(trials(master, orphan_exp)[0]["id"]))
        assert f"user {NO_UNIX!r} has no Unix account" in orphan_log
        assert "fallback_unix_user" in orphan_log

        # Alice's checkpoint: hers, 0700, in storage nobody may list.
        checkpoint = master.session.get(f"/experiments/{alice_exp}/checkpoints")["checkpoints"][0]
        storage = root / "checkpoints"
        ckpt_dir = storage / checkpoint["uuid"]
        assert ckpt_dir.stat().st_uid == unix_users[ALICE].pw_uid
        assert stat.S_IMODE(ckpt_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(storage.stat().st_mode) == 0o1733
        alice_work = next((root / "trials" / str(trials(master, alice_exp)[0]["id"])).iterdir())
        assert alice_work.stat().st_uid == unix_users[ALICE].pw_uid
        assert stat.S_IMODE(alice_work.stat().st_mode) == 0o700

        # Bob's trial tries to read alice's files and the master's secrets.
        targets = {
            str(ckpt_dir / "weights"): "file",
            str(ckpt_dir): "dir",
            str(storage): "dir",
            str(alice_work): "dir",
            str(alice_work / "train.py"): "file",
            str(root / "master.db"): "file",
            str(root / "master.json"): "file",
            str(root / "private" / "user_token"): "file",
            str(root / "contexts"): "dir",
            f"/proc/{master.pid}/environ": "file",
        }
        targets[str(ckpt_dir) + "/"] = "write"
        bob_exp = _submit(bob, "bob", {"train.py": READER, "targets.json": json.dumps(targets)})
        assert wait_for_experiment(master, bob_exp)["state"] == "COMPLETED", master.logs(
            trials(master, bob_exp)[0]["id"]
        )
        bob_seen = _seen(master, bob_exp)
        assert bob_seen["uid"] == unix_users[BOB].pw_uid and bob_seen["hub_token"] is None
        refused = {"PermissionError", "FileNotFoundError"}
        assert {path: what for path, what in bob_seen["tries"].items() if what not in refused} == {}
        assert set(bob_seen["tries"]) == set(targets)
        assert not (ckpt_dir / "bob-was-here").exists()
        # The master (root) still serves alice's checkpoint: its files download.
        request = urllib.request.Request(
            f"{master.url}/api/v1/checkpoints/{checkpoint['uuid']}/download",
            headers={"Authorization": f"Bearer {master.token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            archive = tarfile.open(fileobj=io.BytesIO(answer.read()))
            names = [Path(name).name for name in archive.getnames()]
        assert "weights" in names

        # With a fallback account, the Hub-only user's trials run as it.
        master.stop()
        master.extra_args += ["--fallback-unix-user", FALLBACK]
        master.restart()
        hub_only = Session(master.url, hub_only.token)  # sessions outlive a restart
        fallback_exp = _submit(hub_only, "hub-only-fallback", {"train.py": WRITER})
        assert wait_for_experiment(master, fallback_exp)["state"] == "COMPLETED"
        assert _seen(master, fallback_exp)["uid"] == unix_users[FALLBACK].pw_uid


def test_owner_mode_needs_a_root_master(unix_users, place) -> None:
    """A master that is not root refuses run_trials_as=owner at start, naming the fix (as
    root, the master is started as alice, with the interpreter she can execute)."""
    root = Path(tempfile.mkdtemp(prefix="det-runas-nonroot-", dir=place))
    shutil.chown(root, ALICE)
    python = place / "venv-trials" / "bin" / "python"
    try:
        done = subprocess.run(
            [
                "runuser",
                "-u",
                ALICE,
                "--",
                str(python),
                "-m",
                "master_lite",
                "--port",
                "0",
                "--root-dir",
                str(root / "master"),
                "--run-trials-as",
                "owner",
            ],
            capture_output=True,
            text=True,
            env=child_env(),
            cwd="/",
            timeout=120,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 1, done.stderr
    assert "run_trials_as='owner' needs a master that runs as root" in done.stderr


# A container trial: who it runs as, and a checkpoint.
CONTAINER_WRITER = """
import json, os
import determined as det

print("SEEN " + json.dumps({"uid": os.getuid(), "gid": os.getgid()}), flush=True)
with det.core.init() as core:
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "weights").write_text("alice's weights")
    core.train.report_validation_metrics(steps_completed=1, metrics={"uid": os.getuid()})
"""


def test_container_trials_run_as_their_owner(unix_users, place, container_images) -> None:
    """podman run --user: alice's container trial runs as her uid:gid, and the checkpoint it
    saved lies in the storage as hers, 0700, its files 0600 (umask 077)."""
    if shutil.which("podman") is None:
        pytest.skip("needs podman")
    root = place / "container-root"
    env = {"MASTER_LITE_TRIAL_PYTHON": str(place / "venv-trials" / "bin" / "python")}
    with MasterProcess(
        root, cpu_slots=1, extra_args=["--run-trials-as", "owner"], env=env
    ) as master:
        try:
            alice = _user_session(master, ALICE)
            config = {
                **_config("alice-in-a-container"),
                "environment": {"image": container_images["a"]},
                "bind_mounts": [HOST_USR],
            }
            body = {
                "config": json.dumps(config),
                "context": context_tarball({"train.py": CONTAINER_WRITER}),
            }
            exp_id = int(alice.post("/experiments", body)["experiment"]["id"])
            state = wait_for_experiment(master, exp_id)["state"]
            assert state == "COMPLETED", master.logs(trials(master, exp_id)[0]["id"])
            seen = _seen(master, exp_id)
            assert (seen["uid"], seen["gid"]) == (
                unix_users[ALICE].pw_uid,
                unix_users[ALICE].pw_gid,
            )
            (checkpoint,) = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
            stored = root / "checkpoints" / checkpoint["uuid"]
            assert (stored.stat().st_uid, stat.S_IMODE(stored.stat().st_mode)) == (
                unix_users[ALICE].pw_uid,
                0o700,
            )
            assert stat.S_IMODE((stored / "weights").stat().st_mode) == 0o600
        finally:
            remove_containers_of(root)


def test_the_trial_venv_serves_jupyterlab_to_another_user(unix_users, place) -> None:
    """What a JupyterHub's single-user servers of real Unix users need: the trial venv's
    jupyter-lab (and jupyterhub-singleuser, the same scripts) runs as a user who cannot enter
    .venv's interpreter, with the Determined server extension and sidebar enabled."""
    name = "runas_lab"
    subprocess.run(["userdel", "-r", name], capture_output=True, check=False)
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True)
    bin_dir = place / "venv-trials" / "bin"
    port = free_port()
    server = None
    try:
        singleuser = subprocess.run(
            ["runuser", "-u", name, "--", str(bin_dir / "jupyterhub-singleuser"), "--version"],
            capture_output=True,
            text=True,
            cwd="/",
        )
        assert singleuser.returncode == 0 and singleuser.stdout.strip(), singleuser.stderr
        home = pwd.getpwnam(name).pw_dir
        server = subprocess.Popen(
            [
                "runuser",
                "-u",
                name,
                "--",
                "env",
                "-i",
                f"HOME={home}",
                "PATH=/usr/bin:/bin",
                str(bin_dir / "jupyter-lab"),
                "--no-browser",
                f"--port={port}",
                "--IdentityProvider.token=lab-token",
                f"--ServerApp.root_dir={home}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd="/",
            start_new_session=True,
        )

        def master_answers() -> dict | None:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/determined/api/v1/master",
                headers={"Authorization": "token lab-token"},
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    return dict(json.loads(answer.read()))
            except OSError:
                assert server is not None and server.poll() is None, "jupyter-lab exited"
                return None

        info = wait_until(master_answers, timeout=120, interval=0.5)
        # The embedded master is the user's own, in the user's own data dir.
        assert info["root_dir"].startswith(home + "/")
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        _end_processes_of(pwd.getpwnam(name).pw_uid)  # e.g. rootless podman's pause process
        subprocess.run(["userdel", "-r", name], capture_output=True, check=False)


def _end_processes_of(uid: int) -> None:
    """SIGKILL what this test's user still runs (processes the test started, by pid)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue


def test_kernel_trials_run_as_their_owner(unix_users, place) -> None:
    """A local kernel trial (environment.kernel) of alice's: its kernel runs as her uid, with
    the trial venv's interpreter, umask 077 and no Hub token; its checkpoint is hers, 0700."""
    root = place / "kernel-root"
    env = {
        "JUPYTERHUB_API_TOKEN": HUB_TOKEN,
        "MASTER_LITE_TRIAL_PYTHON": str(place / "venv-trials" / "bin" / "python"),
        "MASTER_LITE_WARM_KERNEL_IDLE_S": "0",
    }
    with MasterProcess(
        root, cpu_slots=1, extra_args=["--run-trials-as", "owner"], env=env
    ) as master:
        alice = _user_session(master, ALICE)
        config = {**_config("alice-in-a-kernel"), "environment": {"kernel": {"keep_alive": 0}}}
        body = {"config": json.dumps(config), "context": context_tarball({"train.py": WRITER})}
        exp_id = int(alice.post("/experiments", body)["experiment"]["id"])
        state = wait_for_experiment(master, exp_id)["state"]
        assert state == "COMPLETED", master.logs(trials(master, exp_id)[0]["id"])
        seen = _seen(master, exp_id)
        assert seen["uid"] == unix_users[ALICE].pw_uid
        assert seen["hub_token"] is None and seen["umask"] == 0o077
        (checkpoint,) = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
        stored = root / "checkpoints" / checkpoint["uuid"]
        assert (stored.stat().st_uid, stat.S_IMODE(stored.stat().st_mode)) == (
            unix_users[ALICE].pw_uid,
            0o700,
        )
