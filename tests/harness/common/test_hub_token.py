"""`det` and the SDK inside a JupyterHub single-user server: the user's Hub API token
(`JUPYTERHUB_API_TOKEN`) is the credential when nothing of Determined's own applies, sent as
`Authorization: token …` (docs/cli.md, "Which master")."""

from __future__ import annotations

import json

import pytest

from determined.common import api
from determined.common.api import authentication

URL = "http://hub.example:8000/services/determined"


@pytest.fixture
def user_shell(monkeypatch, tmp_path):
    """A shell of a Hub user: DET_MASTER names the shared master, no other DET_* setting, an
    empty config dir (no auth.json), no master.json."""
    for name in ("DET_MASTER_ADDR", "DET_MASTER_TOKEN", "DET_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", URL)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path / "no-master-here"))
    monkeypatch.setenv(api.HUB_TOKEN_ENV, "hub-token-of-alice")
    return monkeypatch


def authorization(address: api.MasterAddress) -> str:
    session = api.Session(address.url, address.token, address=address)
    return str(session._client().headers["Authorization"])


def test_the_hub_token_is_used_with_the_hubs_scheme(user_shell):
    address = api.discover_master()
    assert (address.url, address.token) == (URL, "hub-token-of-alice")
    assert address.token_source == "JUPYTERHUB_API_TOKEN"
    assert authorization(address) == "token hub-token-of-alice"


def test_determineds_own_credentials_come_first(user_shell, tmp_path):
    # A stored `det user login` for that master wins over the Hub token...
    authentication.TokenStore(URL).set_token("bob", "session.bobs")
    authentication.TokenStore(URL).set_active("bob")
    address = api.discover_master()
    assert (address.token, address.user) == ("session.bobs", "bob")
    assert authorization(address) == "Bearer session.bobs"
    # ... and DET_MASTER_TOKEN over both.
    user_shell.setenv("DET_MASTER_TOKEN", "master-token")
    address = api.discover_master()
    assert (address.token, address.token_source) == ("master-token", "DET_MASTER_TOKEN")
    assert authorization(address) == "Bearer master-token"


def test_a_master_json_of_the_same_url_comes_first(user_shell, tmp_path):
    root = tmp_path / "root"
    (root / "private").mkdir(parents=True)
    (root / "private" / "user_token").write_text("local-token\n")
    (root / "master.json").write_text(json.dumps({"url": URL, "pid": 1}))
    user_shell.setenv("MASTER_LITE_ROOT_DIR", str(root))
    assert api.discover_master().token == "local-token"


def test_no_hub_token_no_credential(user_shell):
    user_shell.setenv(api.HUB_TOKEN_ENV, " ")
    address = api.discover_master()
    assert address.token is None and address.token_scheme == "Bearer"
