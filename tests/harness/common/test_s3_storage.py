"""`checkpoint_storage: {type: s3}` in the harness, against a real S3-compatible server (moto's
server mode): the storage manager, the Core API's checkpoint context off the master, credentials
from the trial's variable, and clear errors naming the bucket and never the keys."""

from __future__ import annotations

import json
import logging
import pathlib
import uuid

import pytest

from determined import core
from determined.common import storage
from determined.errors import CheckpointNotFound

pytestmark = pytest.mark.slow


@pytest.fixture
def bucket(s3_server) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
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


def test_manager_round_trip(s3_server, bucket, tmp_path):
    manager = storage.StorageManager.from_config(s3_server.storage_config(bucket, prefix="/a/b/"))
    assert isinstance(manager, storage.S3StorageManager) and not manager.is_local
    src = tmp_path / "src"
    _write_files(src)
    manager.upload(src, "ck1")
    assert s3_server.keys(bucket) == [
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
    assert manager.delete("ck1")["model.bin"] == 10000
    assert s3_server.keys(bucket) == []
    with pytest.raises(CheckpointNotFound, match="ck1"):
        manager.download("ck1", tmp_path / "again")


def test_store_path_uploads_on_success_only(s3_server, bucket):
    manager = storage.S3StorageManager.from_config(s3_server.storage_config(bucket))
    with manager.store_path("good") as path:
        (path / "w.txt").write_text("x")
    assert s3_server.keys(bucket) == ["good/w.txt"]
    assert not path.exists()
    with pytest.raises(RuntimeError, match="boom"), manager.store_path("bad") as path:
        (path / "w.txt").write_text("x")
        raise RuntimeError("boom")
    assert s3_server.keys(bucket) == ["good/w.txt"]  # a failed block uploads nothing


def test_core_context_off_master(s3_server, bucket, tmp_path):
    """The Core API's checkpoint calls with an s3 config: store_path/upload/download/
    restore_path/delete all go through the bucket."""
    config = s3_server.storage_config(bucket, prefix="runs")
    with core.init(checkpoint_storage=config) as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 5}) as (path, first):
            (path / "weights.pt").write_bytes(b"w" * 100)
        src = tmp_path / "up"
        _write_files(src)
        second = ctx.checkpoint.upload(src, {"steps_completed": 9})
        assert s3_server.checkpoint_uuids(bucket, "runs") == {first, second}
        with ctx.checkpoint.restore_path(first) as restored:
            assert (restored / "weights.pt").read_bytes() == b"w" * 100
            assert json.loads((restored / "metadata.json").read_text()) == {"steps_completed": 5}
        ctx.checkpoint.download(second, tmp_path / "down", selector=lambda p: p == "model.bin")
        assert _tree(tmp_path / "down") == {"model.bin": b"\x00\x01" * 5000}
        ctx.checkpoint.delete(first)
        assert s3_server.checkpoint_uuids(bucket, "runs") == {second}
    with core.init(checkpoint_storage=f"s3://{bucket}/runs") as ctx:
        # The URL form uses boto3's own credentials and endpoint: none here, so a clear error.
        assert isinstance(ctx.checkpoint._storage_manager, storage.S3StorageManager)


def test_redacted_keys_come_from_the_trial_variable(s3_server, bucket, monkeypatch):
    config = s3_server.storage_config(bucket, access_key="********", secret_key="********")
    monkeypatch.delenv(storage.CREDENTIALS_ENV, raising=False)
    with pytest.raises(ValueError, match=storage.CREDENTIALS_ENV):
        storage.StorageManager.from_config(config)
    monkeypatch.setenv(
        storage.CREDENTIALS_ENV,
        json.dumps({"access_key": s3_server.access_key, "secret_key": s3_server.secret_key}),
    )
    manager = storage.StorageManager.from_config(config)
    manager.check()  # signs with the real keys


def test_missing_bucket_is_named_and_keys_never_shown(s3_server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="determined")
    manager = storage.StorageManager.from_config(s3_server.storage_config("no-such-bucket"))
    src = tmp_path / "src"
    _write_files(src)
    messages = []
    for paths in (None, ["model.bin"]):  # a directory object first / files only (transfers)
        with pytest.raises(storage.StorageError) as info:
            manager.upload(src, "ck", paths)
        messages.append(str(info.value))
    with pytest.raises(storage.StorageError) as info:
        manager.download("ck", tmp_path / "dst")
    messages.append(str(info.value))
    for message in messages:
        assert "no-such-bucket" in message and "NoSuchBucket" in message, message
        assert "checkpoint_storage.bucket" in message
        for secret in (s3_server.secret_key, s3_server.access_key):
            assert secret not in message
            assert secret not in caplog.text


def test_refused_keys_are_named_and_never_shown(tmp_path, caplog):
    from tests._support.s3_server import start_s3_server

    caplog.set_level(logging.DEBUG, logger="determined")
    with start_s3_server(log_dir=str(tmp_path), refuse_all_keys=True) as server:
        manager = storage.StorageManager.from_config(server.storage_config("ckpts"))
        src = tmp_path / "src"
        _write_files(src)
        with pytest.raises(storage.StorageError) as info:
            manager.upload(src, "ck", ["model.bin"])
    message = str(info.value)
    assert "bucket 'ckpts'" in message and "InvalidAccessKeyId" in message, message
    assert "check checkpoint_storage.access_key" in message
    for secret in (server.secret_key, server.access_key):
        assert secret not in message
        assert secret not in caplog.text


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"bucket": None}, "checkpoint_storage.bucket: required"),
        ({"prefix": "a/../b"}, "checkpoint_storage.prefix"),
        ({"secret_key": None}, "checkpoint_storage.secret_key: required when access_key"),
    ],
)
def test_config_problems_name_the_key(change, named):
    config = {"type": "s3", "bucket": "b", "access_key": "k", "secret_key": "s", **change}
    assert any(named in problem for problem in storage.s3_config_problems(config))
