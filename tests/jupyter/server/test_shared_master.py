"""A user's JupyterLab pointed at a shared master (docs/team.md, "Every user's JupyterLab uses
the shared master"): it hosts no master and proxies the sidebar's API to the shared one as the
user; its kernels and `det` reach the shared master with the user's Hub token, no login step.

Without a Hub, the user's identity is simulated as the issue's contract allows: a standalone
master-lite with a user `proxy_alice`, whose session token stands in for her JupyterHub API
token (`JUPYTERHUB_API_TOKEN`; the master accepts any of its tokens under `token`).
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import time
import uuid

import pytest
import requests

from tests._support import MasterProcess, context_tarball, wait_for_experiment
from tests._support.hosted import TWO_STEP_TRIAL_SCRIPT
from tests._support.jupyter import JupyterServer
from tests._support.process import child_env, free_port
from tests._support.waiting import wait_until
from tests.cli.test_cli_verbs import det, failed, ok

pytestmark = pytest.mark.slow

ALICE = "proxy_alice"
CONFIG = {
    "name": "shared-proxy",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


class UserLab(JupyterServer):
    """A user's Jupyter server with `user_env` on top of the test's environment and
    `extra_args` on its command line; ready when Jupyter itself answers (its API may be a 502)."""

    user_env: dict[str, str] = {}
    extra_args: list[str] = []

    def environment(self) -> dict[str, str]:
        return {**super().environment(), **self.user_env}

    def command(self) -> list[str]:
        return [*super().command(), *self.extra_args]

    def ready(self) -> bool:
        try:
            answer = requests.get(
                f"{self.base}api/status",
                headers={"Authorization": f"token {self.token}"},
                timeout=5,
            )
            return answer.status_code == 200
        except requests.RequestException:
            return False


def create_experiment(url: str, authorization: str, name: str) -> requests.Response:
    return requests.post(
        f"{url}/api/v1/experiments",
        json={
            "config": {**CONFIG, "name": name},
            "context": context_tarball({"train.py": "print(1)\n"}),
            "activate": False,
        },
        headers={"Authorization": authorization},
        timeout=60,
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The shared master and alice's session token on it."""
    with MasterProcess(tmp_path_factory.mktemp("shared-root")) as master:
        master.session.post(
            "/users", {"user": {"username": ALICE, "admin": False}, "password": "alice-pw"}
        )
        signed_in = requests.post(
            f"{master.url}/api/v1/auth/login",
            json={"username": ALICE, "password": "alice-pw"},
            timeout=30,
        )
        signed_in.raise_for_status()
        yield master, str(signed_in.json()["token"])


def user_environment(tmp: pathlib.Path, master_url: str, hub_token: str) -> dict[str, str]:
    """What JupyterHub gives a single-user server: DET_MASTER (the recipe's
    c.Spawner.environment) and the user's JUPYTERHUB_API_TOKEN; a home of its own (no auth.json,
    no master.json of anyone's)."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "JUPYTER_DATA_DIR": str(home / "jupyter-data"),
        "DET_MASTER": master_url,
        "JUPYTERHUB_API_TOKEN": hub_token,
    }


@pytest.fixture(scope="module")
def lab(shared, tmp_path_factory):
    master, alice_token = shared
    tmp = tmp_path_factory.mktemp("proxy-lab")
    server = UserLab(tmp, app="jupyterlab")
    server.user_env = user_environment(tmp, master.url, alice_token)
    server.launch(120, interval=0.3)
    try:
        yield server
    finally:
        server.stop()


def lab_api(lab: JupyterServer, method: str, path: str, **kwargs) -> requests.Response:
    """A request to the lab's `<base>determined/api/v1/PATH`, authenticated by Jupyter."""
    headers = {"Authorization": f"token {lab.token}", **kwargs.pop("headers", {})}
    return requests.request(
        method, f"{lab.det_master}/api/v1/{path.lstrip('/')}", headers=headers, timeout=60, **kwargs
    )


def test_the_lab_hosts_no_master_and_lists_the_shared_masters_experiments(shared, lab):
    master, _ = shared
    # No hosted master: its root dir (master.json, the store) was never made.
    assert not (lab.root_dir / "master.json").exists()
    assert not lab.root_dir.exists()
    assert "using the shared master " + master.url in lab.log()
    assert "master serving" not in lab.log()  # the hosted master's start line

    owners = create_experiment(master.url, f"Bearer {master.token}", "owners")
    assert owners.status_code == 201, owners.text
    owners_id = owners.json()["experiment"]["id"]
    listed = lab_api(lab, "GET", "experiments")
    assert listed.status_code == 200, listed.text
    assert owners_id in [e["id"] for e in listed.json()["experiments"]]
    # The shared master's own answer (its info), as the user alice.
    assert lab_api(lab, "GET", "me").json()["user"]["username"] == ALICE
    info = lab_api(lab, "GET", "master")
    assert info.json() == master.session.get("/master")


