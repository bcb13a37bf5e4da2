"""A deployment's jupyter_server Authorizer decides what each Jupyter user may do with the
hosted master (resource "determined": read / write / execute); trial tokens are not its users.

The server is real (pytest-jupyter) with a custom IdentityProvider (the user is named by a
header, as a JupyterHub proxy would) and a custom Authorizer (a role per user).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import tornado.httpclient
from jupyter_server.auth import Authorizer, IdentityProvider, User

from tests._support import TERMINAL_EXPERIMENT_STATES, context_tarball, wait_until_async
from tests._support.hosted import hosted_server_config, start_hosted

pytest_plugins = ["pytest_jupyter.jupyter_server"]

USER_HEADER = "X-Test-User"
XSRF = "5eed" * 8

# What each user may do on the resource "determined"; anyone else may do nothing.
ROLES = {
    "owner": {"read", "write", "execute"},
    "operator": {"read", "write"},  # may pause and kill, may not run new code
    "viewer": {"read"},
    "outsider": set(),
}
ASKED: list[tuple[str, str, str]] = []  # (user, action, resource) the authorizer was asked


class HeaderIdentityProvider(IdentityProvider):
    """The user named by the X-Test-User header; else Jupyter's token login as usual."""

    def get_user(self, handler: Any) -> Any:
        name = handler.request.headers.get(USER_HEADER)
        if name:
            return User(username=name)
        return super().get_user(handler)


class RoleAuthorizer(Authorizer):
    """Allows `ROLES[user]` on "determined" and everything else to everyone."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        if resource != "determined":
            return True
        ASKED.append((user.username, action, resource))
        return action in ROLES.get(user.username, set())


TRIAL_SCRIPT = """\
import determined as det

with det.core.init() as core_context:
    core_context.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
    core_context.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.25})
"""
CONFIG = {
    "name": "authorized",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}
# One that waits until killed, for the actions.
SLEEPER_CONFIG = {
    "name": "sleeper",
    "entrypoint": "python3 -c 'import time; time.sleep(600)'",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch):
    ASKED.clear()
    return hosted_server_config(
        tmp_path,
        monkeypatch,
        cpu_slots=2,
        server={
            "identity_provider_class": HeaderIdentityProvider,
            "authorizer_class": RoleAuthorizer,
        },
    )


@pytest.fixture
def hosted(jp_serverapp, jp_asyncio_loop):
    return start_hosted(jp_serverapp, jp_asyncio_loop)


@pytest.fixture
def call(jp_fetch):
    """`await call(user, method, path, body=None)` → (status, JSON answer); user None: with
    Jupyter's token (the server's owner, who is also the master's user)."""

    async def request(
        user: str | None, method: str, path: str, body: Any = None
    ) -> tuple[int, Any]:
        # A named user is a browser session: its POSTs carry the _xsrf cookie and header pair.
        headers = (
            {}
            if user is None
            else {
                "Authorization": "",
                USER_HEADER: user,
                "Cookie": f"_xsrf={XSRF}",
                "X-XSRFToken": XSRF,
            }
        )
        try:
            response = await jp_fetch(
                *path.strip("/").split("/"),
                method=method,
                body=json.dumps(body if body is not None else {}) if method != "GET" else None,
                headers=headers,
            )
        except tornado.httpclient.HTTPClientError as exc:
            assert exc.response is not None
            return exc.code, json.loads(exc.response.body or b"null")
        return response.code, json.loads(response.body)

    return request


CONTEXT = context_tarball({"train.py": TRIAL_SCRIPT})
API = "determined/api/v1"


async def _until_terminal(call, experiment_id: int, timeout: float = 120) -> dict:
    """The experiment (read as the owner), once it is in a terminal state."""

    async def terminal() -> dict | None:
        status, answer = await call("owner", "GET", f"{API}/experiments/{experiment_id}")
        assert status == 200, answer
        return answer if answer["experiment"]["state"] in TERMINAL_EXPERIMENT_STATES else None

    return await wait_until_async(terminal, timeout, f"experiment {experiment_id} to end")


