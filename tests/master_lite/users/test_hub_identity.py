"""Hub identity over HTTP against a real Master and store, with JupyterHub's own `HubOAuth`
whose one call to the Hub (`user_for_token`) answers from a table here (docs/team.md, "The
shared master as a JupyterHub service"; the real Hub is in tests/team/test_hub_service.py).

A Hub user is the master user of the same name, made on first sight; admin is the Hub's
(admin flag or group determined-admins), recomputed at every call; the access scope is
required; a deactivation on the master wins; the Hub not answering is a 503 naming it; the
master's own tokens are never sent to the Hub.
"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tornado.web

from master_lite._master import Master
from master_lite.users import make_hub_auth
from tests.master_lite.users.test_users_http import Api, with_api

HUB_API = "http://127.0.0.1:9/hub/api"
ACCESS = "access:services!service=determined"


def model(name: str, *, scopes: tuple[str, ...] = (ACCESS,), **fields: Any) -> dict:
    """The Hub's answer to GET /hub/api/user for a token of `name`."""
    return {"kind": "user", "name": name, "admin": False, "groups": [], "scopes": list(scopes)} | (
        fields
    )


class FakeHub:
    """The Hub's answers by token (None: unknown token); `down`: it does not answer."""

    def __init__(self) -> None:
        self.users: dict[str, dict] = {}
        self.asked: list[str] = []
        self.down = False

    async def user_for_token(self, token: str, **_: Any) -> dict | None:
        self.asked.append(token)
        if self.down:
            # What HubAuth._api_request raises when the connection fails.
            raise tornado.web.HTTPError(500, f"Failed to connect to Hub API at {HUB_API!r}.")
        return self.users.get(token)


def with_hub(test: Callable) -> Callable:
    """`test(api, hub)` against a Master that identifies callers through `hub`."""

    async def run(api: Api) -> None:
        hub = FakeHub()
        auth = make_hub_auth(
            api_url=HUB_API,
            api_token="service-token",
            base_url="/services/determined/",
            service_name="determined",
            client_id="service-determined",
        )
        auth.user_for_token = hub.user_for_token  # the one call that would reach the Hub
        api.master.users.use_hub(auth)
        await test(api, hub)

    run.__name__ = test.__name__
    return with_api(run)


@with_hub
async def test_a_hub_user_is_the_master_user_of_the_same_name(api: Api, hub: FakeHub) -> None:
    hub.users["t-alice"] = model("alice")
    status, answer = await api.call("GET", "/me", token="t-alice")
    assert status == 200, answer
    assert answer["user"]["username"] == "alice" and answer["user"]["admin"] is False
    experiment = await api.experiment("t-alice")
    assert experiment["username"] == "alice"
    # The same user on the next call (no second account).
    status, listing = await api.call("GET", "/users")
    assert [u["username"] for u in listing["users"]].count("alice") == 1


@with_hub
async def test_admin_is_the_hubs_at_every_call(api: Api, hub: FakeHub) -> None:
    hub.users["t-bob"] = model("bob", groups=["determined-admins"])
    assert (await api.call("GET", "/me", token="t-bob"))[1]["user"]["admin"] is True
    hub.users["t-bob"] = model("bob", groups=[])
    assert (await api.call("GET", "/me", token="t-bob"))[1]["user"]["admin"] is False
    hub.users["t-bob"] = model("bob", admin=True)
    assert (await api.call("GET", "/me", token="t-bob"))[1]["user"]["admin"] is True


@with_hub
async def test_another_hub_users_experiment_is_refused_naming_its_owner(
    api: Api, hub: FakeHub
) -> None:
    hub.users["t-alice"] = model("alice")
    hub.users["t-bob"] = model("bob")
    experiment = await api.experiment("t-alice")
    status, answer = await api.call("POST", f"/experiments/{experiment['id']}/kill", token="t-bob")
    assert status == 403
    assert "belongs to alice" in answer["message"]