def test_what_alice_creates_through_the_lab_is_hers_and_others_are_refused(shared, lab):
    master, _ = shared
    created = lab_api(
        lab,
        "POST",
        "experiments",
        json={
            "config": {**CONFIG, "name": "alices"},
            "context": context_tarball({"train.py": "print(1)\n"}),
            "activate": False,
        },
    )
    assert created.status_code == 201, created.text
    experiment = master.session.get(f"/experiments/{created.json()['experiment']['id']}")
    assert experiment["experiment"]["username"] == ALICE

    # The owner account's experiment: alice's kill is the shared master's 403, unchanged.
    owners = create_experiment(master.url, f"Bearer {master.token}", "not-alices").json()
    owners_id = owners["experiment"]["id"]
    refused = lab_api(lab, "POST", f"experiments/{owners_id}/kill")
    assert refused.status_code == 403, refused.text
    assert (
        "only" in refused.json()["message"]
        and "or an admin may kill it" in refused.json()["message"]
    )
    assert master.session.get(f"/experiments/{owners_id}")["experiment"]["state"] == "PAUSED"


def test_the_lab_refuses_a_request_without_jupyters_credential(lab):
    # Jupyter guards the proxy: no token, no cookie -> the API's 401 JSON, nothing forwarded.
    answer = requests.get(f"{lab.det_master}/api/v1/experiments", timeout=30)
    assert answer.status_code == 401
    assert "not signed in to this Jupyter server" in answer.json()["message"]
    wrong = requests.get(
        f"{lab.det_master}/api/v1/experiments",
        headers={"Authorization": "token not-the-lab-token"},
        timeout=30,
    )
    assert wrong.status_code == 401


def test_events_stream_through_the_lab(shared, lab):
    master, _ = shared
    with lab_api(lab, "GET", "events", stream=True, headers={"Accept": "text/event-stream"}) as s:
        assert s.status_code == 200
        assert s.headers["Content-Type"].startswith("text/event-stream")
        lines = s.iter_lines(decode_unicode=True)
        assert next(lines) == ": connected"  # unbuffered: the first line arrives at once
        created = create_experiment(master.url, f"Bearer {master.token}", "streamed")
        exp_id = created.json()["experiment"]["id"]
        deadline = time.monotonic() + 60
        seen: list[str] = []
        event = ""
        for line in lines:  # the master sends a keepalive every 15 s: this loop wakes up
            seen.append(line)
            if line.startswith("event:"):
                event = line[len("event:") :].strip()
            elif line.startswith("data:") and event == "experiment":
                if json.loads(line[len("data:") :])["id"] == exp_id:
                    break
            assert time.monotonic() < deadline, f"no event of experiment {exp_id}: {seen}"


