"""A Google Cloud Storage emulator for tests: gcp-storage-emulator in a process of its own.

    with start_gcs_server() as server:                # 127.0.0.1, a free port, in memory
        server.create_bucket("ckpts")
        server.env                                     # {"STORAGE_EMULATOR_HOST": ...}
        server.storage_config("ckpts", prefix="exp")   # checkpoint_storage for gcs
        server.keys("ckpts")                           # every object name in the bucket

google-cloud-storage talks to it (anonymous credentials) wherever STORAGE_EMULATOR_HOST holds
`server.url`; `server.client()` is such a client whatever the environment. The server is killed
(its process group) when the block ends. `gcs_server` (tests/_support/fixtures.py) is a
module-scoped fixture of it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import requests

from tests._support.process import ServerProcess, free_port


class GCSServer(ServerProcess):
    """A running emulator: its address, its log file and helpers to look inside it."""

    name = "gcs emulator"

    def __init__(self, host: str, port: int, log_path: str) -> None:
        super().__init__(pathlib.Path(log_path))
        self.host = host
        self.port = port
        self.cwd = self.log_path.parent  # in memory; anything it writes anyway lands by its log

    def command(self) -> list[str]:
        code = "from gcp_storage_emulator.__main__ import main; main()"
        address = ["--host", self.host, "--port", str(self.port)]
        return [sys.executable, "-c", code, "start", *address, "--in-memory", "--quiet"]

    def ready(self) -> bool:
        try:
            requests.get(f"{self.url}/storage/v1/b", timeout=2)
            return True
        except requests.RequestException:
            return False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The variables that point google-cloud-storage at this emulator."""
        return {"STORAGE_EMULATOR_HOST": self.url}

    def client(self) -> Any:
        """A google-cloud-storage client of this emulator."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project="test",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.url},
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(name)

    def storage_config(self, bucket: str, prefix: str | None = None, **extra: Any) -> dict:
        """A `checkpoint_storage` section for this emulator's bucket."""
        config: dict[str, Any] = {"type": "gcs", "bucket": bucket}
        if prefix is not None:
            config["prefix"] = prefix
        config.update(extra)
        return config

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object name of the bucket under `prefix`, sorted."""
        return sorted(blob.name for blob in self.client().list_blobs(bucket, prefix=prefix))

    def checkpoint_uuids(self, bucket: str, prefix: str = "") -> set[str]:
        """The checkpoint uuids that have objects under `prefix` (`<prefix>/<uuid>/...`)."""
        start = f"{prefix.strip('/')}/" if prefix else ""
        return {key[len(start) :].split("/", 1)[0] for key in self.keys(bucket, start)}


@contextlib.contextmanager
def start_gcs_server(
    host: str = "127.0.0.1", port: int | None = None, *, log_dir: str | None = None
) -> Iterator[GCSServer]:
    """Start the emulator (in memory) on host:port (a free port by default); yield it once it
    answers (RuntimeError with its log when it does not within 60 s); kill it at the end."""
    port = port or free_port(host)
    log_dir = log_dir or os.environ.get("TMPDIR", "/tmp")
    server = GCSServer(host, port, os.path.join(log_dir, f"gcs-emulator-{host}-{port}.log"))
    server.launch(timeout=60)
    try:
        yield server
    finally:
        server.kill_group()


__all__ = ["GCSServer", "start_gcs_server"]
