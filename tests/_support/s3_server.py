"""An S3-compatible server for tests and benchmarks: moto's server mode in a process of its own.

    with start_s3_server() as server:               # 127.0.0.1, a free port
        server.create_bucket("ckpts")
        config = server.storage_config("ckpts", prefix="exp")   # checkpoint_storage for s3
        server.keys("ckpts")                         # every object key in the bucket

`start_s3_server(host=...)` binds any address (a private one for a multi-node suite whose
nodes live in other network namespaces); `endpoint_url` is what clients use. The server keeps
everything in memory and is killed (its process group) when the block ends. `s3_server` (in
tests/_support/fixtures.py) is a module-scoped fixture of it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import requests

from tests._support.process import ServerProcess, child_env, free_port

# moto accepts any keys (it does not check signatures' owners); these are the ones the tests use.
ACCESS_KEY = "test-access-key-id"
SECRET_KEY = "test-secret-key-not-a-real-one"


class S3Server(ServerProcess):
    """A running server: its address, its log file and helpers to look inside it."""

    name = "moto server"

    def __init__(self, host: str, port: int, log_path: str, refuse_all_keys: bool = False) -> None:
        super().__init__(pathlib.Path(log_path))
        self.host = host
        self.port = port
        self.refuse_all_keys = refuse_all_keys
        self.access_key = ACCESS_KEY
        self.secret_key = SECRET_KEY

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]

    def environment(self) -> dict[str, str]:
        return child_env({"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if self.refuse_all_keys else {})

    def ready(self) -> bool:
        try:
            requests.get(f"{self.endpoint_url}/moto-api/", timeout=2)
            return True
        except requests.RequestException:
            return False

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self) -> Any:
        """A boto3 S3 client of this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def storage_config(self, bucket: str, prefix: str | None = None, **extra: Any) -> dict:
        """A `checkpoint_storage` section for this server (with its keys)."""
        config = {
            "type": "s3",
            "bucket": bucket,
            "endpoint_url": self.endpoint_url,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
        }
        if prefix is not None:
            config["prefix"] = prefix
        config.update(extra)
        return config

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key of the bucket under `prefix`, sorted."""
        found: list[str] = []
        paginator = self.client().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found.extend(item["Key"] for item in page.get("Contents") or ())
        return sorted(found)

    def checkpoint_uuids(self, bucket: str, prefix: str = "") -> set[str]:
        """The checkpoint uuids that have objects under `prefix` (`<prefix>/<uuid>/...`)."""
        start = f"{prefix.strip('/')}/" if prefix else ""
        return {key[len(start) :].split("/", 1)[0] for key in self.keys(bucket, start)}


@contextlib.contextmanager
def start_s3_server(
    host: str = "127.0.0.1",
    port: int | None = None,
    *,
    log_dir: str | None = None,
    refuse_all_keys: bool = False,
) -> Iterator[S3Server]:
    """Start moto's S3 server on host:port (a free port by default); yield it once it answers
    (RuntimeError with its log when it does not within 60 s); kill it at the end.

    `refuse_all_keys`: the server checks credentials (moto's IAM enforcement from the first
    request) and knows none, so every request is refused (InvalidAccessKeyId, 403): for tests
    of bad credentials."""
    port = port or free_port(host)
    log_dir = log_dir or os.environ.get("TMPDIR", "/tmp")
    server = S3Server(host, port, os.path.join(log_dir, f"moto-{host}-{port}.log"), refuse_all_keys)
    server.launch(timeout=60)
    try:
        yield server
    finally:
        server.kill_group()


__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server", "start_s3_server"]
