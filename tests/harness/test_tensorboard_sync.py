"""TensorBoard files of a trial reach checkpoint storage (Determined's AUTO mode): after reports,
off the training thread, and at close for whatever was written after the last report."""

from __future__ import annotations

import os
import shutil

import pytest

from determined.core._tensorboard import TensorboardManager, TensorboardMode


@pytest.fixture
def manager(tmp_path):
    # The TensorBoard directory is per trial under the system temp dir: a trial id of this test's.
    trial_id = 900_000 + os.getpid() % 100_000
    tb = TensorboardManager(TensorboardMode.AUTO, tmp_path / "storage", 7, trial_id)
    shutil.rmtree(tb.path, ignore_errors=True)
    tb.path.mkdir(parents=True)
    yield tb
    tb.close()
    shutil.rmtree(tb.path, ignore_errors=True)


def stored(tmp_path, tb, name):
    return (
        tmp_path
        / "storage"
        / "tensorboard"
        / "experiment"
        / "7"
        / "trial"
        / tb.path.name[len("trial-") :]
        / name
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


def test_upload_is_refused_in_auto_mode(manager):
    with pytest.raises(RuntimeError, match="MANUAL"):
        manager.upload(lambda _: True, lambda path, _: path)


def test_manual_mode_copies_only_on_request(tmp_path):
    tb = TensorboardManager(TensorboardMode.MANUAL, tmp_path / "storage", 7, 899_999)
    shutil.rmtree(tb.path, ignore_errors=True)
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
