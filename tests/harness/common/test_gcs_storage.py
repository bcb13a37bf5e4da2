"""`checkpoint_storage: {type: gcs}` in the harness, against a Google Cloud Storage emulator
(gcp-storage-emulator, reached through STORAGE_EMULATOR_HOST as google-cloud-storage does): the
storage manager, the Core API's checkpoint context off the master, and clear errors naming the
bucket (a missing bucket, no credentials at all)."""

from __future__ import annotations

import json
import pathlib
import uuid

import pytest

from determined import core
from determined.common import storage
from determined.errors import CheckpointNotFound

pytestmark = pytest.mark.slow


@pytest.fixture
def emulated(gcs_server, monkeypatch):
    """The emulator, with STORAGE_EMULATOR_HOST pointing at it for this test."""
    for key, value in gcs_server.env.items():
        monkeypatch.setenv(key, value)
    return gcs_server


@pytest.fixture
def bucket(emulated) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    emulated.create_bucket(name)
    return name


def _tree(root: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _write_files(root: pathlib.Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "model.bin").write_bytes(b"\x00\x01" * 5000)
    (root / "sub" / "state.json").write_text('{"step": 3}')


def test_manager_round_trip(emulated, bucket, tmp_path):
    manager = storage.StorageManager.from_config(emulated.storage_config(bucket, prefix="/a/b/"))
    assert isinstance(manager, storage.GCSStorageManager) and not manager.is_local
    src = tmp_path / "src"
    _write_files(src)
    manager.upload(src, "ck1")
    assert emulated.keys(bucket) == [
        "a/b/ck1/empty/",
        "a/b/ck1/model.bin",
        "a/b/ck1/sub/",
        "a/b/ck1/sub/state.json",
    ]
    assert manager.resources("ck1") == {
        "empty/": 0,
        "model.bin": 10000,
        "sub/": 0,
        "sub/state.json": 11,
    }
    manager.download("ck1", tmp_path / "dst")
    assert _tree(tmp_path / "dst") == _tree(src)
    assert (tmp_path / "dst" / "empty").is_dir()
    with manager.restore_path("ck1", selector=lambda p: p.startswith("sub")) as path:
        assert _tree(path) == {"sub/state.json": b'{"step": 3}'}
        scratch = path
    assert not scratch.exists()  # the scratch copy is removed after the block
    with manager.store_path("ck2") as path:
        (path / "w.txt").write_text("x")
    with pytest.raises(RuntimeError, match="boom"), manager.store_path("bad") as path:
        (path / "w.txt").write_text("x")
        raise RuntimeError("boom")
    assert manager.delete("ck1")["model.bin"] == 10000
    assert emulated.keys(bucket) == ["a/b/ck2/w.txt"]  # ck1 gone; the failed block uploaded nothing
    with pytest.raises(CheckpointNotFound, match="ck1"):
        manager.download("ck1", tmp_path / "again")


def test_core_context_off_master(emulated, bucket, tmp_path):
    """The Core API's checkpoint calls with a gcs config (and the gs:// URL form) go through
    the bucket."""
    with core.init(checkpoint_storage=emulated.storage_config(bucket, prefix="runs")) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 5}) as (path, first):
            (path / "weights.pt").write_bytes(b"w" * 100)
        src = tmp_path / "up"
        _write_files(src)
        second = ctx.checkpoint.upload(src, {"steps_completed": 9})
        assert emulated.checkpoint_uuids(bucket, "runs") == {first, second}
        ctx.checkpoint.download(second, tmp_path / "down", selector=lambda p: p == "model.bin")
        assert _tree(tmp_path / "down") == {"model.bin": b"\x00\x01" * 5000}
    with core.init(checkpoint_storage=f"gs://{bucket}/runs") as ctx:
        assert isinstance(ctx.checkpoint._storage_manager, storage.GCSStorageManager)
        with ctx.checkpoint.restore_path(first) as restored:
            assert (restored / "weights.pt").read_bytes() == b"w" * 100
            assert json.loads((restored / "metadata.json").read_text()) == {"steps_completed": 5}
        ctx.checkpoint.delete(first)
    assert emulated.checkpoint_uuids(bucket, "runs") == {second}


def test_missing_bucket_is_named_with_what_to_do(emulated, tmp_path):
    manager = storage.StorageManager.from_config(emulated.storage_config("no-such-bucket"))
    src = tmp_path / "src"
    _write_files(src)
    with pytest.raises(storage.StorageError) as upload:
        manager.upload(src, "ck")
    with pytest.raises(storage.StorageError) as download:
        manager.download("ck", tmp_path / "dst")
    for message in (str(upload.value), str(download.value)):
        assert "bucket 'no-such-bucket'" in message and "NotFound" in message, message
        assert "create the bucket or fix checkpoint_storage.bucket" in message


def test_no_credentials_is_named_with_what_to_do(tmp_path, monkeypatch):
    """No emulator and no Application Default Credentials anywhere: the error names the bucket
    and GOOGLE_APPLICATION_CREDENTIALS, before any network call."""
    pytest.importorskip("google.cloud.storage")
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    manager = storage.StorageManager.from_config({"type": "gcs", "bucket": "ckpts"})
    with pytest.raises(storage.StorageError) as info:
        manager.resources("ck")
    message = str(info.value)
    assert "bucket 'ckpts'" in message and "GOOGLE_APPLICATION_CREDENTIALS" in message, message


def test_credentials_without_a_project_still_reach_the_bucket(tmp_path, monkeypatch):
    """A user's `gcloud auth application-default login` credentials carry no project, which
    google-cloud-storage's Client() refuses; a named bucket's objects need none."""
    pytest.importorskip("google.cloud.storage")
    adc = tmp_path / "adc.json"
    adc.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "c",
                "client_secret": "s",
                "refresh_token": "r",
            }
        )
    )
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    manager = storage.StorageManager.from_config({"type": "gcs", "bucket": "ckpts"})
    assert manager._bucket().name == "ckpts"  # made without a network call


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"bucket": None}, "checkpoint_storage.bucket: required for type gcs"),
        ({"prefix": "a/../b"}, "checkpoint_storage.prefix"),
    ],
)
def test_config_problems_name_the_key(change, named):
    config = {"type": "gcs", "bucket": "b", **change}
    assert any(named in problem for problem in storage.gcs_config_problems(config))
    assert storage.gcs_config_problems({"type": "gcs", "bucket": "b", "prefix": "p"}) == []
