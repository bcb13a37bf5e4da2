"""Real Unix accounts for the team tests: made with `useradd`, removed with `userdel -r`.

A shared master runs each trial as its owner's Unix user, and JupyterHub's own spawner starts
each user's JupyterLab as that user: the tests that show it need real accounts, so they run as
root (as `make test` does; it installs Debian packages). Names carry a prefix per test module,
so parallel modules never share an account, and an account left by a killed run is taken over.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager


@dataclasses.dataclass(frozen=True)
class UnixUser:
    """A Unix account made by a test."""

    name: str
    uid: int
    gid: int
    home: str


def missing_account_requirement() -> str | None:
    """Why this process cannot make Unix accounts (with what to do), or None."""
    if os.geteuid() != 0:
        return "making Unix accounts needs root: run the team tests as root (make test does)"
    for tool in ("useradd", "userdel", "pkill"):
        if shutil.which(tool) is None:
            return f"{tool} is missing: apt-get install -y passwd procps"
    return None


def _end_processes(name: str) -> None:
    # A killed earlier run may have left the account's servers and trials behind.
    subprocess.run(["pkill", "-KILL", "-u", name], check=False)


def _remove(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    _end_processes(name)
    # userdel refuses while a process of the account lives; the processes were just killed.
    subprocess.run(["userdel", "-r", "-f", name], check=False, capture_output=True)


def _create(name: str) -> UnixUser:
    _remove(name)
    subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/bash", name],
        check=True,
        capture_output=True,
    )
    entry = pwd.getpwnam(name)
    return UnixUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


@contextmanager
def unix_users(names: Sequence[str]) -> Iterator[dict[str, UnixUser]]:
    """Make the accounts `names` (replacing leftovers of the same name), yield them by name,
    and remove them with their home directories and processes at the end."""
    made: dict[str, UnixUser] = {}
    try:
        for name in names:
            made[name] = _create(name)
        yield made
    finally:
        for name in names:
            _remove(name)


def run_as(
    user: UnixUser,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: str | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` as `user` (its uid, gid and own groups; in `cwd`, default its home), as a
    terminal of that user's would: `env` is the whole environment, `stdin` what is typed."""
    return subprocess.run(
        list(argv),
        input=stdin,
        env=dict(env),
        cwd=cwd or user.home,
        user=user.uid,
        group=user.gid,
        extra_groups=os.getgrouplist(user.name, user.gid),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def process_environment(pid: int) -> dict[str, str]:
    """The environment process `pid` started with (root reads any process's), e.g. that of a
    user's JupyterLab server, which its terminals and kernels inherit."""
    with open(f"/proc/{pid}/environ", "rb") as file:
        raw = file.read()
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[os.fsdecode(key)] = os.fsdecode(value)
    return env


__all__ = [
    "UnixUser",
    "missing_account_requirement",
    "process_environment",
    "run_as",
    "unix_users",
]
