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
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import requests

# moto accepts any keys (it does not check signatures' owners); these are the ones the tests use.
ACCESS_KEY = "test-access-key-id"
SECRET_KEY = "test-secret-key-not-a-real-one"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class S3Server:
    """A running server: its address, its log file and helpers to look inside it."""

    host: str
    port: int
    process: subprocess.Popen
    log_path: str
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY

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

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


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
    port = port or _free_port(host)
    log_path = os.path.join(log_dir or os.environ.get("TMPDIR", "/tmp"), f"moto-{host}-{port}.log")
    with open(log_path, "wb") as log:
        env = dict(os.environ)
        if refuse_all_keys:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stop() kills the server and its children
        )
    server = S3Server(host=host, port=port, process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"moto server exited {process.returncode}: {_tail(log_path)}")
            try:
                requests.get(f"{server.endpoint_url}/moto-api/", timeout=2)
                break
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"moto server on {server.endpoint_url} did not answer within 60 s: "
                        f"{_tail(log_path)}"
                    ) from None
                time.sleep(0.1)  # polling for the server to answer, not a stand-in for sync
        yield server
    finally:
        server.stop()


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-2000:]
    except OSError:
        return "(no log)"


__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server", "start_s3_server"]
