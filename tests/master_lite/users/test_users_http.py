"""Users, sign-in and the owner-or-admin rule over HTTP, against a real Master and store
(docs/team.md): accounts made by an admin, passwords checked, deactivated users refused, and
another user's experiment or model refused with a 403 that names its owner, nothing changed."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import tornado.httpclient
import tornado.httpserver
import tornado.netutil
import tornado.web

from master_lite._master import Master
from master_lite.api import make_handlers
from master_lite.users import client_hash
from tests._support import context_tarball

CONFIG = {
    "name": "owned",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


class Api:
    def __init__(self, master: Master, port: int) -> None:
        self.master = master
        self.port = port
        self.http = tornado.httpclient.AsyncHTTPClient()

    async def call(
        self, method: str, path: str, body: Any = None, *, token: str | None = "master"
    ) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if token == "master":
            token = self.master.user_token
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        response = await self.http.fetch(
            f"http://127.0.0.1:{self.port}/api/v1{path}",
            method=method,
            body=None if body is None and method == "GET" else json.dumps(body or {}),
            headers=headers,
            raise_error=False,
            allow_nonstandard_methods=True,
        )
        return response.code, json.loads(response.body) if response.body else {}

    async def user(self, name: str, password: str = "pw-" + "x", *, admin: bool = False) -> int:
        status, answer = await self.call(
            "POST", "/users", {"user": {"username": name, "admin": admin}, "password": password}
        )
        assert status == 200, answer
        return answer["user"]["id"]

    async def login(self, name: str, password: str = "pw-" + "x") -> str:
        status, answer = await self.call(
            "POST", "/auth/login", {"username": name, "password": password}, token=None
        )
        assert status == 200, answer
        return answer["token"]

    async def experiment(self, token: str) -> dict:
        status, answer = await self.call(
            "POST",
            "/experiments",
            {
                "config": CONFIG,
                "context": context_tarball({"train.py": "print(1)\n"}),
                "activate": False,
            },
            token=token,
        )
        assert status == 201, answer
        return answer["experiment"]


@contextlib.asynccontextmanager
async def serving(master: Master) -> AsyncIterator[Api]:
    """`master` started and served over HTTP on a free loopback port, as an `Api`; the server
    and the master (its running trials not paused) stopped when the block ends."""
    await master.start("http://127.0.0.1:9")
    server = tornado.httpserver.HTTPServer(tornado.web.Application(make_handlers(master, "")))
    [sock] = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server.add_sockets([sock])
    try:
        yield Api(master, sock.getsockname()[1])
    finally:
        server.stop()
        await master.stop(pause_running=False)


def with_api(test: Callable) -> Callable:
    """Run an async test against a started Master served over HTTP."""

    def wrapper(tmp_path: Path) -> None:
        root = tmp_path / "root"
        root.mkdir()

        async def body() -> None:
            async with serving(Master(root, cpu_slots=1, gpus=[])) as api:
                await test(api)

        asyncio.run(asyncio.wait_for(body(), 120))

    wrapper.__name__ = test.__name__
    return wrapper


@with_api
async def test_the_master_token_is_the_owner_account(api: Api) -> None:
    status, answer = await api.call("GET", "/me")
    assert status == 200
    assert answer["user"]["id"] == 1 and answer["user"]["admin"] and answer["user"]["active"]
    assert answer["user"]["username"] == getpass.getuser()
    status, listing = await api.call("GET", "/users")
    assert [u["username"] for u in listing["users"]] == [getpass.getuser()]


@with_api
async def test_login_me_logout(api: Api) -> None:
    alice_id = await api.user("alice")
    token = await api.login("alice")
    assert token.startswith("session.")
    status, me = await api.call("GET", "/me", token=token)
    assert status == 200 and me["user"] == {**me["user"], "id": alice_id, "username": "alice"}
    assert me["user"]["admin"] is False
    assert (await api.call("GET", "/auth/user", token=token))[1]["user"]["id"] == alice_id
    # Reads are open to every signed-in user.
    assert (await api.call("GET", "/experiments", token=token))[0] == 200
    assert (await api.call("POST", "/auth/logout", token=token))[0] == 200
    status, answer = await api.call("GET", "/me", token=token)
    assert status == 401 and "invalid token" in answer["message"]


@with_api
async def test_a_wrong_password_or_unknown_user_is_401(api: Api) -> None:
    await api.user("alice")
    for body in (
        {"username": "alice", "password": "wrong"},
        {"username": "nobody", "password": "pw-x"},
        {"username": getpass.getuser(), "password": ""},  # the owner has no password
    ):
        status, answer = await api.call("POST", "/auth/login", body, token=None)
        assert status == 401, body
        assert answer["message"] == "invalid username and/or password"


@with_api
async def test_determined_clients_salted_hash_signs_in(api: Api) -> None:
    await api.user("alice", "s3cret")
    status, answer = await api.call(
        "POST",
        "/auth/login",
        {"username": "alice", "password": client_hash("s3cret"), "isHashed": True},
        token=None,
    )
    assert status == 200 and answer["user"]["username"] == "alice"


@with_api
async def test_a_deactivated_user_is_refused_with_a_reason(api: Api) -> None:
    alice_id = await api.user("alice")
    token = await api.login("alice")
    status, answer = await api.call("PATCH", f"/users/{alice_id}", {"active": False})
    assert status == 200 and answer["user"]["active"] is False
    status, answer = await api.call("GET", "/experiments", token=token)
    assert status == 401 and "deactivated" in answer["message"] and "alice" in answer["message"]
    status, answer = await api.call(
        "POST", "/auth/login", {"username": "alice", "password": "pw-x"}, token=None
    )
    assert status == 401 and "deactivated" in answer["message"]
    await api.call("PATCH", f"/users/{alice_id}", {"active": True})
    assert (await api.call("GET", "/experiments", token=token))[0] == 200


@with_api
async def test_only_an_admin_creates_users_or_changes_flags(api: Api) -> None:
    bob_id = await api.user("bob")
    bob = await api.login("bob")
    status, answer = await api.call(
        "POST", "/users", {"user": {"username": "mallory"}, "password": "x"}, token=bob
    )
    assert status == 403 and "only an admin may create users" in answer["message"]
    assert [u["username"] for u in (await api.call("GET", "/users"))[1]["users"]] == [
        getpass.getuser(),
        "bob",
    ]
    status, answer = await api.call("PATCH", f"/users/{bob_id}", {"admin": True}, token=bob)
    assert status == 403 and "only an admin may change admin" in answer["message"]
    status, answer = await api.call(
        "PATCH", f"/users/{bob_id}", {"displayName": "Bob B."}, token=bob
    )
    assert status == 200 and answer["user"]["displayName"] == "Bob B."
    assert answer["user"]["admin"] is False
    status, answer = await api.call("PATCH", "/users/1", {"displayName": "x"}, token=bob)
    owner = getpass.getuser()
    assert status == 403
    assert answer["message"] == f"bob may not change user {owner}: only {owner} or an admin may"
    # The owner account stays an active admin.
    status, answer = await api.call("PATCH", "/users/1", {"active": False})
    assert status == 400 and "owner account" in answer["message"]
    status, answer = await api.call(
        "POST", "/users", {"user": {"username": "bob"}, "password": "x"}
    )
    assert status == 409 and "already exists" in answer["message"]
    status, answer = await api.call(
        "POST", "/users", {"user": {"username": "bad name/"}, "password": "x"}
    )
    assert status == 400 and "username" in answer["message"]


@with_api
async def test_passwords_change_by_the_user_or_an_admin(api: Api) -> None:
    alice_id = await api.user("alice")
    bob_id = await api.user("bob")
    alice = await api.login("alice")
    # Determined's body: the password as a JSON string.
    assert (await api.call("POST", f"/users/{alice_id}/password", "new-a", token=alice))[0] == 200
    await api.login("alice", "new-a")
    status, answer = await api.call("POST", f"/users/{bob_id}/password", "hacked", token=alice)
    assert status == 403
    assert answer["message"] == (
        "alice may not set the password of user bob: only bob or an admin may"
    )
    await api.login("bob")  # unchanged
    status, _ = await api.call("POST", f"/users/{bob_id}/password", {"password": "by-admin"})
    assert status == 200
    await api.login("bob", "by-admin")


@with_api
async def test_another_users_experiment_is_403_naming_the_owner(api: Api) -> None:
    await api.user("alice")
    await api.user("bob")
    alice, bob = await api.login("alice"), await api.login("bob")
    experiment = await api.experiment(alice)
    exp_id = experiment["id"]
    assert experiment["username"] == "alice" and experiment["state"] == "PAUSED"
    listed = (await api.call("GET", "/experiments", token=bob))[1]["experiments"]
    assert [(e["id"], e["username"]) for e in listed] == [(exp_id, "alice")]
    for method, path, body, verb in (
        ("POST", f"/experiments/{exp_id}/kill", None, "kill"),
        ("POST", f"/experiments/{exp_id}/activate", None, "activate"),
        ("PATCH", f"/experiments/{exp_id}", {"name": "mine now"}, "edit"),
        # A state conflict (409: not finished) would come after the owner check.
        ("DELETE", f"/experiments/{exp_id}", None, "delete"),
        ("GET", f"/experiments/{exp_id}/context", None, "download the code of"),
    ):
        status, answer = await api.call(method, path, body, token=bob)
        assert status == 403, (method, path, answer)
        assert answer["message"] == (
            f"experiment {exp_id} belongs to alice: only alice or an admin may {verb} it"
        )
    status, answer = await api.call("GET", f"/experiments/{exp_id}", token=bob)
    assert status == 200  # reading is open
    assert answer["experiment"]["state"] == "PAUSED" and answer["experiment"]["name"] == "owned"
    # Its trial is the experiment's too.
    [trial] = answer["trials"]
    status, answer = await api.call("POST", f"/trials/{trial['id']}/kill", token=bob)
    assert status == 403
    assert answer["message"] == (
        f"trial {trial['id']} (experiment {exp_id}) belongs to alice: only alice or an admin "
        "may kill it"
    )
    # The owner may act; so may an admin (the master token here).
    assert (await api.call("PATCH", f"/experiments/{exp_id}", {"notes": "n"}, token=alice))[
        0
    ] == 200
    status, answer = await api.call("POST", f"/experiments/{exp_id}/kill")
    assert status == 200, answer
    # A 404 stays a 404 for an experiment that does not exist.
    assert (await api.call("POST", "/experiments/999/kill", token=bob))[0] == 404


@with_api
async def test_an_admin_user_may_act_on_others_experiments(api: Api) -> None:
    await api.user("alice")
    await api.user("root2", admin=True)
    alice, admin = await api.login("alice"), await api.login("root2")
    exp_id = (await api.experiment(alice))["id"]
    status, answer = await api.call("POST", f"/experiments/{exp_id}/kill", token=admin)
    assert status == 200, answer


@with_api
async def test_forks_reruns_and_continues_are_the_parents_owners_and_belong_to_who_made_them(
    api: Api,
) -> None:
    await api.user("alice")
    await api.user("bob")
    alice, bob = await api.login("alice"), await api.login("bob")
    parent = await api.experiment(alice)
    [trial] = (await api.call("GET", f"/experiments/{parent['id']}"))[1]["trials"]
    fork = {"config": CONFIG, "parent_id": parent["id"], "activate": False}
    # They run the parent's code again: as downloading it, the owner's or an admin's to do.
    status, answer = await api.call("POST", "/experiments", fork, token=bob)
    assert status == 403, answer
    assert answer["message"] == (
        f"experiment {parent['id']} belongs to alice: only alice or an admin may fork it"
    )
    for action in ("rerun", "continue"):
        status, answer = await api.call(
            "POST", f"/trials/{trial['id']}/{action}", {"activate": False}, token=bob
        )
        assert status == 403, (action, answer)
        verb = "re-run" if action == "rerun" else "continue"
        assert answer["message"].endswith(f"only alice or an admin may {verb} it"), answer
    listed = (await api.call("GET", "/experiments"))[1]["experiments"]
    assert [e["id"] for e in listed] == [parent["id"]]  # nothing was made
    # The owner's fork and re-run are hers; an admin's fork is the admin's.
    status, mine = await api.call("POST", "/experiments", fork, token=alice)
    assert status == 201 and mine["experiment"]["username"] == "alice", mine
    status, rerun = await api.call(
        "POST", f"/trials/{trial['id']}/rerun", {"activate": False}, token=alice
    )
    assert status == 201 and rerun["experiment"]["username"] == "alice", rerun
    status, admins = await api.call("POST", "/experiments", fork)
    assert status == 201 and admins["experiment"]["username"] == getpass.getuser(), admins


@with_api
async def test_another_users_model_is_403(api: Api) -> None:
    await api.user("alice")
    await api.user("bob")
    alice, bob = await api.login("alice"), await api.login("bob")
    status, answer = await api.call("POST", "/models", {"name": "alices"}, token=alice)
    assert status == 201 and answer["model"]["username"] == "alice"
    status, answer = await api.call("PATCH", "/models/alices", {"description": "x"}, token=bob)
    assert status == 403
    assert (
        answer["message"] == "model 'alices' belongs to alice: only alice or an admin may edit it"
    )
    status, answer = await api.call("GET", "/models/alices", token=bob)
    assert status == 200 and answer["model"]["description"] == ""


@with_api
async def test_trial_tokens_cannot_use_the_user_endpoints(api: Api) -> None:
    status, answer = await api.call("GET", "/users", token="trial.not-a-live-one")
    assert status == 401


@with_api
async def test_unmanaged_runs_and_their_checkpoints_are_their_owners(api: Api) -> None:
    await api.user("alice")
    await api.user("bob")
    alice, bob = await api.login("alice"), await api.login("bob")
    ids = {"name": "kernel run", "external_experiment_id": "nb", "external_trial_id": "t1"}
    status, run = await api.call("POST", "/unmanaged/runs", ids, token=alice)
    assert status == 200, run
    exp_id = run["experiment_id"]
    status, answer = await api.call("GET", f"/experiments/{exp_id}", token=bob)
    assert answer["experiment"]["username"] == "alice"
    # Resuming alice's run by its external ids is alice's (or an admin's).
    status, answer = await api.call("POST", "/unmanaged/runs", ids, token=bob)
    assert status == 403 and "belongs to alice" in answer["message"]
    # A checkpoint the run reports is alice's too.
    uuid = "0b0c0d0e-0000-4000-8000-000000000001"
    status, answer = await api.call(
        "POST",
        "/checkpoints",
        {
            "uuid": uuid,
            "trialId": run["trial_id"],
            "metadata": {"steps_completed": 1},
            "resources": {},
            "state": "COMPLETED",
        },
        token=run["token"],
    )
    assert status == 200, answer
    expected = (
        f"checkpoint {uuid} (experiment {exp_id}) belongs to alice: only alice or an admin may"
    )
    for method, path, body, verb in (
        ("DELETE", f"/checkpoints/{uuid}", None, "delete"),
        ("PATCH", f"/checkpoints/{uuid}", {"metadata": {"x": 1}}, "edit"),
        ("GET", f"/checkpoints/{uuid}/download", None, "download"),
        ("PATCH", "/checkpoints", {"checkpoints": [{"uuid": uuid}]}, "delete"),
    ):
        status, answer = await api.call(method, path, body, token=bob)
        assert status == 403, (method, path, answer)
        assert answer["message"] == f"{expected} {verb} it"
    status, answer = await api.call("GET", f"/checkpoints/{uuid}", token=bob)
    assert status == 200
    assert answer["checkpoint"]["state"] == "COMPLETED"
    assert answer["checkpoint"]["metadata"] == {"steps_completed": 1}
