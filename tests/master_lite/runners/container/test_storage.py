"""A container trial's view of checkpoint storage, without a runtime: the mounts it gets, how a
reported checkpoint reaches the storage (hard links, never through a trial's symlink), and what
is tidied when a run ends."""

from __future__ import annotations

import os
import uuid as uuid_module
from pathlib import Path

from master_lite.runners.container._storage import (
    link_into_storage,
    storage_mounts,
    tidy_view,
    trial_view_dir,
)

LABEL = "/root-dir-of-a-master"


def _config(base: Path) -> dict:
    return {"checkpoint_storage": {"type": "shared_fs", "host_path": str(base)}}


def _saved(view: Path) -> Path:
    saved = view / str(uuid_module.uuid4())
    (saved / "sub").mkdir(parents=True)
    (saved / "metadata.json").write_text("{}")
    (saved / "sub" / "model.pt").write_bytes(b"weights")
    return saved


def test_the_view_not_the_storage_is_mounted_with_only_the_restore_source(tmp_path) -> None:
    base = tmp_path / "ckpts"
    other = base / str(uuid_module.uuid4())
    other.mkdir(parents=True)
    mounts = storage_mounts(
        _config(base), trial_id=7, experiment_id=3, restore_from=other, root_label=LABEL
    )
    view = trial_view_dir(base, LABEL, 7)
    assert [m.argument() for m in mounts] == [
        f"{view}:{base}",
        f"{base}/tensorboard/experiment/3/trial/7:{base}/tensorboard/experiment/3/trial/7",
        f"{other}:{base}/{other.name}:ro",
    ]
    assert view.is_dir() and view.parent.name == ".det-trials"
    # Another master's trial 7 on the same storage gets another view.
    assert trial_view_dir(base, "/another-root", 7) != view
    # No shared_fs storage: nothing to mount.
    assert (
        storage_mounts({}, trial_id=7, experiment_id=3, restore_from=None, root_label=LABEL) == []
    )


def test_a_reported_checkpoint_is_hard_linked_into_the_storage(tmp_path) -> None:
    base = tmp_path / "ckpts"
    view = trial_view_dir(base, LABEL, 1)
    view.mkdir(parents=True)
    saved = _saved(view)
    assert link_into_storage(view, saved.name, base) is True
    placed = base / saved.name
    assert (placed / "sub" / "model.pt").read_bytes() == b"weights"
    assert os.path.samefile(placed / "sub" / "model.pt", saved / "sub" / "model.pt")
    # A second report changes nothing; a uuid the view does not have places nothing.
    assert link_into_storage(view, saved.name, base) is False
    assert link_into_storage(view, str(uuid_module.uuid4()), base) is False
    # The run's end keeps the linked copy in the view (the next run sees it).
    tidy_view(view, base)
    assert saved.is_dir()


def test_symlinks_a_trial_plants_are_never_followed(tmp_path) -> None:
    base = tmp_path / "ckpts"
    view = trial_view_dir(base, LABEL, 1)
    view.mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "token").write_text("s3cret")
    # The checkpoint itself a symlink to a directory of the master's: not placed.
    planted = view / str(uuid_module.uuid4())
    planted.symlink_to(secret, target_is_directory=True)
    assert link_into_storage(view, planted.name, base) is False
    assert not (base / planted.name).exists()
    # A symlink inside a checkpoint is placed as a symlink, its target not copied.
    saved = _saved(view)
    (saved / "sub" / "link").symlink_to(secret)
    assert link_into_storage(view, saved.name, base) is True
    placed = base / saved.name / "sub" / "link"
    assert placed.is_symlink() and not any(
        p.name == "token" for p in (base / saved.name).rglob("*") if not p.is_symlink()
    )


def test_a_runs_end_removes_what_is_not_a_checkpoint_of_the_storage(tmp_path) -> None:
    base = tmp_path / "ckpts"
    view = trial_view_dir(base, LABEL, 1)
    view.mkdir(parents=True)
    kept = _saved(view)
    link_into_storage(view, kept.name, base)
    _saved(view)  # a save never reported
    gone = _saved(view)
    link_into_storage(view, gone.name, base)
    (base / gone.name / "metadata.json").unlink()  # deleted from the storage (GC, a user)
    mount_point = view / str(uuid_module.uuid4())  # where a restore source was mounted
    mount_point.mkdir()
    (view / "tensorboard").mkdir()
    tidy_view(view, base)
    assert sorted(p.name for p in view.iterdir()) == sorted([kept.name, "tensorboard"])
