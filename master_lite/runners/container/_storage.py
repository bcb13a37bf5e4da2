"""What of the checkpoint storage a container trial sees (issue 26, row 2).

Mounting the whole `shared_fs` storage (as Determined does) let a container trial list and read
every experiment's checkpoints. Each trial now sees its own *view* instead:

* `<base>/.det-trials/<master>-trial-<id>` (its view directory, beside the checkpoints on the
  same filesystem) is mounted read-write where the harness puts checkpoints (`host_path` /
  `storage_path`, the path the trial computes from its config): its saves land there;
* the checkpoint it restores from (its `latest_checkpoint`: a resume, or a warm start from
  another trial or experiment) is mounted read-only at `<base>/<uuid>` inside the view, unless
  the view already holds it (its own checkpoint of an earlier run);
* its TensorBoard directory `<base>/tensorboard/experiment/<e>/trial/<t>` is mounted
  read-write at its own path, so the master's TensorBoards read what the trial wrote.

When the trial reports a checkpoint, the master hard-links `<view>/<uuid>` into `<base>/<uuid>`
(`link_into_storage`): the record names a real directory of the storage at once (downloads,
the model registry and other experiments' warm starts work while the trial still runs), and the
trial still sees the checkpoint it saved (it may restore or delete it); hard links cost no space
and no copying. What the view holds beyond the checkpoints of the storage (a save cut short, a
checkpoint deleted meanwhile, the empty mount points of restore sources) is removed when the run
ends and before the next one starts (`tidy_view`).

Why not the alternatives: one mount per own checkpoint cannot work (the harness makes new uuid
directories after the container started, and nothing can be mounted into a running container);
moving a staged checkpoint into the storage when the run ends leaves the record pointing at
nothing while the trial runs; and moving it at report time hides it from the trial that saved
it. Only hard links give both views the same files.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shutil
import stat
from pathlib import Path

from determined.common import storage
from master_lite.runners.container._config import Mount

log = logging.getLogger("master_lite.containers")

#: The directory (in a storage base) that holds the container trials' views; not uuid-named, so
#: no checkpoint GC or partial collection ever takes it for a checkpoint.
VIEWS_DIR = ".det-trials"
_UUID_LENGTH = 36
_METADATA = "metadata.json"


def shared_fs_base(config: dict) -> Path | None:
    """The `shared_fs` checkpoint base of `config` (None: no shared_fs storage)."""
    settings = config.get("checkpoint_storage") or {}
    if settings.get("type") != "shared_fs" or not settings.get("host_path"):
        return None
    return storage.checkpoint_base(settings)


def view_prefix(root_label: str) -> str:
    """The views of one master (by its root dir): two masters may share a storage root."""
    return hashlib.sha256(root_label.encode()).hexdigest()[:8] + "-trial-"


def trial_view_dir(base: Path, root_label: str, trial_id: int) -> Path:
    """The view directory of trial `trial_id` of the master at `root_label`, under `base`."""
    return base / VIEWS_DIR / f"{view_prefix(root_label)}{int(trial_id)}"


def _looks_like_uuid(name: str) -> bool:
    return len(name) == _UUID_LENGTH and name.count("-") == 4


def tidy_view(view: Path, base: Path) -> None:
    """Remove from `view` every uuid-named entry that is not a linked copy of a checkpoint in
    `base` (same metadata.json inode): saves cut short, checkpoints deleted from the storage
    (their links would keep the space), and mount points left by restore sources."""
    try:
        entries = list(os.scandir(view))
    except FileNotFoundError:
        return
    for entry in entries:
        if not _looks_like_uuid(entry.name):
            continue
        try:
            kept = (
                os.path.samefile(os.path.join(entry.path, _METADATA), base / entry.name / _METADATA)
                and not entry.is_symlink()
            )
        except OSError:
            kept = False
        if kept:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not remove %s from a trial's checkpoint view: %s", entry.path, exc)


def storage_mounts(
    config: dict,
    *,
    trial_id: int,
    experiment_id: int | None,
    restore_from: Path | None,
    root_label: str,
    owner: tuple[int, int | None] | None = None,
) -> list[Mount]:
    """The mounts that give a container trial its view of `shared_fs` storage (module doc);
    creates the view and TensorBoard directories, handed to `owner` (uid, gid) when the trial
    runs as another account. Empty without shared_fs storage."""
    base = shared_fs_base(config)
    if base is None:
        return []
    # Where the harness looks: host_path/storage_path as it joins them, `..` collapsed (the
    # runtime mounts at a clean path).
    target = os.path.normpath(base)
    view = trial_view_dir(base, root_label, trial_id)
    view.mkdir(parents=True, exist_ok=True, mode=0o700)
    tidy_view(view, base)
    if owner is not None:
        os.chown(view, owner[0], -1 if owner[1] is None else owner[1], follow_symlinks=False)
        os.chmod(view, 0o700)
    mounts = [Mount(str(view), target)]
    if experiment_id is not None:
        relative = Path("tensorboard", "experiment", str(experiment_id), "trial", str(trial_id))
        (base / relative).mkdir(parents=True, exist_ok=True)
        if owner is not None and not (base / relative).is_symlink():
            os.chown(base / relative, owner[0], -1 if owner[1] is None else owner[1])
        mounts.append(Mount(str(base / relative), os.path.join(target, relative)))
    if restore_from is not None and not (view / restore_from.name).exists():
        mounts.append(
            Mount(str(restore_from), os.path.join(target, restore_from.name), read_only=True)
        )
    return mounts


def _link_one(src_fd: int, name: str, dest: Path, mode: int) -> None:
    try:
        os.link(name, dest, src_dir_fd=src_fd, follow_symlinks=False)
        return
    except OSError:
        pass  # another filesystem, or a file the master may not link (protected_hardlinks)
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(name, dir_fd=src_fd), dest)
    elif stat.S_ISREG(mode):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=src_fd)
        with os.fdopen(fd, "rb") as source, open(dest, "xb") as copy:
            shutil.copyfileobj(source, copy)


def _same_owner_and_mode(src_fd: int, dest: Path) -> None:
    """A placed directory is its saver's, with its mode (a trial run as another account keeps
    its checkpoint 0700 and its own: other users' trials cannot read it in the storage)."""
    st = os.fstat(src_fd)
    try:
        os.chown(dest, st.st_uid, st.st_gid, follow_symlinks=False)
    except PermissionError:  # not root: a directory the master's own user made stays so
        pass
    os.chmod(dest, stat.S_IMODE(st.st_mode))


