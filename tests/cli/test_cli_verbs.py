"""The Determined verbs of `det` beyond create/list/describe, through a real master-lite:
`det version`, `det master info`, `det user login|logout|whoami` (Determined's auth.json, with
HOME pointed at the test's directory), `det experiment list --csv`, `det trial download`, and
`det experiment label|set|delete`.

Every `det` runs as a subprocess in a new session (no controlling terminal), as a script would:
`det user login` then reads the password (the master's user token) from standard input.
"""

from __future__ import annotations

import csv
import getpass
import io
import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest
import yaml

import determined
from determined.common.api import TokenStoreError, authentication
from tests._support import MasterProcess, child_env, submit, wait_for_experiment, wait_until

pytestmark = pytest.mark.slow

TRAIN_PY = """
import json
import pathlib

from determined import core

LOSS = {1: 0.5, 2: 0.1, 3: 0.3}
ACC = {1: 0.9, 2: 0.2, 3: 0.5}

with core.init() as core_context:
    steps = 0
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            metrics = {"loss": LOSS[steps], "acc": ACC[steps]}
            core_context.train.report_training_metrics(steps_completed=steps, metrics=metrics)
            core_context.train.report_validation_metrics(steps_completed=steps, metrics=metrics)
            with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                (pathlib.Path(path) / "weights.json").write_text(json.dumps({"steps": steps}))
        op.report_completed(LOSS[steps])
"""

NO_CHECKPOINT_PY = """
from determined import core

with core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_training_metrics(steps_completed=op.length, metrics={"loss": 1.0})
        op.report_completed(1.0)
"""


def config(entrypoint: str, name: str) -> dict:
    return {
        "name": name,
        "entrypoint": entrypoint,
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 3}},
        "hyperparameters": {},
        # Keep every checkpoint: --latest, --best and --sort-by pick different ones.
        "checkpoint_storage": {
            "save_experiment_best": 5,
            "save_trial_best": 5,
            "save_trial_latest": 5,
        },
    }


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("verbs-root")) as process:
        yield process


@pytest.fixture(scope="module")
def trained(master):
    """(trial with checkpoints at steps 1..3, trial without checkpoints), both COMPLETED."""
    files = {"train.py": TRAIN_PY, "nockpt.py": NO_CHECKPOINT_PY}
    with_ckpt = submit(master, config("python3 train.py", "verbs-ckpt"), files)
    without = submit(master, config("python3 nockpt.py", "verbs-nockpt"), files)
    for exp_id in (with_ckpt, without):
        wait_for_experiment(master, exp_id, {"COMPLETED"})
    return with_ckpt, master.trials(with_ckpt)[0]["id"], master.trials(without)[0]["id"]


def user_env(home: pathlib.Path, **extra: str) -> dict:
    """A user's shell: HOME at `home`, no XDG_CONFIG_HOME, no DET_* settings; then `extra`."""
    env = child_env()
    env["HOME"] = str(home)
    env.pop("XDG_CONFIG_HOME", None)
    env.update(extra)
    return env


def local_env(master: MasterProcess, home: pathlib.Path) -> dict:
    """On the master's machine: the master is found through its master.json."""
    return user_env(home, MASTER_LITE_ROOT_DIR=str(master.root_dir))


def remote_env(master: MasterProcess, home: pathlib.Path, **extra: str) -> dict:
    """Elsewhere: DET_MASTER names the master, no token and no master.json to read."""
    return user_env(
        home, MASTER_LITE_ROOT_DIR=str(home / "no-master-here"), DET_MASTER=master.url, **extra
    )


def det(env: dict, *args: str, stdin: str = "", cwd: pathlib.Path | None = None):
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,  # no controlling terminal, as in a script or CI
    )


