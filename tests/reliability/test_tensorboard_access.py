"""Issue 26 row 8: a TensorBoard answers only through the authenticated path. Each board serves
under a secret path prefix that only the master knows (not in its argv, which every local user
can read): a request to its loopback port without it is a 404 with none of the data, while the
master's Jupyter proxy (behind Jupyter's login) and, standalone, the serviceAddress the API
gives its users, serve the scalars.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests._support import (
    MasterProcess,
    context_tarball,
    wait_for_experiment,
    wait_until,
    wait_until_async,
)
from tests._support.hosted import (
    TWO_STEP_TRIAL_SCRIPT,
    hosted_api,
    hosted_server_config,
    start_hosted,
)

pytest_plugins = ["pytest_jupyter.jupyter_server"]
pytestmark = pytest.mark.slow

CONFIG = {
    "name": "tensorboard-access",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 2},
}
# What a local user who found the port would ask for.
PROBES = ("/", "/data/logdir", "/data/runs", "/data/plugin/scalars/tags", "/index.html")


def _direct(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _assert_port_refuses_without_the_secret(port: int, run: str) -> None:
    for path in PROBES:
        status, body = _direct(port, path)
        assert status == 404, (path, status)
        assert run.encode() not in body and b"training/loss" not in body, path


def _tensorboard_cmdline(port: int) -> str:
    """The argv of the process serving `port`, as any local user reads it in /proc."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "tensorboards._main" in argv and f"--port={port}" in argv:
            return argv
    raise AssertionError(f"no TensorBoard process serving port {port}")


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch):
    return hosted_server_config(tmp_path, monkeypatch, cpu_slots=2)


@pytest.fixture
def hosted(jp_serverapp, jp_asyncio_loop):
    return start_hosted(jp_serverapp, jp_asyncio_loop)


async def test_hosted_tensorboard_answers_only_through_the_jupyter_proxy(hosted, jp_fetch):
    created = await hosted_api(
        jp_fetch,
        "POST",
        "experiments",
        {"config": CONFIG, "context": context_tarball({"train.py": TWO_STEP_TRIAL_SCRIPT})},
    )
    exp_id = created["experiment"]["id"]

    async def completed() -> dict | None:
        answer = await hosted_api(jp_fetch, "GET", f"experiments/{exp_id}")
        return answer if answer["experiment"]["state"] == "COMPLETED" else None

    answer = await wait_until_async(completed, 120, f"experiment {exp_id} to complete", 0.3)
    run = f"experiment_{exp_id}/trial_{answer['trials'][0]['id']}"
    board = (await hosted_api(jp_fetch, "POST", "tensorboards", {"experiment_ids": [exp_id]}))[
        "tensorboard"
    ]

    async def running() -> bool:
        got = await hosted_api(jp_fetch, "GET", f"tensorboards/{board['id']}")
        return got["tensorboard"]["state"] == "STATE_RUNNING"

    await wait_until_async(running, 90, "the TensorBoard to serve", 0.2)
    try:
        # Through the master's authenticated proxy: the scalars.
        through = await jp_fetch(
            "determined",
            "tensorboard",
            board["id"],
            "data",
            "plugin",
            "scalars",
            "scalars",
            params={"run": run, "tag": "training/loss"},
        )
        assert [(s, v) for _, s, v in json.loads(through.body)] == [(1, 1.0), (2, 0.5)]
        # Straight to its loopback port, as another local user would: nothing.
        _assert_port_refuses_without_the_secret(board["port"], run)
        # The secret is nowhere a local user can read: not in the API's answer (hosted, only
        # the proxy URL is given) nor in the process's argv.
        secret = hosted.master.tensorboards.upstream(board["id"]).rsplit("/", 1)[1]
        assert secret not in json.dumps(board)
        assert secret not in _tensorboard_cmdline(board["port"])
    finally:
        await hosted_api(jp_fetch, "POST", f"tensorboards/{board['id']}/kill", {})


def test_standalone_tensorboard_answers_only_at_the_url_the_api_gives(tmp_path: Path) -> None:
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        exp_id = master.create_experiment(
            CONFIG, context_tarball({"train.py": TWO_STEP_TRIAL_SCRIPT})
        )
        assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
        (trial,) = master.trials(exp_id)
        run = f"experiment_{exp_id}/trial_{trial['id']}"
        board = master.session.post("/tensorboards", {"experiment_ids": [exp_id]})["tensorboard"]
        wait_until(
            lambda: (
                master.session.get(f"/tensorboards/{board['id']}")["tensorboard"]["state"]
                == "STATE_RUNNING"
            ),
            90,
            "the TensorBoard to serve",
            0.2,
        )
        address = board["serviceAddress"]
        port = board["port"]
        assert address.startswith(f"http://127.0.0.1:{port}/") and address.endswith("/")
        secret = address.rstrip("/").rsplit("/", 1)[1]
        assert len(secret) >= 32
        _assert_port_refuses_without_the_secret(port, run)
        assert secret not in _tensorboard_cmdline(port)
        with urllib.request.urlopen(
            f"{address}data/plugin/scalars/scalars?run={run}&tag=training/loss", timeout=10
        ) as answer:
            assert [(s, v) for _, s, v in json.loads(answer.read())] == [(1, 1.0), (2, 0.5)]
        # Without the user token, the API does not give the address out.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{master.url}/api/v1/tensorboards", timeout=10)
        assert refused.value.code == 401
        master.session.post(f"/tensorboards/{board['id']}/kill", {})
