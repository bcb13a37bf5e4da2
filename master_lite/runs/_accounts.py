"""Which Unix account runs a trial, and the directories such a trial needs (docs/team.md,
"What runs as whom").

`MasterLite.run_trials_as`: "master" (default) runs every trial as the master's own account;
"owner" runs an experiment's trials as the Unix account named like its owner (the master must
be root). The owner account (user 1) still runs as the master; a user with no Unix account of
that name runs as `MasterLite.fallback_unix_user`, and with none set its runs fail to start
with a message naming both.

A trial run as another account must reach its own files and nothing else of the master's:

* its work dir `<root>/trials/<trial id>/run-<n>` is handed to it (owner, mode 0700); the root
  dir and `trials/`, `trials/<id>/` are 0711 (traversable, not listable), while master.db*,
  master.json, private/, contexts/ stay 0600/0700 and the master's (`_rootdir.make_private`);
* its checkpoint storage base is mode 1733 (anyone may create an entry, nobody but its maker
  and the master may enter or remove it; not listable), and the run's umask is 077, so each
  checkpoint directory `<base>/<uuid>` is 0700 and its writer's. The TensorBoard tree
  `<base>/tensorboard/experiment/<e>/trial/<t>` is made by the master (0711 down to `trial/`)
  with the last directory the trial's;
* `python3` is an interpreter that account can execute (`trial_python`: by default the
  `.venv-trials` that `make install` makes; see `executable_by`).
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from determined.common import storage
from master_lite.runners import RunAs
from master_lite.runners.container import VIEWS_DIR

MODES = ("master", "owner")
OWNER_ID = 1  # the owner account (master_lite.store.OWNER_ID): runs as the master itself
# Traversable but not listable: a trial reaches its own work dir by its path only.
TRAVERSE_MODE = 0o711
PRIVATE_MODE = 0o700
# Create entries, never list nor remove another's (sticky): shared checkpoint storage.
STORAGE_MODE = 0o1733
TRIAL_UMASK = 0o077
TRIALS_VENV = ".venv-trials"
TENSORBOARD_DIR = "tensorboard"  # the harness's upload: <base>/tensorboard/experiment/<e>/...


def default_trial_python() -> str:
    """`.venv-trials/bin/python` beside the package's repository or the master's venv (made by
    `make install`), when it exists; else "" (the master's own interpreter)."""
    candidates = (
        Path(__file__).resolve().parents[2] / TRIALS_VENV,
        Path(sys.prefix).parent / TRIALS_VENV,
    )
    for venv in candidates:
        python = venv / "bin" / "python"
        if python.exists():
            return str(python)
    return ""


def executable_by(path: str, uid: int, gids: set[int]) -> bool:
    """Whether `uid` (with groups `gids`) may execute `path`: every directory on the way to it,
    and to what its symlinks point at, lets it through, and the file lets it read and execute
    (an interpreter is read too). Mode bits only, without starting anything."""
    if uid == 0:
        return True

    def allows(target: Path, bits: int) -> bool:
        try:
            st = target.stat()
        except OSError:
            return False
        if st.st_uid == uid:
            shift = 6
        elif st.st_gid in gids:
            shift = 3
        else:
            shift = 0
        return (stat.S_IMODE(st.st_mode) >> shift) & bits == bits

    given = Path(path).absolute()
    real = given.resolve()
    for candidate in (given, real):
        for parent in candidate.parents:
            if not allows(parent, 1):
                return False
    return allows(real, 5)


@dataclasses.dataclass(frozen=True)
class TrialAccounts:
    """The settings `run_trials_as`, `fallback_unix_user` and `trial_python`, and what they mean
    for one run."""

    run_trials_as: str = "master"
    fallback_unix_user: str = ""
    trial_python: str = ""

    def check(self) -> None:
        """ValueError naming the setting when these cannot work (checked at the master's start)."""
        if self.run_trials_as not in MODES:
            raise ValueError(
                f"run_trials_as: expected 'master' or 'owner', got {self.run_trials_as!r}"
            )
        if self.run_trials_as != "owner":
            return
        if os.geteuid() != 0:
            raise ValueError(
                f"run_trials_as='owner' needs a master that runs as root (this one runs as "
                f"{pwd.getpwuid(os.geteuid()).pw_name!r}): start it as root, or set "
                "run_trials_as='master' (MASTER_LITE_RUN_TRIALS_AS)"
            )
        if self.fallback_unix_user:
            try:
                pwd.getpwnam(self.fallback_unix_user)
            except KeyError:
                raise ValueError(
                    f"fallback_unix_user: no Unix user {self.fallback_unix_user!r} on this "
                    "machine (create it, or set MASTER_LITE_FALLBACK_UNIX_USER to one that exists)"
                ) from None

    def run_as(self, owner_id: int, user_row: Callable[[int], Any]) -> RunAs | None:
        """The account that runs a trial of an experiment owned by user `owner_id`
        (`user_row(id)`: its users row, with `username`); None: the master's own. OSError
        when it has none."""
        if self.run_trials_as != "owner" or owner_id == OWNER_ID:
            return None
        row = user_row(owner_id)
        if row is None:
            raise OSError(f"the experiment's owner (user {owner_id}) no longer exists")
        name = row.username
        try:
            pwd.getpwnam(name)
            return RunAs(user=name)
        except KeyError:
            pass
        if self.fallback_unix_user:
            return RunAs(user=self.fallback_unix_user)
        raise OSError(
            f"user {name!r} has no Unix account on this machine and no fallback_unix_user is "
            "set: create the account, or set MasterLite.fallback_unix_user "
            "(MASTER_LITE_FALLBACK_UNIX_USER) to the account such users' trials run as"
        )

    def python_for(self, run_as: RunAs | None) -> str | None:
        """The interpreter `python3` means in a run as `run_as` (None: the master's own);
        OSError naming it when that account cannot execute it."""
        if run_as is None or run_as.user is None:
            return None
        python = self.trial_python or sys.executable
        entry = pwd.getpwnam(run_as.user)
        gids = set(os.getgrouplist(run_as.user, entry.pw_gid))
        if not executable_by(python, entry.pw_uid, gids):
            raise OSError(
                f"Unix user {run_as.user!r} cannot execute the trial interpreter {python} "
                "(or a directory above it, or above what it links to, is closed to it): run "
                "`make install`, which makes .venv-trials, or set MasterLite.trial_python "
                "(MASTER_LITE_TRIAL_PYTHON) to an interpreter that user can run"
            )
        return python


def check_reachable(root_dir: Path) -> None:
    """ValueError when a directory above the root dir is closed to other users (a root
    master's default root dir is under /root, 0700): trials run as their owners could not
    reach their work dirs nor the checkpoint storage."""
    for parent in Path(root_dir).absolute().parents:
        try:
            mode = parent.stat().st_mode
        except FileNotFoundError:
            continue  # made by the master at start, with the umask's modes
        if not mode & stat.S_IXOTH:
            raise ValueError(
                f"run_trials_as='owner': {parent} (above the root dir {root_dir}) is closed to "
                f"other users (mode {stat.S_IMODE(mode):o}), so trials run as their owners "
                "could not reach their work dirs: choose a root dir under a directory others "
                f"may enter (--root-dir /srv/determined), or `chmod o+x {parent}`"
            )


def open_root(root_dir: Path) -> None:
    """Let trials of other accounts traverse to their work dirs and checkpoint storage: the
    root dir and trials/ become 0711, the default storage `checkpoints/` 1733 (run_trials_as
    "owner" only; the master's files at the top keep their 0600/0700)."""
    for path in (root_dir, root_dir / "trials"):
        os.chmod(path, TRAVERSE_MODE)
    os.chmod(root_dir / "checkpoints", STORAGE_MODE)
    _claim_shared_entries(root_dir / "checkpoints")


def _claim_shared_entries(base: Path) -> None:
    """Make the storage's shared directories (TensorBoard files, container views) the
    master's, 0711, before any trial could: in 1733 storage the first to create a name owns
    it, and a trial owning one could redirect other users' files through it."""
    for name in (TENSORBOARD_DIR, VIEWS_DIR):
        path = base / name
        try:
            path.mkdir()
        except FileExistsError:
            continue
        os.chmod(path, TRAVERSE_MODE)


def hand_over(work_dir: Path, run_as: RunAs) -> None:
    """Make the run's work dir (unpacked by the master) its account's, 0700; its trial dir
    0711 so that the account reaches it."""
    entry = pwd.getpwnam(run_as.user or "")
    uid, gid = entry.pw_uid, entry.pw_gid
    os.chmod(work_dir.parent, TRAVERSE_MODE)
    for top, dirs, files in os.walk(work_dir):
        for name in (*dirs, *files):
            os.chown(os.path.join(top, name), uid, gid, follow_symlinks=False)
    os.chown(work_dir, uid, gid)
    os.chmod(work_dir, PRIVATE_MODE)


def prepare_storage(
    config: dict, run_as: RunAs, experiment_id: int, trial_id: int, *, container: bool = False
) -> None:
    """Make a shared_fs checkpoint storage base usable by the run's account: a missing base is
    made 1733, and the trial's TensorBoard directory is made its own (0700) under directories
    of the master's (0711). An existing base is left as it is (an administrator's storage root:
    make it 1733 for shared use, docs/team.md). `container`: the run is a container's, whose
    storage view lies in `.det-trials` (OSError when that is not the master's)."""
    storage_config = config.get("checkpoint_storage") or {}
    if storage_config.get("type", "shared_fs") != "shared_fs":
        return
    try:
        base = storage.checkpoint_base(storage_config)
    except ValueError:
        return
    entry = pwd.getpwnam(run_as.user or "")
    if not base.exists():
        base.mkdir(parents=True)
        os.chmod(base, STORAGE_MODE)
    _claim_shared_entries(base)
    if container:
        views = os.lstat(base / VIEWS_DIR)
        if not stat.S_ISDIR(views.st_mode) or views.st_uid != os.geteuid():
            raise OSError(
                f"checkpoint storage {base / VIEWS_DIR} is not the master's (made by uid "
                f"{views.st_uid}, perhaps a trial): remove it, and the master makes it anew"
            )
    path = base
    for part in (TENSORBOARD_DIR, "experiment", str(experiment_id), "trial", str(trial_id)):
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            path.mkdir()
            os.chmod(path, TRAVERSE_MODE)
            continue
        # Never descend through what a trial made (a symlink could point anywhere): such a
        # tree is left as it is, and the trial copies its TensorBoard files as best it can.
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return
    os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    os.chmod(path, PRIVATE_MODE)


__all__ = [
    "MODES",
    "check_reachable",
    "TrialAccounts",
    "default_trial_python",
    "executable_by",
    "hand_over",
    "open_root",
    "prepare_storage",
]
