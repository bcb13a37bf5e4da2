"""The master hosted inside a real jupyter_server (pytest-jupyter): auth, trials, kernels."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import tornado.httpclient

from tests._support import TERMINAL_EXPERIMENT_STATES, context_tarball, wait_until, wait_until_async
from tests._support.hosted import (
    TWO_STEP_TRIAL_SCRIPT,
    hosted_api,
    hosted_server_config,
    start_hosted,
)

pytest_plugins = ["pytest_jupyter.jupyter_server"]

TRIAL_CONFIG = {
    "name": "hosted",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 2},
}


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch):
    return hosted_server_config(tmp_path, monkeypatch, cpu_slots=3)


@pytest.fixture
def hosted(jp_serverapp, jp_asyncio_loop):
    return start_hosted(jp_serverapp, jp_asyncio_loop)


async def test_api_is_mounted_under_base_url_and_uses_the_configured_settings(
    hosted, jp_fetch, tmp_path
):
    info = await hosted_api(jp_fetch, "GET", "master")
    assert Path(info["root_dir"]) == tmp_path / "det-root"
    resources = await hosted_api(jp_fetch, "GET", "resources")
    if not resources["gpus"]:
        assert len(resources["slots"]) == 3  # c.MasterLite.cpu_slots
    assert hosted.master_url.endswith("/a%40b/determined")


async def test_requests_without_jupyter_auth_are_refused(hosted, jp_fetch):
    for headers in ({"Authorization": ""}, {"Authorization": "token not-the-token"}):
        with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
            await hosted_api(jp_fetch, "GET", "experiments", headers=headers)
        assert refused.value.code in (401, 403)
        assert "message" in json.loads(refused.value.response.body)
        with pytest.raises(tornado.httpclient.HTTPClientError) as refused:
            await hosted_api(
                jp_fetch, "POST", "experiments", {"config": TRIAL_CONFIG}, headers=headers
            )
        assert refused.value.code in (401, 403)
    # The same request with Jupyter's token goes through.
    assert (await hosted_api(jp_fetch, "GET", "experiments"))["experiments"] == []


@pytest.mark.slow
async def test_cookie_user_posts_still_need_the_xsrf_token(
    hosted, jp_serverapp, jp_fetch, jp_http_port, jp_base_url
):
    """A browser session (login cookie, no token header) may read, but a POST without the
    _xsrf cookie/header pair is refused: the trial-token exemption does not open a hole."""
    client = tornado.httpclient.AsyncHTTPClient()
    base = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
    token = jp_serverapp.identity_provider.token
    # Log in the way a browser does: the login page sets the _xsrf cookie the form echoes.
    page = await client.fetch(f"{base}login", raise_error=False)
    cookies = "; ".join(value.split(";", 1)[0] for value in page.headers.get_list("Set-Cookie"))
    xsrf = [c.split("=", 1)[1] for c in cookies.split("; ") if c.startswith("_xsrf=")][0]
    login = await client.fetch(
        f"{base}login",
        method="POST",
        follow_redirects=False,
        body=f"password={token}&_xsrf={xsrf}",
        raise_error=False,
        headers={"Cookie": cookies},
    )
    assert login.code in (302, 303), login.code
    session_cookies = "; ".join(
        [cookies] + [value.split(";", 1)[0] for value in login.headers.get_list("Set-Cookie")]
    )
    api = f"{base}determined/api/v1/experiments"
    read = await client.fetch(api, headers={"Cookie": session_cookies}, raise_error=False)
    assert read.code == 200, read.body
    forged = await client.fetch(
        api,
        method="POST",
        body=json.dumps({"config": TRIAL_CONFIG}),
        headers={"Cookie": session_cookies},
        raise_error=False,
    )
    assert forged.code == 403, forged.body
    allowed = await client.fetch(
        api,
        method="POST",
        body=json.dumps({"config": TRIAL_CONFIG}),
        headers={"Cookie": session_cookies, "X-XSRFToken": xsrf},
        raise_error=False,
    )
    assert allowed.code == 201, allowed.body


@pytest.mark.slow
async def test_a_trial_runs_against_the_hosted_master_with_its_session_token(hosted, jp_fetch):
    created = await hosted_api(
        jp_fetch,
        "POST",
        "experiments",
        {"config": TRIAL_CONFIG, "context": context_tarball({"train.py": TWO_STEP_TRIAL_SCRIPT})},
    )
    experiment_id = created["experiment"]["id"]

    async def terminal() -> dict | None:
        answer = await hosted_api(jp_fetch, "GET", f"experiments/{experiment_id}")
        return answer if answer["experiment"]["state"] in TERMINAL_EXPERIMENT_STATES else None

    answer = await wait_until_async(terminal, 120, f"experiment {experiment_id} to finish", 0.3)
    trial = answer["trials"][0]
    logs = await hosted_api(jp_fetch, "GET", f"trials/{trial['id']}/logs")
    assert answer["experiment"]["state"] == "COMPLETED", [entry["line"] for entry in logs["logs"]]
    # The trial reported through <base_url>determined/api/v1 with its trial token (no XSRF).
    metrics = await hosted_api(
        jp_fetch, "GET", f"trials/{trial['id']}/metrics", params={"group": "training"}
    )
    assert [m["steps_completed"] for m in metrics["metrics"]] == [1, 2]
    assert answer["experiment"]["best_validation"] == 0.25


async def _run_in_kernel(kernel_manager, code: str, timeout: float = 60) -> str:
    kernel_id = await kernel_manager.start_kernel()
    client = kernel_manager.get_kernel(kernel_id).client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=timeout)
        msg_id = client.execute(code)
        output: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = await client.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                output.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                output.append("\n".join(msg["content"]["traceback"]))
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        return "".join(output)
    finally:
        client.stop_channels()
        await kernel_manager.shutdown_kernel(kernel_id, now=True)


@pytest.mark.slow
async def test_kernels_started_by_the_server_find_the_master_without_configuration(
    hosted, jp_serverapp, jp_fetch
):
    await hosted_api(
        jp_fetch,
        "POST",
        "experiments",
        {"config": {**TRIAL_CONFIG, "name": "seen"}, "activate": False},
    )
    code = (
        "import os\n"
        "from determined.common.api import Session, discover_master\n"
        "address = discover_master()\n"
        "session = Session(address.url, address.token)\n"
        "names = [e['name'] for e in session.get('/experiments')['experiments']]\n"
        "print('DET_MASTER=' + os.environ['DET_MASTER'])\n"
        "print('NAMES=' + ','.join(names))\n"
    )
    output = await _run_in_kernel(jp_serverapp.kernel_manager, code)
    assert f"DET_MASTER={hosted.master_url}" in output, output
    assert "NAMES=seen" in output, output


RESUMABLE_TRIAL = """\
import pathlib
import time
import determined as det

