"""`read_access = "own"` walks the whole route table (docs/team.md, "Who may read").

alice owns one of everything (a workspace, a project in it, an experiment there with a trial,
logs, an allocation and a checkpoint, a model with a version and a label, a TensorBoard, a job
in the queue). For every GET of `master_lite.api.ROUTES`, filled in with alice's objects:

* the operation has a read rule (tests/master_lite/api/test_read_rules.py);
* bob (a user, not an admin) gets a 404 for a path that names alice's object, and answers
  that never mention any of alice's objects from the others (lists, the users, the master);
* carol (an admin) gets exactly what alice gets, and the lists she reads hold alice's objects.

And the event stream: bob's carries his own events and none of alice's; carol's carries both.
So a route added to the table without a read rule fails here.
"""

from __future__ import annotations

import asyncio
import json
import uuid as uuid_module
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient
import tornado.httpserver
import tornado.netutil
import tornado.web

from master_lite._master import Master
from master_lite.api import ROUTES
from master_lite.api._declarations import Listing, Reads
from master_lite.api._reads import path_object
from tests._support import context_tarball
from tests.master_lite.users.test_users_http import CONFIG, Api, serving

pytestmark = pytest.mark.slow

SECRET = "alicesecret"  # in the name of every object of alice's (and nowhere else)


def with_own_reads(test: Callable) -> Callable:
    def wrapper(tmp_path: Path) -> None:
        root = tmp_path / "root"
        root.mkdir()

        async def body() -> None:
            master = Master(root, cpu_slots=1, gpus=[], read_access="own")
            async with serving(master) as api:
                try:
                    await test(api)
                finally:
                    for board in master.tensorboards.list_all():
                        await master.tensorboards.kill(board["id"])

        asyncio.run(asyncio.wait_for(body(), 180))

    wrapper.__name__ = test.__name__
    return wrapper


async def ok(api: Api, method: str, path: str, body: Any = None, *, token: Any) -> dict:
    status, answer = await api.call(method, path, body, token=token)
    assert status in (200, 201), (method, path, status, answer)
    return answer


async def alices_objects(api: Api, alice: str) -> dict[str, Any]:
    """One of everything, owned by alice; the values that fill in a route's path."""
    ws = await ok(api, "POST", "/workspaces", {"name": f"{SECRET}-ws"}, token=alice)
    ws_id = ws["workspace"]["id"]
    project = await ok(
        api, "POST", f"/workspaces/{ws_id}/projects", {"name": f"{SECRET}-project"}, token=alice
    )
    run = await ok(
        api,
        "POST",
        "/unmanaged/runs",
        {"name": f"{SECRET}-exp", "workspace": f"{SECRET}-ws", "project": f"{SECRET}-project"},
        token=alice,
    )
    trial_id, trial_token = run["trial_id"], run["token"]
    await ok(
        api,
        "POST",
        f"/unmanaged/trials/{trial_id}/logs",
        {"logs": [{"line": f"{SECRET} log line"}]},
        token=trial_token,
    )
    checkpoint = str(uuid_module.uuid4())
    await ok(
        api,
        "POST",
        "/checkpoints",
        {
            "uuid": checkpoint,
            "trialId": trial_id,
            "metadata": {"steps_completed": 1},
            "resources": {},
        },
        token=trial_token,
    )
    trial = (await ok(api, "GET", f"/trials/{trial_id}", token=alice))["trial"]
    model = f"{SECRET}-model"
    await ok(api, "POST", "/models", {"name": model, "labels": [f"{SECRET}-label"]}, token=alice)
    await ok(api, "POST", f"/models/{model}/versions", {"checkpointUuid": checkpoint}, token=alice)
    board = await ok(
        api, "POST", "/tensorboards", {"experiment_ids": [run["experiment_id"]]}, token=alice
    )
    # A job in the queue: a trial needing 2 slots of the master's 1 waits (no process runs).
    queued = {**CONFIG, "name": f"{SECRET}-queued", "resources": {"slots_per_trial": 2}}
    context = context_tarball({"train.py": "print(1)\n"})
    await ok(api, "POST", "/experiments", {"config": queued, "context": context}, token=alice)
    return {
        "experiment_id": run["experiment_id"],
        "trial_id": trial_id,
        "allocation_id": trial["allocation_id"],
        "uuid": checkpoint,
        "model": model,
        "version": 1,
        "tensorboard_id": board["tensorboard"]["id"],
        "workspace_id": ws_id,
        "project_id": project["project"]["id"],
        "user_id": (await ok(api, "GET", "/me", token=alice))["user"]["id"],
        "username": "reads_alice",
        "action": "unarchive",
    }


