"""Issue 26 row 9: secrets in experiment configs (`environment.registry_auth`'s password and
auth, a kernel gateway's token and headers) are redacted in every response, for a viewer and
for the owner alike, while the master keeps the real values for its runners; a config
submitted again with the stars is refused rather than stored over the secret.

The API part runs the hosted master with a role Authorizer (owner / viewer), as
tests/jupyter/server/test_authorization.py does.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import tornado.httpclient
from jupyter_server.auth import Authorizer, IdentityProvider, User

from master_lite._core._secrets import (
    REDACTED,
    redact_config,
    redacted_fields,
    restore_secrets,
)
from tests._support import context_tarball
from tests._support.hosted import hosted_server_config, start_hosted

pytest_plugins = ["pytest_jupyter.jupyter_server"]

USER_HEADER = "X-Test-User"
XSRF = "5eed" * 8
ROLES = {"owner": {"read", "write", "execute"}, "viewer": {"read"}}
PASSWORD = "hunter2-secret"
AUTH = "dTpodW50ZXIy"
GATEWAY_TOKEN = "gateway-secret-token"

SECRET_CONFIG = {
    "environment": {
        "registry_auth": {"username": "alice", "password": PASSWORD, "auth": AUTH},
        "jupyter_gateway": {
            "url": "http://gw:8888",
            "token": GATEWAY_TOKEN,
            "headers": {"X-Api-Key": GATEWAY_TOKEN},
        },
        "kernel": {"gateway": {"url": "http://gw:8888", "token": GATEWAY_TOKEN}},
    }
}


# --- the redaction itself --------------------------------------------------------------------


def test_every_secret_is_redacted_and_nothing_else() -> None:
    original = copy.deepcopy(SECRET_CONFIG)
    redacted = redact_config(SECRET_CONFIG)
    assert SECRET_CONFIG == original  # the stored config is never changed
    assert PASSWORD not in json.dumps(redacted) and GATEWAY_TOKEN not in json.dumps(redacted)
    environment = redacted["environment"]
    assert environment["registry_auth"] == {
        "username": "alice",
        "password": REDACTED,
        "auth": REDACTED,
    }
    assert environment["jupyter_gateway"] == {
        "url": "http://gw:8888",
        "token": REDACTED,
        "headers": {"X-Api-Key": REDACTED},
    }
    assert environment["kernel"]["gateway"]["token"] == REDACTED
    plain = {"environment": {"image": "x"}, "searcher": {"name": "single"}}
    assert redact_config(plain) is plain


def test_stars_submitted_again_get_the_stored_secret_back_or_are_refused() -> None:
    redacted = redact_config(SECRET_CONFIG)
    assert restore_secrets(redacted, SECRET_CONFIG) == SECRET_CONFIG
    # A changed secret is the new value, not the stored one.
    changed = copy.deepcopy(redacted)
    changed["environment"]["registry_auth"]["password"] = "new"
    assert restore_secrets(changed, SECRET_CONFIG)["environment"]["registry_auth"] == {
        "username": "alice",
        "password": "new",
        "auth": AUTH,
    }
    # With nothing to restore from, the stars are named (the submission refuses them).
    assert redacted_fields(redacted) == [
        "environment.registry_auth.password",
        "environment.registry_auth.auth",
        "environment.jupyter_gateway.token",
        "environment.jupyter_gateway.headers",
        "environment.kernel.gateway.token",
    ]
    assert redacted_fields(SECRET_CONFIG) == []


# --- over HTTP, hosted, as the owner and as a viewer -------------------------------------------


class HeaderIdentityProvider(IdentityProvider):
    """The user named by the X-Test-User header."""

    def get_user(self, handler: Any) -> Any:
        name = handler.request.headers.get(USER_HEADER)
        return User(username=name) if name else super().get_user(handler)


class RoleAuthorizer(Authorizer):
    """`ROLES[user]` on "determined", everything else to everyone."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        if resource != "determined":
            return True
        return action in ROLES.get(user.username, set())


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch):
    return hosted_server_config(
        tmp_path,
        monkeypatch,
        cpu_slots=1,
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
    """`await call(user, method, path, body=None)` → (status, the body's text)."""

    async def request(user: str, method: str, path: str, body: Any = None) -> tuple[int, str]:
        headers = {
            "Authorization": "",
            USER_HEADER: user,
            "Cookie": f"_xsrf={XSRF}",
            "X-XSRFToken": XSRF,
        }
        try:
            response = await jp_fetch(
                *path.strip("/").split("/"),
                method=method,
                body=json.dumps(body if body is not None else {}) if method != "GET" else None,
                headers=headers,
            )
        except tornado.httpclient.HTTPClientError as exc:
            assert exc.response is not None
            return exc.code, exc.response.body.decode()
        return response.code, response.body.decode()

    return request


API = "determined/api/v1"
CONFIG = {
    "name": "with-secrets",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    "environment": {"registry_auth": {"username": "alice", "password": PASSWORD, "auth": AUTH}},
}


async def test_no_principal_gets_a_secret_back_over_http(hosted, call) -> None:
    context = context_tarball({"train.py": "print('never runs')\n"})
    status, text = await call(
        "owner",
        "POST",
        f"{API}/experiments",
        {"config": CONFIG, "context": context, "activate": False},
    )
    assert status == 201, text
    assert PASSWORD not in text and AUTH not in text
    exp_id = json.loads(text)["experiment"]["id"]

    for user in ("owner", "viewer"):
        for path in (f"experiments/{exp_id}", "experiments", f"experiments/{exp_id}/trials"):
            status, text = await call(user, "GET", f"{API}/{path}")
            assert status == 200, (user, path, text)
            assert PASSWORD not in text and AUTH not in text, (user, path)
        status, text = await call(user, "GET", f"{API}/experiments/{exp_id}")
        registry = json.loads(text)["experiment"]["config"]["environment"]["registry_auth"]
        assert registry == {"username": "alice", "password": REDACTED, "auth": REDACTED} | {
            key: value for key, value in registry.items() if value is None
        }

    # The owner resubmits the config it fetched: refused, naming the redacted fields.
    fetched = json.loads(text)["experiment"]["config"]
    status, text = await call(
        "owner", "POST", f"{API}/experiments", {"config": fetched, "context": context}
    )
    assert status == 400 and "environment.registry_auth.password" in text, text
    # An edit keeps the stored secret.
    status, text = await call(
        "owner", "PATCH", f"{API}/experiments/{exp_id}", {"resources": {"priority": 10}}
    )
    assert status == 200, text
    assert PASSWORD not in text

    # The master keeps the real values for its runners.
    stored = hosted.master.views.experiment_row(exp_id).config["environment"]["registry_auth"]
    assert stored["password"] == PASSWORD and stored["auth"] == AUTH
