"""Which Unix account runs a trial (`TrialAccounts`), what a run's environment leaves out, and
the interpreter check (master_lite/runs/_accounts.py). Fast: no master, no trial."""

from __future__ import annotations

import dataclasses
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from master_lite.runners import RunAs, process_environment
from master_lite.runs import TrialAccounts
from master_lite.runs._accounts import executable_by, prepare_storage

SOMEONE = pwd.getpwuid(os.geteuid()).pw_name  # an account that surely exists


@dataclasses.dataclass
class _User:
    username: str


def _users(**names: str):
    rows = {int(key.removeprefix("u")): _User(name) for key, name in names.items()}
    return rows.get


def test_master_mode_runs_everything_as_the_master() -> None:
    accounts = TrialAccounts("master")
    assert accounts.run_as(7, _users(u7=SOMEONE)) is None


def test_owner_mode_maps_owners_to_their_accounts() -> None:
    accounts = TrialAccounts("owner")
    # The owner account (user 1) runs as the master itself.
    assert accounts.run_as(1, _users(u1="whoever")) is None
    assert accounts.run_as(7, _users(u7=SOMEONE)) == RunAs(user=SOMEONE)


def test_a_user_without_a_unix_account_needs_the_fallback() -> None:
    with pytest.raises(OSError, match=r"user 'hub-only-x' has no Unix account.*fallback_unix_user"):
        TrialAccounts("owner").run_as(7, _users(u7="hub-only-x"))
    fallback = TrialAccounts("owner", fallback_unix_user=SOMEONE)
    assert fallback.run_as(7, _users(u7="hub-only-x")) == RunAs(user=SOMEONE)
    with pytest.raises(OSError, match="user 9"):
        fallback.run_as(9, _users())