def _link_tree(src_fd: int, dest: Path) -> None:
    # Directory file descriptors all the way down, opened with O_NOFOLLOW: a trial that swaps
    # a directory for a symlink meanwhile cannot make the master link files from elsewhere.
    with os.scandir(src_fd) as entries:
        listed = [(entry.name, entry.stat(follow_symlinks=False).st_mode) for entry in entries]
    for name, mode in listed:
        if stat.S_ISDIR(mode):
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_fd)
            try:
                (dest / name).mkdir()
                _link_tree(sub, dest / name)
                _same_owner_and_mode(sub, dest / name)
            finally:
                os.close(sub)
        else:
            _link_one(src_fd, name, dest / name, mode)


def link_into_storage(view: Path, uuid: str, base: Path) -> bool:
    """Hard-link the checkpoint `<view>/<uuid>` a container trial saved into `<base>/<uuid>`
    (copying what cannot be linked). False when the view has no such directory or the storage
    already has `<uuid>` (a re-report, or a uuid that is not this trial's to place).

    Raises OSError when the files could not be placed (nothing is left half-placed)."""
    try:
        view_fd = os.open(view, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    try:
        try:
            src_fd = os.open(uuid, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=view_fd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symlink where the checkpoint should be
                return False
            raise
        try:
            target = base / uuid
            try:
                target.mkdir()
            except FileExistsError:
                return False
            try:
                _link_tree(src_fd, target)
                _same_owner_and_mode(src_fd, target)
            except BaseException:
                shutil.rmtree(target, ignore_errors=True)
                raise
        finally:
            os.close(src_fd)
    finally:
        os.close(view_fd)
    return True


__all__ = [
    "VIEWS_DIR",
    "link_into_storage",
    "shared_fs_base",
    "storage_mounts",
    "tidy_view",
    "trial_view_dir",
    "view_prefix",
]
