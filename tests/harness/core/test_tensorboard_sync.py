"""TensorBoard files of a trial reach checkpoint storage (Determined's AUTO mode): after reports,
off the training thread, and at close for whatever was written after the last report."""

from __future__ import annotations

import shutil
import time

import pytest

from determined.core._tensorboard import TensorboardManager, TensorboardMode

TRIAL_ID = 12


@pytest.fixture
def manager(tmp_path):
    tb = TensorboardManager(TensorboardMode.AUTO, tmp_path / "storage", 7, TRIAL_ID)
    tb.path.mkdir(parents=True)  # what the trial's TensorBoard writer does
    yield tb
    tb.close()
    shutil.rmtree(tb.path, ignore_errors=True)


def stored(tmp_path, tb, name):
    return (
        tmp_path / "storage" / "tensorboard" / "experiment" / "7" / "trial" / str(TRIAL_ID) / name
    )


def test_files_written_before_and_after_the_last_report_are_stored(tmp_path, manager):
    (manager.path / "events.out.tfevents.1").write_bytes(b"first")
    manager.on_metrics("training", 10, {"loss": 1.0})
    (manager.path / "events.out.tfevents.1").write_bytes(b"first and more")
    (manager.path / "later" / "events.out.tfevents.2").parent.mkdir()
    (manager.path / "later" / "events.out.tfevents.2").write_bytes(b"after the last report")
    manager.close()
    assert stored(tmp_path, manager, "events.out.tfevents.1").read_bytes() == b"first and more"
    assert (
        stored(tmp_path, manager, "later/events.out.tfevents.2").read_bytes()
        == b"after the last report"
    )


def test_each_run_writes_into_a_directory_of_its_own_removed_once_stored(tmp_path, manager):
    # Another master's trial 12 (or an earlier run's) must not hand its files to this one.
    other = TensorboardManager(TensorboardMode.AUTO, tmp_path / "other-storage", 3, TRIAL_ID)
    try:
        assert other.path != manager.path
        assert not other.path.exists()
    finally:
        other.close()
    (manager.path / "events.out.tfevents.1").write_bytes(b"data")
    manager.close()
    assert stored(tmp_path, manager, "events.out.tfevents.1").read_bytes() == b"data"
    assert not manager.path.exists()


def test_upload_is_refused_in_auto_mode(manager):
    with pytest.raises(RuntimeError, match="MANUAL"):
        manager.upload(lambda _: True, lambda path, _: path)


def test_manual_mode_copies_only_on_request(tmp_path):
    tb = TensorboardManager(TensorboardMode.MANUAL, tmp_path / "storage", 7, TRIAL_ID)
    tb.path.mkdir(parents=True)
    try:
        (tb.path / "a.tfevents").write_bytes(b"x")
        tb.on_metrics("training", 1, {"loss": 1.0})
        tb.close()
        assert not stored(tmp_path, tb, "a.tfevents").exists()
        tb.upload(lambda path: path.name.startswith("a"), lambda path, rank: path)
        assert stored(tmp_path, tb, "a.tfevents").read_bytes() == b"x"
    finally:
        shutil.rmtree(tb.path, ignore_errors=True)


def test_a_burst_of_reports_is_one_background_copy_not_one_each(tmp_path, manager, monkeypatch):
    # A tight loop reporting every few milliseconds must not wake a copy (and take the GIL from
    # training) per report: one copy, then a pause; close() copies what changed since.
    copies = []
    copy_all = manager._copy_all
    monkeypatch.setattr(manager, "_copy_all", lambda: (copies.append(1), copy_all()))
    (manager.path / "events.out.tfevents.1").write_bytes(b"0")
    for step in range(200):
        manager.on_metrics("training", step, {"loss": 1.0})
        time.sleep(0.001)  # the training steps between two reports (not synchronization)
    (manager.path / "events.out.tfevents.1").write_bytes(b"after 200 reports")
    manager.close()
    assert len(copies) <= 3, f"{len(copies)} copies for 200 reports"
    assert stored(tmp_path, manager, "events.out.tfevents.1").read_bytes() == b"after 200 reports"