@with_hub
async def test_a_token_without_the_access_scope_or_not_a_users_is_refused(
    api: Api, hub: FakeHub
) -> None:
    hub.users["t-narrow"] = model("carol", scopes=("read:users:name!user=carol",))
    status, answer = await api.call("GET", "/experiments", token="t-narrow")
    assert status == 403
    assert ACCESS in answer["message"] and "carol" in answer["message"]
    # The broader scope grants it too.
    hub.users["t-broad"] = model("dave", scopes=("access:services",))
    assert (await api.call("GET", "/me", token="t-broad"))[0] == 200
    hub.users["t-service"] = model("other", kind="service")
    status, answer = await api.call("GET", "/me", token="t-service")
    assert status == 403 and "JupyterHub service 'other' is not a user" in answer["message"]
    hub.users["t-odd"] = model("has space")
    status, answer = await api.call("GET", "/me", token="t-odd")
    assert status == 403 and "cannot be a user of this master" in answer["message"]
    _, listing = await api.call("GET", "/users")
    names = [u["username"] for u in listing["users"]]
    assert "carol" not in names and "other" not in names and "has space" not in names


@with_hub
async def test_a_deactivated_master_user_stays_out_whatever_the_hub_says(
    api: Api, hub: FakeHub
) -> None:
    hub.users["t-erin"] = model("erin", admin=True)
    status, answer = await api.call("GET", "/me", token="t-erin")
    user_id = answer["user"]["id"]
    status, _ = await api.call("PATCH", f"/users/{user_id}", {"active": False})
    assert status == 200
    status, answer = await api.call("GET", "/me", token="t-erin")
    assert status == 401
    assert "user 'erin' is deactivated on this master" in answer["message"]
    assert "det user activate erin" in answer["message"]


@with_hub
async def test_unknown_tokens_and_no_token_are_401s_naming_the_hub(api: Api, hub: FakeHub) -> None:
    status, answer = await api.call("GET", "/me", token="unknown")
    assert status == 401
    assert f"nor a token the JupyterHub at {HUB_API} knows" in answer["message"]
    status, answer = await api.call("GET", "/me", token=None)
    assert status == 401
    assert "sign in with a browser at /services/determined/" in answer["message"]


@with_hub
async def test_the_masters_own_tokens_work_and_never_reach_the_hub(api: Api, hub: FakeHub) -> None:
    assert (await api.call("GET", "/me"))[1]["user"]["username"] == getpass.getuser()
    await api.user("frank", "frank-pw")
    session = await api.login("frank", "frank-pw")
    assert (await api.call("GET", "/me", token=session))[1]["user"]["username"] == "frank"
    await api.call("POST", "/auth/logout", {}, token=session)
    status, _ = await api.call("GET", "/me", token=session)  # an ended session
    assert status == 401
    assert (await api.call("GET", "/me", token="trial.forged"))[0] == 401
    assert hub.asked == []  # neither the master token, a session nor a trial token was sent


@with_hub
async def test_the_hub_not_answering_is_a_503_naming_it(api: Api, hub: FakeHub) -> None:
    hub.down = True
    status, answer = await api.call("GET", "/me", token="t-any")
    assert status == 503
    assert f"the JupyterHub at {HUB_API} did not answer" in answer["message"]
    assert (await api.call("GET", "/me"))[0] == 200  # the master token still works


def test_a_hub_user_named_like_the_masters_login_is_the_owner_account(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()

    async def body() -> None:
        master = Master(root, cpu_slots=1, gpus=[])
        await master.start("http://127.0.0.1:9")
        try:
            auth = make_hub_auth(
                api_url=HUB_API,
                api_token="t",
                base_url="/services/determined/",
                service_name="determined",
                client_id="service-determined",
            )
            identity = master.users.use_hub(auth)
            principal = identity.principal_for(model(getpass.getuser()))
            assert principal.user_id == 1 and principal.admin  # not demoted by the Hub
            assert master.users.get_user(1)["user"]["admin"] is True
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 120))