info = det.get_cluster_info()
with det.core.init() as core_context:
    steps = 0
    if info.latest_checkpoint:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            steps = int((pathlib.Path(path) / "steps").read_text())
        print(f"resumed at {steps}", flush=True)
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            time.sleep(0.25)
            if steps % 2 == 0:
                with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, _):
                    (path / "steps").write_text(str(steps))
                if core_context.preempt.should_preempt():
                    print(f"preempted at {steps}", flush=True)
                    raise SystemExit(0)
        core_context.train.report_validation_metrics(steps_completed=steps, metrics={"loss": 1.0})
        op.report_completed(1.0)
"""


@pytest.mark.slow
def test_clean_shutdown_pauses_trials_and_the_next_start_resumes_them(start_jupyter, tmp_path):
    from determined.common.api import Session

    root = tmp_path / "shared-root"
    first = start_jupyter(app="jupyter_server", root_dir=root)
    session = Session(first.det_master, first.token)
    config = {
        "name": "survives-restart",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 40},
    }
    experiment_id = session.post(
        "/experiments",
        {"config": config, "context": context_tarball({"train.py": RESUMABLE_TRIAL})},
    )["experiment"]["id"]
    wait_until(
        lambda: session.get(f"/experiments/{experiment_id}/checkpoints")["checkpoints"],
        90,
        "a checkpoint before the shutdown",
        0.3,
    )
    assert first.stop() == 0, first.log()[-3000:]
    assert "running trials were paused" in first.log()

    second = start_jupyter(app="jupyter_server", root_dir=root)
    answer = second.wait_experiment(experiment_id, timeout=180)
    trial = answer["trials"][0]
    logs = second.trial_logs(trial["id"])
    assert answer["experiment"]["state"] == "COMPLETED", logs
    assert "preempted at" in logs  # the first run checkpointed when the server stopped
    preempted_at = int(logs.split("preempted at ")[1].split()[0])
    assert f"resumed at {preempted_at}" in logs  # ...and the second run started from there
    assert trial["steps_completed"] == 40 and trial["restarts"] == 0


@pytest.mark.slow
def test_det_cli_works_against_the_hosted_master_with_the_jupyter_token(start_jupyter, tmp_path):
    import subprocess

    server = start_jupyter(app="jupyter_server")
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "train.py").write_text(TWO_STEP_TRIAL_SCRIPT)
    (tmp_path / "config.yaml").write_text(
        "name: from-the-cli\nentrypoint: python3 train.py\nmax_restarts: 0\n"
        "searcher: {name: single, metric: loss, max_length: 2}\n"
    )
    # What a user types in another shell: the server's URL + /determined, and its token.
    env = {
        **server.kernel_environment(),
        "DET_MASTER": server.det_master,
        "DET_MASTER_TOKEN": server.token,
    }

    def det(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "determined.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    created = det("experiment", "create", str(tmp_path / "config.yaml"), str(context))
    experiment_id = int(created.split("Created experiment")[1].split()[0])
    answer = server.wait_experiment(experiment_id)
    assert answer["experiment"]["state"] == "COMPLETED"
    listing = det("experiment", "list")
    assert "from-the-cli" in listing and "COMPLETED" in listing
    env["DET_MASTER_TOKEN"] = "wrong"
    refused = subprocess.run(
        [sys.executable, "-m", "determined.cli", "experiment", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert refused.returncode != 0
