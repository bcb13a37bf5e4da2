"""The master hosted in pytest-jupyter's in-process jupyter_server (`jp_serverapp`, `jp_fetch`):
the server config that enables jupyter_determined, starting the hosted master, and its REST API
through Jupyter.

Usage in a test module::

    pytest_plugins = ["pytest_jupyter.jupyter_server"]

    @pytest.fixture
    def jp_server_config(tmp_path, monkeypatch):
        return hosted_server_config(tmp_path, monkeypatch, cpu_slots=2)

    @pytest.fixture
    def hosted(jp_serverapp, jp_asyncio_loop):
        return start_hosted(jp_serverapp, jp_asyncio_loop)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._support.process import REPO

# A trial that reports loss 1.0 and 0.5 (training, steps 1 and 2) and 0.25 (validation, step 2).
TWO_STEP_TRIAL_SCRIPT = """\
import determined as det

with det.core.init() as core_context:
    for step in (1, 2):
        core_context.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
    core_context.train.report_validation_metrics(steps_completed=2, metrics={"loss": 0.25})
"""


def hosted_server_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    cpu_slots: int,
    server: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `jp_server_config` with jupyter_determined enabled and its master under `tmp_path`.

    The extension exports DET_MASTER and DET_MASTER_TOKEN into the server's environment, which
    here is the test process's: monkeypatch sets them so they are undone after the test. Trials
    find this checkout's packages through PYTHONPATH and the venv's python3 through PATH.

    Args:
        tmp_path: the test's directory; the master's root dir is `tmp_path / "det-root"`.
        monkeypatch: the test's monkeypatch.
        cpu_slots: MasterLite.cpu_slots.
        server: more ServerApp settings (an identity provider, an authorizer).
    """
    # Unset (and restored after the test): a DET_MASTER here would name a shared master, and
    # the extension would host none (docs/team.md).
    monkeypatch.delenv("DET_MASTER", raising=False)
    monkeypatch.delenv("DET_MASTER_ADDR", raising=False)
    monkeypatch.delenv("DET_MASTER_TOKEN", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "harness"), str(REPO)]))
    monkeypatch.setenv(
        "PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_determined": True}, **(server or {})},
        "MasterLite": {"root_dir": str(tmp_path / "det-root"), "cpu_slots": cpu_slots},
    }


def hosted_extension(serverapp: Any) -> Any:
    """The jupyter_determined extension app of a server."""
    return serverapp.extension_manager.extension_points["jupyter_determined"].app


def start_hosted(serverapp: Any, loop: asyncio.AbstractEventLoop) -> Any:
    """Start the server's hosted master (it starts on first use otherwise); the extension app."""
    extension = hosted_extension(serverapp)
    loop.run_until_complete(extension.ensure_started())
    return extension


async def hosted_api(jp_fetch: Any, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
    """The JSON answer of the hosted master's `<base_url>determined/api/v1/<path>`.

    Args:
        jp_fetch: pytest-jupyter's fetch (it sends Jupyter's token).
        method: the HTTP method.
        path: the path below api/v1, e.g. "experiments/3".
        body: sent as JSON when not None.
        kwargs: more of jp_fetch's arguments (headers, params).
    """
    response = await jp_fetch(
        "determined",
        "api",
        "v1",
        *path.strip("/").split("/"),
        method=method,
        body=None if body is None else json.dumps(body),
        **kwargs,
    )
    return json.loads(response.body)
