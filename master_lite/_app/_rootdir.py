"""The root dir is one master's, and only its user's.

* `RootDirLock` (`MasterLite.claim_root_dir`): one master per root dir, by an OS lock (`fcntl.flock` on
  `<root_dir>/master.lock`) taken before the master writes anything else there. The lock goes
  with the process (a SIGKILLed master leaves no stale lock); the file names the holder's pid
  and URL so that a second master can say who holds it.
* `make_private`: the root dir is 0700 and what the master writes at its top (master.db,
  contexts/, trials/, checkpoints/, master.json, the token) 0700/0600, so that another local
  Unix user can read neither the store (registry passwords, tokens) nor contexts' code nor
  checkpoints. An existing, looser root dir is tightened at start, with a log line.
* `write_user_token`: the user token lives in `<root_dir>/private/user_token` (dir 0700,
  file 0600), not in master.json (docs/reliability.md, "the user token").

The process umask is left alone on purpose: hosted in jupyter_server it would change the modes
of the user's notebooks, and trials inherit it (checkpoint storage outside the root dir keeps
the user's umask). A 0700 root dir already keeps every deeper path from other users (they
cannot traverse it); the top-level modes are a second fence.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import time
from pathlib import Path

log = logging.getLogger("master_lite")

LOCK_FILE = "master.lock"
# What a master writes at the top of its root dir (tightened at start when looser). Anything
# else there is the user's (a root dir may be a directory with other files): left alone, and
# out of other users' reach anyway once the root dir is 0700.
MASTER_ENTRIES = frozenset(
    {
        "master.db",
        "master.db-wal",
        "master.db-shm",
        "master.db-journal",
        "master.json",
        "master.log",
        LOCK_FILE,
        "contexts",
        "trials",
        "checkpoints",
        "tensorboards",
        "private",
    }
)
PRIVATE_DIR = "private"
USER_TOKEN_FILE = "user_token"
DIR_MODE = 0o700
FILE_MODE = 0o600


class RootDirInUse(RuntimeError):
    """Another live master holds the root dir's lock; the message names it."""


def _tighten(path: Path, st: os.stat_result) -> bool:
    """chmod `path` so that group and others have nothing; True if it changed."""
    if st.st_uid != os.geteuid() or not (st.st_mode & 0o077):
        return False
    os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077, follow_symlinks=False)
    return True


def make_private(root_dir: str | os.PathLike) -> None:
    """Create the root dir 0700, or tighten an existing one (and the master's entries at its
    top, `MASTER_ENTRIES`) so that no other local user can read it. A shared directory (sticky
    bit, e.g. /tmp) or one owned by someone else is never changed: a warning says so."""
    root = Path(root_dir)
    root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    st = root.stat()
    if st.st_mode & stat.S_ISVTX or st.st_uid != os.geteuid():
        log.warning(
            "root dir %s is shared (sticky bit or another owner): its files are not private; "
            "choose a directory of your own with --root-dir",
            root,
        )
        return
    tightened = [str(root)] if _tighten(root, st) else []
    for name in sorted(MASTER_ENTRIES):
        entry = root / name
        try:
            entry_st = entry.lstat()
        except OSError:  # absent (or unreadable: not ours to change)
            continue
        if not stat.S_ISLNK(entry_st.st_mode) and _tighten(entry, entry_st):
            tightened.append(entry.name)
    if tightened:
        log.info(
            "root dir %s: made private (group/other permissions removed from %s)",
            root,
            ", ".join(tightened),
        )


def _read_holder(path: Path) -> dict:
    """The `{pid, url}` the lock's holder wrote ({} if none yet). The holder writes it in
    place over the old content (no truncation first), so the first JSON object is whole."""
    try:
        info, _ = json.JSONDecoder().raw_decode(path.read_text().lstrip())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _describe_holder(path: Path) -> str:
    # The holder writes its pid right after taking the lock: a master that lost the race by
    # microseconds may look before that, so it looks again, briefly, to name the holder.
    info = _read_holder(path)
    for _ in range(40):
        if info.get("pid"):
            break
        time.sleep(0.025)
        info = _read_holder(path)
    pid, url = info.get("pid"), info.get("url")
    parts = [f"pid {pid}" if pid else "pid unknown", url or "URL not published yet"]
    return ", ".join(parts)


class RootDirLock:
    """The OS lock that makes a process the one master of a root dir (held until `release`
    or the process's end)."""

    def __init__(self, root_dir: str | os.PathLike) -> None:
        self.path = Path(root_dir) / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise RootDirInUse naming the root dir and the holder."""
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RootDirInUse(
                f"root dir {self.path.parent} is in use by another master-lite "
                f"({_describe_holder(self.path)}); stop it, or choose another root dir with "
                "--root-dir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.publish(None)

    def publish(self, url: str | None) -> None:
        """Write `{pid, url}` into the lock file (what a second master's error names)."""
        if self._fd is None:
            return
        data = json.dumps({"pid": os.getpid(), "url": url}).encode() + b"\n"
        os.pwrite(self._fd, data, 0)  # over the old content: a reader never sees it empty
        os.ftruncate(self._fd, len(data))

    def release(self) -> None:
        """Give the lock up (the file stays: removing it would race a starting master)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor releases the flock


def user_token_path(root_dir: str | os.PathLike) -> Path:
    """`<root_dir>/private/user_token`: the master's user token, for the CLI of its user."""
    return Path(root_dir) / PRIVATE_DIR / USER_TOKEN_FILE


def write_user_token(root_dir: str | os.PathLike, token: str) -> Path:
    """Write the user token 0600 in a 0700 directory (created private from the start)."""
    path = user_token_path(root_dir)
    path.parent.mkdir(mode=DIR_MODE, exist_ok=True)
    os.chmod(path.parent, DIR_MODE)
    temporary = path.with_name(f".{USER_TOKEN_FILE}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
    os.replace(temporary, path)
    return path


__all__ = [
    "LOCK_FILE",
    "RootDirInUse",
    "RootDirLock",
    "make_private",
    "user_token_path",
    "write_user_token",
]