@pytest.mark.slow
async def test_the_authorizer_decides_each_users_reads_actions_and_submissions(hosted, call):
    # The owner may run code: create an experiment whose trial reports with its trial token.
    status, created = await call(
        "owner", "POST", f"{API}/experiments", {"config": CONFIG, "context": CONTEXT}
    )
    assert status == 201, created
    experiment_id = created["experiment"]["id"]
    done = await _until_terminal(call, experiment_id)
    # The trial's reports went through although the authorizer knows no trial user.
    assert done["experiment"]["state"] == "COMPLETED"
    trial = done["trials"][0]
    assert trial["best_validation"]["metrics"] == {"loss": 0.25}

    # Reads: everyone with "read".
    for user in ("owner", "operator", "viewer"):
        status, answer = await call(user, "GET", f"{API}/experiments")
        assert status == 200, (user, answer)
        assert [e["id"] for e in answer["experiments"]] == [experiment_id]
        status, _ = await call(user, "GET", f"{API}/trials/{trial['id']}/metrics")
        assert status == 200, user
    for path in (
        "experiments",
        f"experiments/{experiment_id}",
        f"trials/{trial['id']}/logs",
        "master",
    ):
        status, answer = await call("outsider", "GET", f"{API}/{path}")
        assert status == 403, (path, status, answer)
        assert "not authorized to read on resource: determined" in answer["message"]

    # Submitting runs code: "execute", which the operator lacks.
    for user in ("operator", "viewer", "outsider"):
        status, answer = await call(
            user, "POST", f"{API}/experiments", {"config": CONFIG, "context": CONTEXT}
        )
        assert status == 403, (user, answer)
        assert "execute" in answer["message"]
    status, listed = await call("owner", "GET", f"{API}/experiments")
    assert len(listed["experiments"]) == 1  # nothing was created by the refused requests

    # The sidebar's actions (Pause, Activate, Kill; a trial's Kill) need "write".
    status, sleeper = await call(
        "owner", "POST", f"{API}/experiments", {"config": SLEEPER_CONFIG, "context": CONTEXT}
    )
    assert status == 201, sleeper
    sleeper_id = sleeper["experiment"]["id"]
    for user in ("viewer", "outsider"):
        for action in ("pause", "activate", "kill", "archive"):
            status, answer = await call(user, "POST", f"{API}/experiments/{sleeper_id}/{action}")
            assert status == 403, (user, action, answer)
            assert "write" in answer["message"]
        status, _ = await call(user, "POST", f"{API}/trials/{trial['id']}/kill")
        assert status == 403
    status, answer = await call("owner", "GET", f"{API}/experiments/{sleeper_id}")
    assert answer["experiment"]["state"] == "ACTIVE"  # untouched by the refused actions
    status, paused = await call("operator", "POST", f"{API}/experiments/{sleeper_id}/pause")
    assert status == 200, paused
    assert paused["experiment"]["state"] in ("PAUSED", "STOPPING_PAUSED")
    status, killed = await call("operator", "POST", f"{API}/experiments/{sleeper_id}/kill")
    assert status == 200, killed
    await _until_terminal(call, sleeper_id)

    # Making an account or setting a password needs "execute" too: a signed-in account's
    # token is the master's own and skips the Authorizer, so an operator could otherwise make an
    # admin and act through it beyond "write".
    for method, path, body in (
        ("POST", "users", {"user": {"username": "mine", "admin": True}, "password": "pw"}),
        ("PATCH", "users/1", {"displayName": "taken"}),
        ("POST", "users/1/password", {"password": "pw"}),
    ):
        status, answer = await call("operator", method, f"{API}/{path}", body)
        assert status == 403, (method, path, answer)
        assert "execute" in answer["message"]
    status, users = await call("owner", "GET", f"{API}/users")
    assert [u["id"] for u in users["users"]] == [1]  # nothing was made
    status, made = await call(
        "owner", "POST", f"{API}/users", {"user": {"username": "made"}, "password": "pw"}
    )
    assert status == 200, made

    # Every request of a named user was decided by the authorizer, with the mapped action.
    assert ("viewer", "read", "determined") in ASKED
    assert ("operator", "write", "determined") in ASKED
    assert ("operator", "execute", "determined") in ASKED


async def test_requests_with_jupyters_token_are_the_servers_owner(hosted, call):
    """The token in the server's URL is the master's token too (`det` uses it): the owner of
    the server, whatever the authorizer says of named users."""
    status, answer = await call(None, "GET", f"{API}/experiments")
    assert status == 200, answer
    assert ASKED == []


async def test_export_preview_needs_read(hosted, call):
    cells = [{"id": "a", "cell_type": "code", "source": "x = 1"}]
    status, answer = await call("outsider", "POST", "determined/export-preview", {"cells": cells})
    assert status == 403, answer
    status, answer = await call("viewer", "POST", "determined/export-preview", {"cells": cells})
    assert status == 200, answer