def get_operations() -> list[tuple[Any, Any]]:
    return [
        (route, route.operations["get"])
        for route in ROUTES
        if "get" in route.operations and route.path != "/events"
    ]


@with_own_reads
async def test_bob_reads_none_of_alices_objects_and_an_admin_reads_them_all(api: Api) -> None:
    await api.user("reads_alice")
    await api.user("reads_bob")
    await api.user("reads_carol", admin=True)
    alice, bob, carol = [await api.login(f"reads_{n}") for n in ("alice", "bob", "carol")]
    values = await alices_objects(api, alice)

    # Strings only alice's objects carry: the names, the checkpoint's and TensorBoard's ids.
    markers = (SECRET, values["uuid"], values["tensorboard_id"])

    def mentions_alice(answer: Any) -> bool:
        text = json.dumps(answer)
        return any(marker in text for marker in markers)

    for route, operation in get_operations():
        path = route.path.format(**values)
        query = (
            "?timeout_seconds=0"
            if any(p.name == "timeout_seconds" for p in operation.query)
            else ""
        )
        as_alice = await api.call("GET", path + query, token=alice)
        as_bob = await api.call("GET", path + query, token=bob)
        as_carol = await api.call("GET", path + query, token=carol)
        where = f"GET {route.path}"
        # An admin reads what the owner reads.
        assert as_carol[0] == as_alice[0], (where, as_carol, as_alice)
        if path_object(route) is not None and operation.reads is not Reads.ANYONE:
            # As for no such object: a message naming only what bob asked for.
            assert as_bob[0] == 404 and list(as_bob[1]) == ["message"], (where, as_bob)
            assert as_bob[1]["message"].endswith(" not found"), (where, as_bob)
            continue
        assert as_bob[0] == 200, (where, as_bob)
        assert not mentions_alice(as_bob[1]), (where, as_bob)
        if isinstance(operation.reads, Listing) and operation.reads.kind != "slot":
            # The list holds alice's object for her and for an admin (so the check above
            # proves something).
            assert mentions_alice(as_alice[1]), (where, as_alice)
            assert mentions_alice(as_carol[1]), (where, as_carol)