def test_bad_settings_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="run_trials_as: expected 'master' or 'owner'"):
        TrialAccounts("nobody").check()
    if os.geteuid() == 0:
        with pytest.raises(ValueError, match="fallback_unix_user: no Unix user 'no-such-x'"):
            TrialAccounts("owner", fallback_unix_user="no-such-x").check()
    else:
        with pytest.raises(ValueError, match="needs a master that runs as root"):
            TrialAccounts("owner").check()


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory under /tmp (which everyone may enter; pytest's tmp_path is under a 0700
    directory)."""
    path = Path(tempfile.mkdtemp(prefix="det-accounts-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_executable_by_follows_the_path_and_its_links(open_tmp: Path) -> None:
    tmp_path = open_tmp
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "python").write_text("#!/bin/sh\n")
    (closed / "python").chmod(0o755)
    opened = tmp_path / "open"
    opened.mkdir(mode=0o755)
    (opened / "python").symlink_to(closed / "python")
    tmp_path.chmod(0o755)
    stranger = 65534  # nobody: neither owner nor group of these files
    assert executable_by(str(closed / "python"), 0, set())  # root may
    assert not executable_by(str(closed / "python"), stranger, {stranger})
    # A link from an open directory into a closed one: still closed.
    assert not executable_by(str(opened / "python"), stranger, {stranger})
    closed.chmod(0o711)
    assert executable_by(str(opened / "python"), stranger, {stranger})
    (closed / "python").chmod(0o750)
    assert not executable_by(str(opened / "python"), stranger, {stranger})


def test_an_interpreter_the_account_cannot_run_is_named(open_tmp: Path) -> None:
    tmp_path = open_tmp
    tmp_path.chmod(0o700)
    python = tmp_path / "python"
    python.write_text("")
    python.chmod(0o755)
    accounts = TrialAccounts("owner", trial_python=str(python))
    assert accounts.python_for(None) is None
    if os.geteuid() != 0:
        pytest.skip("needs another account than the test's own")
    with pytest.raises(OSError, match=rf"'nobody' cannot execute the trial interpreter {python}"):
        accounts.python_for(RunAs(user="nobody"))
    tmp_path.chmod(0o755)
    assert accounts.python_for(RunAs(user="nobody")) == str(python)


def test_runs_never_get_the_services_hub_token_nor_master_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (
        "JUPYTERHUB_API_TOKEN",
        "JUPYTERHUB_CLIENT_ID",
        "JUPYTERHUB_OAUTH_CALLBACK_URL",
        "JPY_API_TOKEN",
        "MASTER_LITE_KERNEL_GATEWAY_TOKEN",
        "JUPYTER_GATEWAY_AUTH_TOKEN",
    ):
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("SOMETHING_ELSE", "kept")
    env = process_environment({"DET_TRIAL_ID": "3"}, python="/opt/trials/bin/python")
    assert not [name for name, value in env.items() if value == "secret"]
    assert env["SOMETHING_ELSE"] == "kept" and env["DET_TRIAL_ID"] == "3"
    assert env["PATH"].startswith("/opt/trials/bin" + os.pathsep)


def test_storage_of_a_run_as_another_account(tmp_path: Path) -> None:
    """A missing base is made 1733; the trial's TensorBoard dir is its own, under the
    master's; a tree a trial made (not the master's) is never descended."""
    if os.geteuid() != 0:
        pytest.skip("needs root to hand directories to another account")
    base = tmp_path / "storage"
    config = {"checkpoint_storage": {"type": "shared_fs", "host_path": str(base)}}
    prepare_storage(config, RunAs(user="nobody"), 4, 9)
    assert base.stat().st_mode & 0o7777 == 0o1733
    trial_dir = base / "tensorboard" / "experiment" / "4" / "trial" / "9"
    assert trial_dir.stat().st_uid == pwd.getpwnam("nobody").pw_uid
    assert trial_dir.stat().st_mode & 0o777 == 0o700
    assert (trial_dir.parent.stat().st_uid, trial_dir.parent.stat().st_mode & 0o777) == (0, 0o711)
    # A symlink planted where the master would descend: left alone, nothing made through it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, base / "tensorboard" / "experiment" / "5")
    prepare_storage(config, RunAs(user="nobody"), 5, 1)
    assert list(elsewhere.iterdir()) == []


def test_runners_that_cannot_run_as_another_user_say_what_to_change(tmp_path: Path) -> None:
    from master_lite.runners import LaunchSpec, refuse_run_as

    class KernelRunner:  # the name is what the message shows
        pass

    spec = LaunchSpec("trial-1.1", 1, ["true"], {}, tmp_path, run_as=RunAs(user="alice"))
    with pytest.raises(NotImplementedError) as refused:
        refuse_run_as(KernelRunner(), spec, "environment.kernel")  # type: ignore[arg-type]
    message = str(refused.value)
    assert "KernelRunner cannot run a trial as another Unix user (alice)" in message
    assert "remove environment.kernel from the experiment's config" in message
    assert "run_trials_as='master'" in message
    refuse_run_as(KernelRunner(), LaunchSpec("trial-1.1", 1, [], {}, tmp_path))  # type: ignore[arg-type]


def test_a_root_dir_others_cannot_reach_is_refused(open_tmp: Path) -> None:
    from master_lite.runs import check_reachable

    closed = open_tmp / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(ValueError, match=rf"{closed} \(above the root dir .*chmod o\+x {closed}"):
        check_reachable(closed / "determined" / "root")
    check_reachable(open_tmp / "root")  # /tmp and an 0755 directory: fine


def test_shared_storage_entries_are_the_masters_before_any_trial(tmp_path: Path) -> None:
    """In 1733 storage the first to create a name owns it: the master makes `tensorboard` and
    `.det-trials` first, and refuses a container run whose `.det-trials` a trial made."""
    if os.geteuid() != 0:
        pytest.skip("needs root to hand directories to another account")
    from master_lite.runs import open_root

    root = tmp_path / "root"
    for sub in ("", "trials", "checkpoints"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    open_root(root)
    for name in ("tensorboard", ".det-trials"):
        made = (root / "checkpoints" / name).stat()
        assert (made.st_uid, made.st_mode & 0o777) == (0, 0o711)
    base = tmp_path / "other-storage"
    base.mkdir()
    (base / ".det-trials").mkdir()
    os.chown(base / ".det-trials", pwd.getpwnam("nobody").pw_uid, -1)
    config = {"checkpoint_storage": {"type": "shared_fs", "host_path": str(base)}}
    with pytest.raises(OSError, match=r"\.det-trials is not the master's"):
        prepare_storage(config, RunAs(user="nobody"), 1, 1, container=True)
    prepare_storage(config, RunAs(user="nobody"), 1, 1)  # a process run does not use it