def ok(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return str(result.stdout)


def failed(result, *texts: str) -> str:
    """Exit 1, no traceback, each of `texts` on stderr; returns stderr."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    for text in texts:
        assert text in result.stderr, result.stderr
    return str(result.stderr)


def auth_file(home: pathlib.Path) -> pathlib.Path:
    return home / ".config" / "determined" / "auth.json"


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ---- det version, det master info ----------------------------------------------------------------


def test_version_shows_client_and_master(master, tmp_path):
    env = local_env(master, tmp_path)
    shown = yaml.safe_load(ok(det(env, "version")))
    info = master.session.get("/master")
    assert shown == {
        "client": {"version": determined.__version__},
        "master": {"cluster_id": info["cluster_id"], "master_id": "", "version": info["version"]},
        "master_address": master.url,
    }
    assert ok(det(env, "-v")).strip() == f"det {determined.__version__}"


def test_version_without_a_reachable_master_shows_the_client_and_why(tmp_path, refused_port):
    env = user_env(tmp_path, MASTER_LITE_ROOT_DIR=str(tmp_path / "empty"))
    result = det(env, "-m", f"http://127.0.0.1:{refused_port}", "version")
    shown = yaml.safe_load(ok(result))
    assert shown["client"] == {"version": determined.__version__}
    assert shown["master"]["version"] == ""
    assert "cannot reach the master" in result.stderr
    nowhere = det(env, "version")
    assert yaml.safe_load(ok(nowhere))["master_address"] == ""
    assert "Master not found" in nowhere.stderr


def test_master_info_yaml_and_json(master, tmp_path, refused_port):
    env = local_env(master, tmp_path)
    as_json = json.loads(ok(det(env, "master", "info", "--json")))
    assert as_json == master.session.get("/master")
    assert as_json["root_dir"] == str(master.root_dir)
    assert yaml.safe_load(ok(det(env, "master", "info"))) == as_json
    assert yaml.safe_load(ok(det(env, "master", "info", "--yaml"))) == as_json
    failed(
        det(env, "-m", f"http://127.0.0.1:{refused_port}", "master", "info"),
        "cannot reach the master at",
    )


# ---- det user login / whoami / logout -------------------------------------------------------------


def test_login_stores_the_token_where_determined_keeps_it(master, tmp_path):
    home = tmp_path / "home"
    env = remote_env(master, home)
    failed(det(env, "e", "list"), "missing or invalid token", "det user login")
    failed(det(env, "user", "whoami"), "det user login")

    failed(
        det(env, "user", "login", "alice", stdin="not-the-token\n"),
        "invalid username and/or password",
    )
    assert not auth_file(home).exists()
    failed(det(env, "user", "login", "alice", stdin="\n"), "no password given")

    ok(det(env, "user", "login", "alice", stdin=master.token + "\n"))
    path = auth_file(home)
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    key = authentication.store_key(master.url)
    assert json.loads(path.read_text()) == {
        "version": 2,
        "masters": {key: {"active_user": "alice", "tokens": {"alice": master.token}}},
    }

    # Later commands use the stored token, with DET_MASTER ...
    ok(det(env, "e", "list"))
    assert ok(det(env, "user", "whoami")).strip() == "You are logged in as user 'alice'"
    # ... and without: the one stored login names the master too.
    bare = user_env(home, MASTER_LITE_ROOT_DIR=str(home / "no-master-here"))
    ok(det(bare, "e", "list"))
    # -u picks whose stored token is used.
    failed(det(env, "-u", "bob", "e", "list"), "missing or invalid token")

    ok(det(env, "user", "logout"))
    assert mode(path) == 0o600
    assert json.loads(path.read_text()) == {"version": 2, "masters": {}}
    failed(det(env, "e", "list"), "missing or invalid token")
    again = det(env, "user", "logout")
    assert again.returncode == 0 and "Not logged in" in again.stderr
    failed(det(bare, "e", "list"), "no master found", str(path))


def det_on_a_terminal(
    env: dict, *args: str, answer: str, prompt: str = "Password for user"
) -> tuple[int, str]:
    """Run `det` with a pseudo-terminal as its controlling terminal; type `answer` at the
    `prompt` (the password prompt). Returns (exit code, everything the terminal showed)."""
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once, nothing else
        os.execve(sys.executable, [sys.executable, "-m", "determined.cli", *args], env)
    shown, answered = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child is gone
                break
            if not chunk:
                break
            shown += chunk
            if not answered and prompt.encode() in shown:
                os.write(fd, answer.encode() + b"\n")
                answered = True
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_login_on_a_terminal_asks_with_getpass_and_does_not_echo(master, tmp_path):
    home = tmp_path / "home"
    env = remote_env(master, home)
    code, shown = det_on_a_terminal(env, "user", "login", "erin", answer=master.token)
    assert code == 0, shown
    assert "Password for user 'erin': " in shown
    assert master.token not in shown  # getpass turned echo off
    assert authentication.stored_login(master.url, path=auth_file(home)) == ("erin", master.token)
    code, shown = det_on_a_terminal(env, "user", "login", "erin", answer="wrong")
    assert code == 1 and "invalid username and/or password" in shown and "Traceback" not in shown


def test_login_follows_xdg_config_home_and_keeps_other_masters(master, tmp_path):
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    path = xdg / "determined" / "auth.json"
    path.parent.mkdir(parents=True)
    other = {"active_user": "carol", "tokens": {"carol": "t0", "dave": "t1"}}
    path.write_text(json.dumps({"version": 2, "masters": {"http://elsewhere:8080": other}}))
    env = remote_env(master, home, XDG_CONFIG_HOME=str(xdg))
    ok(det(env, "-u", "bob", "user", "login", stdin=master.token))
    store = json.loads(path.read_text())
    assert store["masters"]["http://elsewhere:8080"] == other
    assert store["masters"][authentication.store_key(master.url)]["active_user"] == "bob"
    assert mode(path) == 0o600 and not auth_file(home).exists()
    assert ok(det(env, "user", "whoami")).strip() == "You are logged in as user 'bob'"
    ok(det(env, "user", "logout", "--all"))
    assert authentication.store_key(master.url) not in json.loads(path.read_text())["masters"]


def test_environment_token_wins_and_a_stale_login_says_what_to_do(master, tmp_path):
    home = tmp_path / "home"
    ok(det(remote_env(master, home), "user", "login", "alice", stdin=master.token))
    failed(
        det(remote_env(master, home, DET_MASTER_TOKEN="wrong"), "e", "list"),
        "missing or invalid token",
    )
    store = authentication.TokenStore(master.url, auth_file(home))
    store.set_token("alice", "stale")
    stale = failed(det(remote_env(master, home), "e", "list"), "no longer valid", "det user login")
    assert "DET_MASTER_TOKEN" in stale


def test_login_errors_unreachable_and_no_master(tmp_path, refused_port):
    env = user_env(tmp_path, MASTER_LITE_ROOT_DIR=str(tmp_path / "empty"))
    failed(
        det(env, "-m", f"http://127.0.0.1:{refused_port}", "user", "login", stdin="x\n"),
        "cannot reach the master at",
    )
    failed(det(env, "user", "login", stdin="x\n"), "no master found")
    assert not auth_file(tmp_path).exists()


def test_whoami_with_the_master_file_token(master, tmp_path):
    import getpass

    env = local_env(master, tmp_path)
    expected = f"You are logged in as user '{getpass.getuser()}'"
    assert ok(det(env, "user", "whoami")).strip() == expected


def test_token_store_reads_determined_files_and_reports_broken_ones(tmp_path):
    assert authentication.store_key("localhost") == "http://localhost:8080"
    assert authentication.store_key("https://h") == "https://h:443"
    assert authentication.store_key("http://h:81/api/v1/") == "http://h:81"
    path = tmp_path / "auth.json"
    # Version 1 (URLs not canonical yet) is read as Determined reads it.
    path.write_text(
        json.dumps({"version": 1, "masters": {"h:9": {"active_user": "a", "tokens": {"a": "t"}}}})
    )
    assert authentication.stored_login("http://h:9", path=path) == ("a", "t")
    assert authentication.logged_in_masters(path) == ["http://h:9"]
    path.write_text("{not json")
    with pytest.raises(TokenStoreError, match="auth.json"):
        authentication.TokenStore("http://h:9", path)


# ---- det experiment list --csv, list-trials/list-checkpoints --csv ---------------------------------


def test_experiment_list_csv(master, trained, tmp_path):
    env = local_env(master, tmp_path)
    exp_id, trial_id, _ = trained
    rows = list(csv.reader(io.StringIO(ok(det(env, "e", "list", "--csv")))))
    assert rows[0] == ["ID", "Owner", "Name", "State", "Progress", "Trials", "Started", "Ended"]
    mine = [r for r in rows[1:] if r[0] == str(exp_id)]
    assert mine and mine[0][2:4] == ["verbs-ckpt", "COMPLETED"]
    assert mine[0][1] == getpass.getuser()  # the owner account: the master's Unix login
    assert list(csv.reader(io.StringIO(ok(det(env, "e", "list", "--all", "--csv")))))[0][-1] == (
        "Archived"
    )
    assert det(env, "e", "list", "--csv", "--json").returncode == 2

    trials = list(csv.reader(io.StringIO(ok(det(env, "e", "lt", str(exp_id), "--csv")))))
    assert trials[0][0] == "Trial ID" and trials[1][0] == str(trial_id)
    checkpoints = list(csv.reader(io.StringIO(ok(det(env, "e", "lc", str(exp_id), "--csv")))))
    assert checkpoints[0][0] == "UUID" and len(checkpoints) == 4


# ---- det trial download -------------------------------------------------------------------------


def downloaded_steps(directory: pathlib.Path) -> int:
    return int(json.loads((directory / "weights.json").read_text())["steps"])


def test_trial_download_latest_best_sort_by_and_uuid(master, trained, tmp_path):
    env = local_env(master, tmp_path)
    exp_id, trial_id, _ = trained
    tid = str(trial_id)

    latest = ok(det(env, "t", "download", tid, "--latest", "-o", str(tmp_path / "l"), "-q"))
    assert latest.strip() == str(tmp_path / "l") and downloaded_steps(tmp_path / "l") == 3

    best = ok(det(env, "t", "download", tid, "--best", "-o", str(tmp_path / "b")))
    assert best.startswith("Local checkpoint path:") and downloaded_steps(tmp_path / "b") == 2

    flags = ["--sort-by", "acc", "--smaller-is-better", "false", "-o", str(tmp_path / "acc")]
    ok(det(env, "t", "download", tid, "--best", *flags))
    assert downloaded_steps(tmp_path / "acc") == 1

    checkpoints = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    first = next(c["uuid"] for c in checkpoints if c["steps_completed"] == 1)
    ok(
        det(
            env,
            "t",
            "download",
            tid,
            "--uuid",
            first,
            "--mode",
            "master",
            "-o",
            str(tmp_path / "u"),
        )
    )
    assert downloaded_steps(tmp_path / "u") == 1
    assert json.loads((tmp_path / "u" / "metadata.json").read_text())["steps_completed"] == 1

    default = ok(det(env, "t", "download", tid, "--latest", "-q", cwd=tmp_path))
    assert default.strip() == os.path.join(
        "checkpoints", next(c["uuid"] for c in checkpoints if c["steps_completed"] == 3)
    )


def test_trial_download_errors(master, trained, tmp_path):
    env = local_env(master, tmp_path)
    exp_id, trial_id, bare_trial = trained
    tid = str(trial_id)
    failed(det(env, "t", "download", "999999", "--latest"), "trial 999999 not found")
    failed(det(env, "t", "download", str(bare_trial), "--best"), "No checkpoints found for trial")
    failed(
        det(env, "t", "download", tid, "--best", "--sort-by", "acc"),
        "--sort-by and --smaller-is-better must be set together",
    )
    failed(
        det(env, "t", "download", tid, "--latest", "--sort-by", "acc", "--smaller-is-better", "1"),
        "can only be used with --best",
    )
    failed(
        det(env, "t", "download", tid, "--best", "--sort-by", "nope", "--smaller-is-better", "1"),
        "has a validation metric 'nope'",
    )
    failed(det(env, "t", "download", tid, "--uuid", "no-such-uuid"), "not found")
    other = submit(master, config("python3 train.py", "verbs-other"), {"train.py": TRAIN_PY})
    wait_for_experiment(master, other, {"COMPLETED"})
    foreign = wait_until(
        lambda: master.session.get(f"/experiments/{other}/checkpoints")["checkpoints"],
        what="checkpoints of another trial",
    )[0]["uuid"]
    failed(det(env, "t", "download", tid, "--uuid", foreign), "belongs to trial")
    usage = det(env, "t", "download", tid)
    assert usage.returncode == 2 and "--best --latest --uuid" in usage.stderr
    assert exp_id != other


# ---- det experiment label / set / delete --------------------------------------------------------


def test_label_add_and_remove(master, trained, tmp_path):
    env = local_env(master, tmp_path)
    exp_id = str(trained[0])
    assert ok(det(env, "e", "label", "add", exp_id, "best")).strip() == (
        f"Added label 'best' to experiment {exp_id}"
    )
    ok(det(env, "e", "label", "add", exp_id, "keep"))
    ok(det(env, "e", "label", "add", exp_id, "best"))  # already there: unchanged
    assert master.session.get(f"/experiments/{exp_id}")["experiment"]["labels"] == ["best", "keep"]
    ok(det(env, "e", "label", "remove", exp_id, "best"))
    ok(det(env, "e", "label", "remove", exp_id, "never-added"))
    assert master.session.get(f"/experiments/{exp_id}")["experiment"]["labels"] == ["keep"]
    failed(det(env, "e", "label", "add", exp_id, " "), "body.labels: a label cannot be empty")
    failed(det(env, "e", "label", "add", "999999", "x"), "experiment 999999 not found")


def test_set_name_description_and_the_scheduling_resources(master, trained, tmp_path):
    env = local_env(master, tmp_path)
    exp_id = str(trained[0])
    ok(det(env, "e", "set", "name", exp_id, "verbs-renamed"))
    ok(det(env, "e", "set", "description", exp_id, "what it learned"))
    assert ok(det(env, "e", "set", "priority", exp_id, "7")).strip() == (
        f"Set priority of experiment {exp_id} to 7"
    )
    ok(det(env, "e", "set", "max-slots", exp_id, "1"))
    ok(det(env, "e", "set", "weight", exp_id, "0.5"))
    experiment = master.session.get(f"/experiments/{exp_id}")["experiment"]
    try:
        assert (experiment["name"], experiment["description"]) == (
            "verbs-renamed",
            "what it learned",
        )
        resources = experiment["config"]["resources"]
        assert (resources["priority"], resources["max_slots"], resources["weight"]) == (7, 1, 0.5)
        assert "unlimited" in ok(det(env, "e", "set", "max-slots", exp_id, "none"))
        resources = master.session.get(f"/experiments/{exp_id}")["experiment"]["config"]
        assert resources["resources"]["max_slots"] is None
    finally:
        ok(det(env, "e", "set", "name", exp_id, "verbs-ckpt"))
    for attribute, value, why in (
        ("priority", "0", "must be between 1 and 99"),
        ("max-slots", "-2", "must be >= 0"),
        ("weight", "heavy", "expected a number"),
    ):
        usage = det(env, "e", "set", attribute, exp_id, value)
        assert usage.returncode == 2 and why in usage.stderr
    failed(det(env, "e", "set", "name", exp_id, ""), "body.name")


def test_delete_asks_refuses_without_a_terminal_and_deletes_with_yes(master, tmp_path):
    env = local_env(master, tmp_path)
    exp_id = submit(master, config("python3 train.py", "verbs-doomed"), {"train.py": TRAIN_PY})
    wait_for_experiment(master, exp_id, {"COMPLETED"})
    uuids = [
        c["uuid"] for c in master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    ]
    files = [master.root_dir / "checkpoints" / uuid for uuid in uuids]
    assert files and all(path.is_dir() for path in files)

    failed(det(env, "e", "delete", str(exp_id)), "pass --yes")
    assert master.session.get(f"/experiments/{exp_id}")["experiment"]["id"] == exp_id
    code, shown = det_on_a_terminal(env, "e", "delete", str(exp_id), answer="n", prompt="[y/N]")
    assert code == 1 and "Nothing deleted." in shown
    assert all(path.is_dir() for path in files)

    code, shown = det_on_a_terminal(env, "e", "delete", str(exp_id), answer="y", prompt="[y/N]")
    assert code == 0, shown
    assert f"Deleted experiment {exp_id}: 1 trial(s), {len(uuids)} checkpoint(s)" in shown
    assert not any(path.exists() for path in files)
    listed = csv.reader(io.StringIO(ok(det(env, "e", "list", "--csv"))))
    assert str(exp_id) not in [row[0] for row in listed]
    failed(det(env, "e", "delete", str(exp_id), "--yes"), f"experiment {exp_id} not found")


def test_delete_of_a_running_experiment_is_refused(master, tmp_path):
    env = local_env(master, tmp_path)
    paused = master.session.post(
        "/experiments",
        {"config": config("python3 train.py", "verbs-paused"), "activate": False},
    )["experiment"]["id"]
    failed(
        det(env, "e", "delete", str(paused), "--yes"),
        f"experiment {paused} is PAUSED: only finished experiments can be deleted",
    )
    master.session.post(f"/experiments/{paused}/kill")
    wait_for_experiment(master, paused, {"CANCELED"})
    assert "Deleted experiment" in ok(det(env, "e", "delete", str(paused), "--yes"))