def connections_to(pid: int, url: str) -> int:
    """Established TCP connections of process `pid` to the host:port of `url`."""
    import subprocess
    import urllib.parse

    port = urllib.parse.urlsplit(url).port
    shown = subprocess.run(
        ["ss", "-tnpH", "state", "established", f"( dport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(1 for line in shown.splitlines() if f"pid={pid}," in line)


def test_a_closed_event_stream_closes_its_connection_to_the_shared_master(shared, lab):
    master, _ = shared
    # (An earlier test's stream may still be open until the master's next keepalive.)
    wait_until(lambda: connections_to(lab.pid, master.url) == 0, 45, "no upstream connection")
    with lab_api(lab, "GET", "events", stream=True) as stream:
        assert next(stream.iter_lines(decode_unicode=True)) == ": connected"
        assert connections_to(lab.pid, master.url) == 1
    # The browser went away: at the master's next keepalive (15 s) at the latest, the proxy
    # stops reading and closes its connection, instead of holding one per closed tab.
    wait_until(lambda: connections_to(lab.pid, master.url) == 0, 45, "the upstream to close")


def run_in_kernel(lab: JupyterServer, cells: list[str], timeout: float = 120) -> str:
    """Run `cells` one after the other in a new kernel of the lab; their output."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    kernel = requests.post(
        f"{lab.base}api/kernels",
        headers={"Authorization": f"token {lab.token}"},
        # In the server's notebook folder (a notebook's kernel starts there): without a path it
        # would start where pytest runs, and %%det_submit would pack the whole checkout.
        json={"path": ""},
        timeout=60,
    )
    kernel.raise_for_status()
    kernel_id = kernel.json()["id"]

    async def execute() -> str:
        url = lab.base.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels"
        request = HTTPRequest(url, headers={"Authorization": f"token {lab.token}"})
        connection = await websocket_connect(request)
        try:
            return "".join([await execute_one(connection, code) for code in cells])
        finally:
            connection.close()

    async def execute_one(connection, code: str) -> str:
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "username": "test",
            "session": uuid.uuid4().hex,
            "msg_type": "execute_request",
            "version": "5.3",
        }
        content = {"code": code, "silent": False, "store_history": False, "allow_stdin": False}
        message = {"header": header, "parent_header": {}, "metadata": {}, "content": content}
        await connection.write_message(json.dumps({**message, "channel": "shell"}))
        out: list[str] = []
        while True:
            raw = await asyncio.wait_for(connection.read_message(), timeout)
            assert raw is not None, "the kernel's channel closed"
            reply = json.loads(raw)
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = reply["header"]["msg_type"]
            if kind == "stream":
                out.append(reply["content"]["text"])
            elif kind == "error":
                out.append("\n".join(reply["content"]["traceback"]))
            elif kind == "status" and reply["content"]["execution_state"] == "idle":
                return "".join(out)

    try:
        return asyncio.run(execute())
    finally:
        requests.delete(
            f"{lab.base}api/kernels/{kernel_id}",
            headers={"Authorization": f"token {lab.token}"},
            timeout=60,
        )


KERNEL_CODE = """
import json, os, pathlib, tempfile
from determined.experimental import client
model_dir = pathlib.Path(tempfile.mkdtemp())
(model_dir / "train.py").write_text("print(1)\\n")
experiment = client.create_experiment(CONFIG, str(model_dir))
experiment.kill()
print("RESULT " + json.dumps({
    "DET_MASTER": os.environ.get("DET_MASTER"),
    "DET_MASTER_TOKEN": os.environ.get("DET_MASTER_TOKEN"),
    "whoami": client.whoami().username,
    "experiment": experiment.id,
}))
"""


def test_a_kernel_reaches_the_shared_master_as_the_user(shared, lab):
    master, _ = shared
    output = run_in_kernel(
        lab,
        [
            f"CONFIG = {CONFIG!r}\n" + KERNEL_CODE,
            "%load_ext jupyter_determined",
            "%%det_submit CONFIG --no-widget\nprint('trained')",
            "from jupyter_determined.kernel import _magics\n"
            "print('SUBMITTED', _magics._last_experiment_id)",
        ],
    )
    result_line = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert result_line, output
    result = json.loads(result_line[0][len("RESULT ") :])
    # The shared master itself, with no token of a hosted master: the Hub token does it.
    assert result["DET_MASTER"] == master.url
    assert result["DET_MASTER_TOKEN"] is None
    assert result["whoami"] == ALICE
    experiment = master.session.get(f"/experiments/{result['experiment']}")["experiment"]
    assert experiment["username"] == ALICE
    # The magic's submission too (it finds the master as `det` does).
    submitted = [line for line in output.splitlines() if line.startswith("SUBMITTED ")]
    assert submitted and submitted[0] != "SUBMITTED None", output
    by_magic = master.session.get(f"/experiments/{int(submitted[0].split()[1])}")["experiment"]
    assert by_magic["username"] == ALICE


def test_det_works_with_only_det_master_and_the_hub_token(shared, tmp_path):
    master, alice_token = shared
    env = child_env(user_environment(tmp_path, master.url, alice_token))
    assert ok(det(env, "user", "whoami")).strip() == f"You are logged in as user '{ALICE}'"
    created = create_experiment(master.url, f"Bearer {alice_token}", "listed")
    assert f"{created.json()['experiment']['id']}" in ok(det(env, "e", "list"))
    # A refused Hub token says what to check, not "run det user login" only.
    env["JUPYTERHUB_API_TOKEN"] = "not-a-token"
    failed(det(env, "e", "list"), "refused your JupyterHub API token (JUPYTERHUB_API_TOKEN)")


def test_a_shared_master_that_is_down_is_a_502_naming_it(shared, tmp_path):
    _, alice_token = shared
    down = f"http://127.0.0.1:{free_port()}"
    server = UserLab(tmp_path, app="jupyter_server")
    server.user_env = user_environment(tmp_path, down, alice_token)
    server.launch(120, interval=0.3)
    try:
        answer = lab_api(server, "GET", "experiments")
        assert answer.status_code == 502
        message = answer.json()["message"]
        assert f"the shared Determined master at {down} did not answer" in message
        assert "DET_MASTER names that one" in message
    finally:
        server.stop()


def test_an_empty_shared_master_url_hosts_a_master_whatever_det_master_says(shared, tmp_path):
    master, alice_token = shared
    server = UserLab(tmp_path, app="jupyter_server")
    server.user_env = user_environment(tmp_path, master.url, alice_token)
    server.extra_args = ["--DeterminedServerExtension.shared_master_url="]
    server.launch(120, interval=0.3)
    try:
        wait_until(lambda: (server.root_dir / "master.json").exists(), 60, "the hosted master")
        # The hosted master's owner account, not alice on the shared master.
        assert lab_api(server, "GET", "me").json()["user"]["id"] == 1
    finally:
        server.stop()


def test_a_large_upload_and_its_download_pass_through(shared, lab):
    master, _ = shared
    # Incompressible bytes: a context of a few MiB, as base64 in the JSON body.
    payload = os.urandom(3 * 1024 * 1024)
    context = context_tarball({"train.py": "print(1)\n", "weights.bin": payload})
    created = lab_api(
        lab,
        "POST",
        "experiments",
        json={"config": {**CONFIG, "name": "large"}, "context": context, "activate": False},
    )
    assert created.status_code == 201, created.text
    exp_id = created.json()["experiment"]["id"]
    through_lab = lab_api(lab, "GET", f"experiments/{exp_id}/context")
    assert through_lab.status_code == 200
    assert through_lab.headers["Content-Type"].startswith("application/gzip")
    direct = requests.get(
        f"{master.url}/api/v1/experiments/{exp_id}/context",
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=60,
    )
    assert through_lab.content == direct.content and len(direct.content) > len(payload)


def test_a_tensorboard_of_the_shared_master_opens_through_the_lab(shared, lab):
    master, _ = shared
    created = lab_api(
        lab,
        "POST",
        "experiments",
        json={
            "config": {**CONFIG, "name": "boards"},
            "context": context_tarball({"train.py": TWO_STEP_TRIAL_SCRIPT}),
        },
    )
    assert created.status_code == 201, created.text
    exp_id = created.json()["experiment"]["id"]
    wait_for_experiment(master, exp_id, {"COMPLETED"})
    board = lab_api(lab, "POST", "tensorboards", json={"experiment_ids": [exp_id]})
    assert board.status_code == 201, board.text
    board_id = board.json()["tensorboard"]["id"]

    def running() -> bool:
        state = lab_api(lab, "GET", f"tensorboards/{board_id}").json()["tensorboard"]["state"]
        assert state != "STATE_TERMINATED"
        return state == "STATE_RUNNING"

    wait_until(running, 90, "the TensorBoard to serve", 0.3)
    base = f"{lab.det_master}/tensorboard/{board_id}"
    headers = {"Authorization": f"token {lab.token}"}
    page = requests.get(f"{base}/index.html", headers=headers, timeout=60)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Content-Security-Policy"].endswith("frame-ancestors 'self'")
    tags = requests.get(f"{base}/data/plugin/scalars/tags", headers=headers, timeout=60).json()
    assert any("training/loss" in run_tags for run_tags in tags.values())
    # Not without Jupyter's login.
    refused = requests.get(f"{base}/data/plugin/scalars/tags", timeout=60)
    assert refused.status_code == 401 and b"training/loss" not in refused.content
    lab_api(lab, "POST", f"tensorboards/{board_id}/kill")


class RecordingMaster:
    """A stand-in shared master on loopback that answers `{}` and records every request
    (method, path with query, headers)."""

    def __init__(self) -> None:
        import http.server
        import threading

        seen: list[tuple[str, str, dict[str, str]]] = []
        self.seen = seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                seen.append((self.command, self.path, dict(self.headers.items())))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


READ_ONLY_AUTHORIZER = """
from jupyter_server.auth import Authorizer

class ReadOnlyDetermined(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return resource != "determined" or action == "read"

c.ServerApp.authorizer_class = ReadOnlyDetermined
"""


def test_jupyters_credentials_stay_in_the_lab_and_its_authorizer_decides(tmp_path):
    upstream = RecordingMaster()
    server = UserLab(tmp_path, app="jupyter_server")
    server.user_env = user_environment(tmp_path, upstream.url, "alices-hub-token")
    (server.config_dir / "jupyter_server_config.py").write_text(READ_ONLY_AUTHORIZER)
    server.launch(120, interval=0.3)
    try:
        # The browser's way: Jupyter's token in the query and a cookie; the API's own query kept.
        answer = requests.get(
            f"{server.det_master}/api/v1/experiments?limit=3&token={server.token}",
            headers={"Cookie": "other=1", "Accept": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 200 and answer.json() == {}
        method, path, headers = upstream.seen[-1]
        assert (method, path) == ("GET", "/api/v1/experiments?limit=3")
        assert headers["Authorization"] == "token alices-hub-token"
        assert "Cookie" not in headers and server.token not in json.dumps(headers)
        # The deployment's Authorizer refuses writes: Jupyter's 403, nothing forwarded.
        before = len(upstream.seen)
        refused = lab_api(server, "POST", "experiments/1/kill")
        assert refused.status_code == 403
        assert len(upstream.seen) == before
    finally:
        server.stop()
        upstream.close()
