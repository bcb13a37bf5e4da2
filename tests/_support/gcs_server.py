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


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class GCSServer:
    """A running emulator: its address, its log file and helpers to look inside it."""

    host: str
    port: int
    process: subprocess.Popen
    log_path: str

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

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


@contextlib.contextmanager
def start_gcs_server(
    host: str = "127.0.0.1", port: int | None = None, *, log_dir: str | None = None
) -> Iterator[GCSServer]:
    """Start the emulator (in memory) on host:port (a free port by default); yield it once it
    answers (RuntimeError with its log when it does not within 60 s); kill it at the end."""
    port = port or _free_port(host)
    log_dir = log_dir or os.environ.get("TMPDIR", "/tmp")
    log_path = os.path.join(log_dir, f"gcs-emulator-{host}-{port}.log")
    code = "from gcp_storage_emulator.__main__ import main; main()"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", code, "start", "--host", host, "--port", str(port)]
            + ["--in-memory", "--quiet"],
            cwd=log_dir,  # in memory; anything it writes anyway lands next to its log
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: stop() kills the server and its children
        )
    server = GCSServer(host=host, port=port, process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gcs emulator exited {process.returncode}: {_tail(log_path)}")
            try:
                requests.get(f"{server.url}/storage/v1/b", timeout=2)
                break
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"gcs emulator on {server.url} did not answer within 60 s: "
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


__all__ = ["GCSServer", "start_gcs_server"]
