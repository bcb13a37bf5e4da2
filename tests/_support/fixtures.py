"""The pytest fixtures every test folder may use; tests/conftest.py loads this plugin."""

from __future__ import annotations

import pathlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests._support.containers import TEST_PREFIX, build_tiny_image, remove_images
from tests._support.jupyter import JupyterServer
from tests._support.master import MasterProcess


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test.

    The socket stays bound and never listens: connecting gets ECONNREFUSED at once, and no other
    process can take the port meanwhile. (A port bound and closed before use may be taken by
    another process whose listener never answers: the connect then waits for its timeout.)
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def connect_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses (seconds) API sessions take between connection attempts, recorded, not slept.

    How long a user waits on an unreachable master is the sum of these pauses plus one refused
    connect per attempt (immediate on loopback), so a test asserts on the pauses themselves
    rather than on wall-clock time, which a loaded machine stretches.
    """
    import types

    from determined.common.api import _session

    pauses: list[float] = []
    monkeypatch.setattr(_session, "time", types.SimpleNamespace(sleep=pauses.append))
    return pauses


@pytest.fixture
def start_master(tmp_path: pathlib.Path) -> Iterator[Callable[..., MasterProcess]]:
    """A factory: `start_master(root_dir=None, **MasterProcess options)` -> a running master.

    Every master it started is stopped (and its leftover trials killed) after the test.
    """
    started: list[MasterProcess] = []

    def start(root_dir: pathlib.Path | None = None, **options: Any) -> MasterProcess:
        master = MasterProcess(root_dir or tmp_path / f"master-{len(started)}", **options)
        started.append(master)
        return master

    yield start
    for master in started:
        master.__exit__(None, None, None)


@pytest.fixture(scope="module")
def start_jupyter(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., JupyterServer]]:
    """A factory: `start_jupyter(app="jupyterlab", root_dir=None, **options)` -> a running
    `JupyterServer`; every server it started is stopped at the end of the module."""
    started: list[JupyterServer] = []

    def start(
        app: str = "jupyterlab", root_dir: pathlib.Path | None = None, **options: Any
    ) -> JupyterServer:
        server = JupyterServer.start(
            tmp_path_factory.mktemp(app), app=app, root_dir=root_dir, **options
        )
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(90)


@pytest.fixture(scope="module")
def lab_server(start_jupyter: Callable[..., JupyterServer]) -> JupyterServer:
    """A JupyterLab with jupyter_determined, shared by a module's tests."""
    return start_jupyter()


@pytest.fixture(scope="session")
def container_images() -> Iterator[dict[str, str]]:
    """Two tiny images (built once per session, removed after it): "a" has /image-a.txt and
    "b" has /image-b.txt; trials in them need `bind_mounts: [HOST_USR]` for python3."""
    images = {
        key: build_tiny_image(f"{TEST_PREFIX}-{key}", {f"/image-{key}.txt": f"image {key}\n"})
        for key in ("a", "b")
    }
    yield images
    remove_images(images.values())


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An S3-compatible server (moto's server mode) on a free loopback port, shared by a
    module's tests: `tests._support.s3_server.S3Server` (endpoint_url, create_bucket,
    storage_config, keys, checkpoint_uuids). Skipped where moto is not installed."""
    pytest.importorskip("moto.server", reason="moto[server] is in the test extra")
    pytest.importorskip("boto3", reason="boto3 is in the s3 extra")
    from tests._support.s3_server import start_s3_server

    with start_s3_server(log_dir=str(tmp_path_factory.mktemp("moto"))) as server:
        yield server


@pytest.fixture(scope="module")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Google Cloud Storage emulator (gcp-storage-emulator, in memory) on a free loopback
    port, shared by a module's tests: `tests._support.gcs_server.GCSServer` (url, env,
    create_bucket, storage_config, keys, checkpoint_uuids). Skipped where it is not installed."""
    pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is in the test extra")
    pytest.importorskip("google.cloud.storage", reason="google-cloud-storage is a dependency")
    from tests._support.gcs_server import start_gcs_server

    with start_gcs_server(log_dir=str(tmp_path_factory.mktemp("gcs"))) as server:
        yield server