class Stream:
    """The event stream as one user reads it (`GET /events`), collected as it arrives."""

    def __init__(self, api: Api, token: str) -> None:
        self.text = ""
        self.opened = asyncio.Event()
        request = tornado.httpclient.HTTPRequest(
            f"http://127.0.0.1:{api.port}/api/v1/events",
            headers={"Authorization": f"Bearer {token}"},
            streaming_callback=self._chunk,
            request_timeout=3600,
        )
        self.task = asyncio.ensure_future(
            tornado.httpclient.AsyncHTTPClient(force_instance=True).fetch(request)
        )

    def _chunk(self, data: bytes) -> None:
        self.text += data.decode()
        self.opened.set()

    async def until(self, marker: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while marker not in self.text:
            assert loop.time() < deadline, f"no {marker!r} in the stream: {self.text[-2000:]}"
            await asyncio.sleep(0.05)

    def events(self) -> list[tuple[str, dict]]:
        found = []
        for block in self.text.split("\n\n"):
            lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in lines:
                found.append((lines["event"], json.loads(lines["data"])))
        return found


@with_own_reads
async def test_the_event_stream_sends_bob_none_of_alices_events(api: Api) -> None:
    await api.user("reads_alice")
    await api.user("reads_bob")
    await api.user("reads_carol", admin=True)
    alice, bob, carol = [await api.login(f"reads_{n}") for n in ("alice", "bob", "carol")]
    bobs, carols = Stream(api, bob), Stream(api, carol)
    await asyncio.wait_for(asyncio.gather(bobs.opened.wait(), carols.opened.wait()), 30)

    values = await alices_objects(api, alice)  # experiment, trial, log, checkpoint, model events
    await ok(
        api,
        "PATCH",
        f"/experiments/{values['experiment_id']}",
        {"description": f"{SECRET} edited"},
        token=alice,
    )
    # bob's own model last: once his stream shows it, it has seen everything before it.
    await ok(api, "POST", "/models", {"name": "bobs-sentinel"}, token=bob)
    bob_id = (await ok(api, "GET", "/me", token=bob))["user"]["id"]
    await bobs.until("bobs-sentinel")
    await carols.until("bobs-sentinel")
    for stream in (bobs, carols):
        stream.task.cancel()

    assert SECRET not in bobs.text and values["uuid"] not in bobs.text
    for event_type, payload in bobs.events():
        assert payload.get("experiment_id") != values["experiment_id"], (event_type, payload)
        assert payload.get("userId") in (None, bob_id), (event_type, payload)
    # An admin's stream carries alice's events: experiment, trial, log, checkpoint, model.
    seen = {
        event_type
        for event_type, payload in carols.events()
        if SECRET in json.dumps(payload) or payload.get("experiment_id") == values["experiment_id"]
    }
    assert {"experiment", "trial", "log", "checkpoint", "model"} <= seen, seen


@with_own_reads
async def test_bob_cannot_show_alices_objects_through_what_he_makes(api: Api) -> None:
    """A TensorBoard of her experiment, a model version of her checkpoint: 404, nothing made."""
    await api.user("reads_alice")
    await api.user("reads_bob")
    alice, bob = await api.login("reads_alice"), await api.login("reads_bob")
    values = await alices_objects(api, alice)
    experiment_id = values["experiment_id"]

    status, answer = await api.call(
        "POST", "/tensorboards", {"experiment_ids": [experiment_id]}, token=bob
    )
    assert (status, answer) == (404, {"message": f"experiment {experiment_id} not found"})
    status, answer = await api.call(
        "POST", "/tensorboards", {"trial_ids": [values["trial_id"]]}, token=bob
    )
    assert status == 404, answer
    await ok(api, "POST", "/models", {"name": "bobs-model"}, token=bob)
    status, answer = await api.call(
        "POST", "/models/bobs-model/versions", {"checkpointUuid": values["uuid"]}, token=bob
    )
    assert (status, answer) == (404, {"message": f"checkpoint {values['uuid']} not found"})
    boards = (await ok(api, "GET", "/tensorboards", token="master"))["tensorboards"]
    assert [b["username"] for b in boards] == ["reads_alice"]
    versions = await ok(api, "GET", "/models/bobs-model/versions", token=bob)
    assert versions["model_versions"] == []


@with_own_reads
async def test_bob_cannot_put_things_into_alices_workspace_or_project(api: Api) -> None:
    """Her workspace and project answer 404 to what bob would make or move into them."""
    await api.user("reads_alice")
    await api.user("reads_bob")
    alice, bob = await api.login("reads_alice"), await api.login("reads_bob")
    ws = await ok(api, "POST", "/workspaces", {"name": f"{SECRET}-ws"}, token=alice)
    ws_id = ws["workspace"]["id"]
    project = await ok(
        api, "POST", f"/workspaces/{ws_id}/projects", {"name": f"{SECRET}-p"}, token=alice
    )
    project_id = project["project"]["id"]

    status, answer = await api.call(
        "POST", f"/workspaces/{ws_id}/projects", {"name": "bobs"}, token=bob
    )
    assert (status, answer) == (404, {"message": f"workspace {ws_id} not found"})
    experiment = await api.experiment(bob)  # into the default project: his to read
    status, answer = await api.call(
        "POST",
        f"/experiments/{experiment['id']}/move",
        {"destinationProjectId": project_id},
        token=bob,
    )
    assert (status, answer) == (404, {"message": f"project {project_id} not found"})
    status, answer = await api.call(
        "POST",
        "/experiments",
        {
            "config": {**CONFIG, "name": "bobs"},
            "context": context_tarball({"train.py": ""}),
            "activate": False,
            "projectId": project_id,
        },
        token=bob,
    )
    assert (status, answer) == (404, {"message": f"project {project_id} not found"})
    listing = await ok(api, "GET", f"/projects/{project_id}/experiments", token=alice)
    assert listing["experiments"] == []
