"""The HTTP layer in-process, against a small in-memory facade (no store, no scheduler).

The fake facade is not the thing under test: it stands in for `master_lite._master.Master` so
these tests pin what the handlers do — parsing, auth, trial scopes, error mapping, OpenAPI, SSE.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import re
import socket
from typing import Any

import pytest
import tornado.httpclient
import tornado.httpserver
import tornado.web

from master_lite import errors
from master_lite._core._auth import TrialPrincipal, UserPrincipal
from master_lite._core._events import EventBus
from master_lite.api import ROUTES, TrialScope, build_document, make_handlers

USER_TOKEN = "user-secret"
TRIAL_TOKENS = {
    "trial-1-token": TrialPrincipal(trial_id=1, experiment_id=1, allocation_id="trial-1.1"),
    "trial-2-token": TrialPrincipal(trial_id=2, experiment_id=2, allocation_id="trial-2.1"),
}


def _experiment(exp_id: int, state: str = "ACTIVE") -> dict:
    return {
        "id": exp_id,
        "name": f"exp-{exp_id}",
        "description": "",
        "labels": [],
        "state": state,
        "archived": False,
        "progress": 0.0,
        "start_time": "2026-11-22T01:02:03.456Z",
        "end_time": None,
        "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
        "num_trials": 1,
        "best_validation": None,
        "context_hash": None,
        "notebook": None,
        "parent_id": None,
    }


class _FakePart:
    """One typed part of the fake master (`master.views`, `master.runs`, ...): its methods are
    the fake's, recorded under the facade's old names (`ALIASES`) where the part's differ."""

    ALIASES = {
        "open_run": "open_unmanaged_run",
        "heartbeat": "unmanaged_heartbeat",
        "append_logs": "unmanaged_logs",
        "close_run": "close_unmanaged_run",
    }

    def __init__(self, fake: FakeMaster) -> None:
        self._fake = fake

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fake, self.ALIASES.get(name, name))


class FakeMaster:
    """In-memory stand-in for the Master and its typed parts: records calls, answers from
    dicts."""

    def __init__(self) -> None:
        self.user_token = USER_TOKEN
        self.root_dir = "/tmp/fake-root"
        self.cluster_id = "c-1"
        self.events = EventBus()
        self.calls: list[tuple[str, tuple, dict]] = []
        self.experiment_rows = {1: _experiment(1), 2: _experiment(2, "COMPLETED")}
        self.trials = {
            1: {"id": 1, "experiment_id": 1, "state": "ACTIVE", "latest_checkpoint": None},
            2: {"id": 2, "experiment_id": 2, "state": "COMPLETED", "latest_checkpoint": "ck-2"},
            3: {"id": 3, "experiment_id": 1, "state": "ACTIVE", "latest_checkpoint": None},
        }
        self.checkpoint_rows = {
            "ck-1": {"uuid": "ck-1", "trial_id": 1, "experiment_id": 1, "state": "COMPLETED"},
            "ck-2": {"uuid": "ck-2", "trial_id": 2, "experiment_id": 2, "state": "COMPLETED"},
        }
        self.configs = {1: {"searcher": {"name": "single"}}, 2: {"searcher": {"name": "single"}}}
        self.fail_with: Exception | None = None  # raised by the next facade call
        # The users part's settings: everyone reads everything; no JupyterHub.
        self.read_access = "all"
        self.hub = None
        # The parts the handlers call (`master.views.get_trial(...)`): all answered by this fake.
        part = _FakePart(self)
        self.views = self.experiments = self.edits = self.runs = self.reports = part
        self.logs = self.checkpoints = self.unmanaged = self.users = part

    def _record(self, method: str, /, *args: Any, **kwargs: Any) -> None:
        self.calls.append((method, args, kwargs))
        if self.fail_with is not None:
            exc, self.fail_with = self.fail_with, None
            raise exc

    def called(self, name: str) -> list[tuple[tuple, dict]]:
        return [(args, kwargs) for call, args, kwargs in self.calls if call == name]

    def authenticate(self, token: str) -> UserPrincipal | TrialPrincipal | None:
        if token == USER_TOKEN:
            return UserPrincipal()
        return TRIAL_TOKENS.get(token)

    def owner_principal(self) -> UserPrincipal:
        # The users part: the master token's holder, an admin (allowed everything).
        return UserPrincipal()

    def check_may_act(self, principal, kind, key, verb) -> None:
        assert principal.admin  # the only users here: the owner account

    def create_experiment(
        self, config, context, *, activate=True, archived=False, notebook=None, owner_id=1
    ):
        self._record(
            "create_experiment",
            config,
            context,
            activate=activate,
            archived=archived,
            notebook=notebook,
        )
        exp_id = max(self.experiment_rows) + 1
        self.experiment_rows[exp_id] = _experiment(exp_id)
        return self.experiment_rows[exp_id]

    async def read(self, fn, /, *args, **kwargs):
        # The real one runs the view in the store's read pool; the fake's views are in memory.
        return fn(*args, **kwargs)

    async def before_report(self) -> None:
        # The real one waits while reads are in flight (_core/_priority.py); none here.
        return None

    async def submit_experiment(self, config, context, **kwargs):
        # What POST /experiments awaits (the real one checks the context off the loop).
        return self.create_experiment(config, context, **kwargs)

    def list_experiments(self, *, state=None, name=None, archived=None):
        self._record("list_experiments", state=state, name=name, archived=archived)
        return [e for e in self.experiment_rows.values() if state is None or e["state"] == state]

    def _experiment_or_404(self, exp_id: int) -> dict:
        if exp_id not in self.experiment_rows:
            raise errors.NotFound(f"experiment {exp_id} not found")
        return self.experiment_rows[exp_id]

    def get_experiment(self, exp_id):
        self._record("get_experiment", exp_id)
        return self._experiment_or_404(exp_id)

    def get_experiment_config(self, exp_id):
        self._experiment_or_404(exp_id)
        return self.configs[exp_id]

    def get_experiment_context(self, exp_id):
        self._record("get_experiment_context", exp_id)
        return b"\x1f\x8bcontext"

    def experiment_action(self, exp_id, action):
        self._record("experiment_action", exp_id, action)
        experiment = self._experiment_or_404(exp_id)
        if experiment["state"] == "COMPLETED" and action == "activate":
            raise errors.Conflict(f"experiment {exp_id} is COMPLETED and cannot be activated")
        return experiment

    def set_checkpoint_metadata(self, uuid, metadata):
        self._record("set_checkpoint_metadata", uuid, metadata)
        if uuid not in self.checkpoint_rows:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        self.checkpoint_rows[uuid]["metadata"] = metadata
        return self.checkpoint_rows[uuid]

    def delete_checkpoint(self, uuid):
        self._record("delete_checkpoint", uuid)
        if uuid not in self.checkpoint_rows:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        self.checkpoint_rows[uuid]["state"] = "DELETED"
        return self.checkpoint_rows[uuid]

    def patch_experiment(
        self, exp_id, *, name=None, description=None, labels=None, resources=None, notes=None
    ):
        self._record(
            "patch_experiment",
            exp_id,
            name=name,
            description=description,
            labels=labels,
            resources=resources,
            notes=notes,
        )
        experiment = self._experiment_or_404(exp_id)
        given = {"name": name, "description": description, "labels": labels}
        experiment.update({key: value for key, value in given.items() if value is not None})
        return experiment

    def delete_experiment(self, exp_id):
        self._record("delete_experiment", exp_id)
        self._experiment_or_404(exp_id)
        return {"id": exp_id, "deleted_checkpoints": 0, "deleted_trials": 0}

    def list_trials(self, exp_id):
        self._record("list_trials", exp_id)
        self._experiment_or_404(exp_id)
        return [t for t in self.trials.values() if t["experiment_id"] == exp_id]

    def get_trial(self, trial_id):
        self._record("get_trial", trial_id)
        if trial_id not in self.trials:
            raise errors.NotFound(f"trial {trial_id} not found")
        return self.trials[trial_id]

    def kill_trial(self, trial_id):
        self._record("kill_trial", trial_id)
        return self.trials[trial_id]

    def get_metrics(self, *, trial_id=None, experiment_id=None, group=None, after_id=0, limit=None):
        self._record(
            "get_metrics",
            trial_id=trial_id,
            experiment_id=experiment_id,
            group=group,
            after_id=after_id,
            limit=limit,
        )
        return [
            {
                "id": 1,
                "trial_id": 1,
                "trial_run_id": 1,
                "group": "training",
                "steps_completed": 10,
                "metrics": {"loss": 0.5},
                "report_time": "2026-11-22T01:02:03.456Z",
            }
        ]

    def get_metrics_json(self, query):  # what the handlers call: get_metrics as JSON text
        return json.dumps(
            self.get_metrics(
                trial_id=query.trial_id,
                experiment_id=query.experiment_id,
                group=query.group,
                after_id=query.after_id,
                limit=query.limit,
            )
        )

    def get_logs(self, trial_id, *, after_id=0, limit=None, tail=None, rank=None, stream=None):
        self._record(
            "get_logs",
            trial_id,
            after_id=after_id,
            limit=limit,
            tail=tail,
            rank=rank,
            stream=stream,
        )
        return [
            {
                "id": 1,
                "trial_id": trial_id,
                "rank": 0,
                "stream": "stdout",
                "time": "2026-11-22T01:02:03.456Z",
                "line": "hello",
            }
        ]

    def list_checkpoints(self, *, experiment_id=None, trial_id=None, state=None):
        self._record("list_checkpoints", experiment_id=experiment_id, state=state)
        return [c for c in self.checkpoint_rows.values() if c["experiment_id"] == experiment_id]

    def get_checkpoint(self, uuid):
        self._record("get_checkpoint", uuid)
        if uuid not in self.checkpoint_rows:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        return self.checkpoint_rows[uuid]

    def checkpoint_archive(self, uuid):
        self._record("checkpoint_archive", uuid)
        return b"\x1f\x8barchive"

    def resources(self):
        self._record("resources")
        return {
            "slots": [
                {"id": 0, "type": "cpu", "gpu": None, "allocation_id": None, "trial_id": None}
            ],
            "gpus": [],
        }

    def best_validation(self, exp_id):
        self._record("best_validation", exp_id)
        return 0.25 if exp_id == 1 else None

    def check_reportable(self, trial_id):
        self.calls.append(("check_reportable", (trial_id,), {}))

    def report_metrics(self, trial_id, reports):
        self._record("report_metrics", trial_id, reports)
        return len(reports)

    def report_progress(self, trial_id, progress):
        self._record("report_progress", trial_id, progress)

    def set_runner_state(self, trial_id, state):
        self._record("set_runner_state", trial_id, state)

    def report_early_exit(self, trial_id, reason):
        self._record("report_early_exit", trial_id, reason)

    async def next_operation(self, trial_id, timeout):
        self._record("next_operation", trial_id, timeout)
        await asyncio.sleep(0)
        return {"completed": False, "op": {"validateAfter": {"length": "100"}}}

    def complete_operation(self, trial_id, length, metric):
        self._record("complete_operation", trial_id, length, metric)

    async def wait_preemption(self, allocation_id, timeout):
        self._record("wait_preemption", allocation_id, timeout)
        return False

    def ack_preemption(self, allocation_id):
        self._record("ack_preemption", allocation_id)

    async def place_container_checkpoint(self, record):
        pass  # no container trials here

    def report_checkpoint(self, record):
        self._record("report_checkpoint", record)
        return {**record, "experiment_id": 1}

    def mark_checkpoints_deleted(self, items):
        self._record("mark_checkpoints_deleted", items)


@dataclasses.dataclass
class Response:
    status: int
    body: bytes
    headers: Any

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """Drives the in-process server from synchronous tests."""

    def __init__(self, loop: asyncio.AbstractEventLoop, port: int) -> None:
        self.loop = loop
        self.port = port
        self.http = tornado.httpclient.AsyncHTTPClient()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = USER_TOKEN,
        raw: bytes | None = None,
        headers: dict | None = None,
    ) -> Response:
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is None and method in ("POST", "PATCH", "PUT"):
            data = b""
        request = tornado.httpclient.HTTPRequest(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            body=data,
            headers=all_headers,
            request_timeout=30,
            allow_nonstandard_methods=True,
        )
        answer = self.loop.run_until_complete(self.http.fetch(request, raise_error=False))
        return Response(answer.code, answer.body or b"", answer.headers)

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return self.request("POST", path, body, **kwargs)


CONTEXT_LIMIT = 3000  # bytes; the body limit is then ~1 MiB, cheap to exceed in a test


@pytest.fixture
def fake() -> FakeMaster:
    return FakeMaster()


@pytest.fixture
def client(fake: FakeMaster):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    app = tornado.web.Application(make_handlers(fake, "", context_size_limit=CONTEXT_LIMIT))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)

    async def start() -> tornado.httpserver.HTTPServer:
        fake.events.attach(asyncio.get_running_loop())
        server = tornado.httpserver.HTTPServer(app, max_body_size=16 * 1024 * 1024)
        server.add_sockets([sock])
        return server

    server = loop.run_until_complete(start())
    yield Client(loop, sock.getsockname()[1])
    server.stop()
    loop.run_until_complete(server.close_all_connections())
    loop.close()
    asyncio.set_event_loop(None)


# --- OpenAPI --------------------------------------------------------------------------------


def _doc_path_to_tornado(path: str) -> str:
    return re.sub(r"\{\w+\}", "{}", path)


def test_openapi_needs_no_token_and_matches_the_route_table(client: Client) -> None:
    answer = client.get("/api/v1/openapi.json", token=None)
    assert answer.status == 200
    doc = answer.json
    assert doc["openapi"].startswith("3.0")
    documented = {
        (method, path)
        for path, item in doc["paths"].items()
        for method in item
        if method != "parameters"
    }
    declared = {(method, "/api/v1" + route.path) for route in ROUTES for method in route.operations}
    assert documented == declared
    for name in ("Experiment", "Trial", "Metric", "Log", "Checkpoint", "Error"):
        assert name in doc["components"]["schemas"]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    # Every $ref points at a schema that exists.
    refs = set(re.findall(r'"#/components/schemas/(\w+)"', answer.body.decode()))
    assert refs <= set(doc["components"]["schemas"])


def test_openapi_document_is_valid_openapi_3() -> None:
    import openapi_spec_validator

    openapi_spec_validator.validate(build_document(ROUTES, "/lab-base/determined"))


def test_every_declared_method_is_implemented_and_nothing_more() -> None:
    handlers = make_handlers(FakeMaster(), "")
    # make_handlers adds a JSON 404 handler after the routes.
    for (_pattern, handler, kwargs), route in zip(handlers, ROUTES, strict=False):
        assert kwargs["route"] is route
        for method in ("get", "post", "patch", "put", "delete"):
            implemented = getattr(handler, method) is not getattr(
                tornado.web.RequestHandler, method
            )
            assert implemented == (method in route.operations), (route.path, method)


def test_prefix_mounts_every_route_under_it(fake: FakeMaster) -> None:
    handlers = make_handlers(fake, "/lab/determined/")
    assert all(pattern.startswith("/lab/determined/api/v1/") for pattern, _, _ in handlers)


# --- happy paths ----------------------------------------------------------------------------


def test_master_info(client: Client) -> None:
    answer = client.get("/api/v1/master")
    assert answer.status == 200
    assert answer.json == {
        "version": "0.1.0",
        "root_dir": "/tmp/fake-root",
        "cluster_id": "c-1",
        "jupyterlab": False,
    }


def test_create_experiment_decodes_the_context(client: Client, fake: FakeMaster) -> None:
    context = b"\x1f\x8b\x08 fake tarball"
    answer = client.post(
        "/api/v1/experiments",
        {
            "config": "name: x\n",
            "context": base64.b64encode(context).decode(),
            "activate": False,
            "notebook": {"path": "a.ipynb", "cell_ids": ["c1"], "script": "print(1)"},
        },
    )
    assert answer.status == 201
    assert answer.json["experiment"]["id"] == 3
    ((args, kwargs),) = fake.called("create_experiment")
    assert args == ("name: x\n", context)
    assert kwargs == {
        "activate": False,
        "archived": False,
        "notebook": {"path": "a.ipynb", "cell_ids": ["c1"], "script": "print(1)"},
    }


def test_create_experiment_with_object_config_and_no_context(
    client: Client, fake: FakeMaster
) -> None:
    answer = client.post("/api/v1/experiments", {"config": {"name": "x"}, "context": None})
    assert answer.status == 201
    ((args, kwargs),) = fake.called("create_experiment")
    assert args == ({"name": "x"}, None)
    assert kwargs["activate"] is True


def test_list_experiments_passes_filters(client: Client, fake: FakeMaster) -> None:
    answer = client.get("/api/v1/experiments?state=ACTIVE&name=exp&archived=false")
    assert answer.status == 200
    assert [e["id"] for e in answer.json["experiments"]] == [1]
    assert fake.called("list_experiments") == [
        ((), {"state": "ACTIVE", "name": "exp", "archived": False})
    ]


def test_get_experiment_includes_config_and_trials(client: Client) -> None:
    answer = client.get("/api/v1/experiments/1")
    assert answer.status == 200
    assert answer.json["experiment"]["config"] == {"searcher": {"name": "single"}}
    assert [t["id"] for t in answer.json["trials"]] == [1, 3]


def test_experiment_sub_resources(client: Client, fake: FakeMaster) -> None:
    assert [t["id"] for t in client.get("/api/v1/experiments/1/trials").json["trials"]] == [1, 3]
    checkpoints = client.get("/api/v1/experiments/1/checkpoints?state=COMPLETED")
    assert [c["uuid"] for c in checkpoints.json["checkpoints"]] == ["ck-1"]
    assert fake.called("list_checkpoints")[-1][1] == {"experiment_id": 1, "state": "COMPLETED"}
    context = client.get("/api/v1/experiments/1/context")
    assert context.status == 200
    assert context.headers["Content-Type"] == "application/gzip"
    assert context.body == b"\x1f\x8bcontext"
    metrics = client.get("/api/v1/experiments/1/metrics?group=validation")
    assert metrics.json["metrics"][0]["metrics"] == {"loss": 0.5}
    assert fake.called("get_metrics")[-1][1]["experiment_id"] == 1
    assert fake.called("get_metrics")[-1][1]["group"] == "validation"


def test_patch_experiment_passes_the_fields_given(client: Client, fake: FakeMaster) -> None:
    answer = client.request("PATCH", "/api/v1/experiments/1", {"name": "new", "labels": ["a"]})
    assert answer.status == 200
    assert answer.json["experiment"]["name"] == "new"
    assert answer.json["experiment"]["labels"] == ["a"]
    assert fake.called("patch_experiment") == [
        (
            (1,),
            {
                "name": "new",
                "description": None,
                "labels": ["a"],
                "resources": None,
                "notes": None,
            },
        )
    ]
    empty_name = client.request("PATCH", "/api/v1/experiments/1", {"name": ""})
    assert empty_name.status == 400 and "body.name" in empty_name.json["message"]
    bad_labels = client.request("PATCH", "/api/v1/experiments/1", {"labels": "a"})
    assert bad_labels.status == 400 and "body.labels" in bad_labels.json["message"]
    missing = client.request("PATCH", "/api/v1/experiments/99", {"description": "d"})
    assert missing.status == 404 and missing.json["message"] == "experiment 99 not found"


def test_patch_experiment_resources_are_checked_and_passed(
    client: Client, fake: FakeMaster
) -> None:
    answer = client.request(
        "PATCH", "/api/v1/experiments/1", {"resources": {"priority": 7, "max_slots": None}}
    )
    assert answer.status == 200
    assert fake.called("patch_experiment")[-1][1]["resources"] == {
        "priority": 7,
        "max_slots": None,
    }
    too_high = client.request("PATCH", "/api/v1/experiments/1", {"resources": {"priority": 100}})
    assert too_high.status == 400 and "body.resources.priority" in too_high.json["message"]


def test_delete_experiment_answers_what_the_master_deleted(
    client: Client, fake: FakeMaster
) -> None:
    answer = client.request("DELETE", "/api/v1/experiments/1")
    assert answer.status == 200
    assert answer.json == {"id": 1, "deleted_checkpoints": 0, "deleted_trials": 0}
    assert fake.called("delete_experiment") == [((1,), {})]
    missing = client.request("DELETE", "/api/v1/experiments/99")
    assert missing.status == 404 and missing.json["message"] == "experiment 99 not found"


def test_patch_checkpoint_metadata(client: Client, fake: FakeMaster) -> None:
    answer = client.request("PATCH", "/api/v1/checkpoints/ck-1", {"metadata": {"a": 1}})
    assert answer.status == 200 and answer.json["checkpoint"]["metadata"] == {"a": 1}
    assert fake.called("set_checkpoint_metadata") == [(("ck-1", {"a": 1}), {})]
    assert client.request("PATCH", "/api/v1/checkpoints/ck-1", {}).status == 400
    missing = client.request("PATCH", "/api/v1/checkpoints/nope", {"metadata": {}})
    assert missing.status == 404 and missing.json["message"] == "checkpoint nope not found"
    # A trial token may read its experiment's checkpoints, not edit them.
    trial = client.request(
        "PATCH", "/api/v1/checkpoints/ck-1", {"metadata": {}}, token="trial-1-token"
    )
    assert trial.status == 403


def test_delete_checkpoint(client: Client, fake: FakeMaster) -> None:
    answer = client.request("DELETE", "/api/v1/checkpoints/ck-1")
    assert answer.status == 200 and answer.json["checkpoint"]["state"] == "DELETED"
    assert fake.called("delete_checkpoint") == [(("ck-1",), {})]
    assert client.request("DELETE", "/api/v1/checkpoints/nope").status == 404
    assert client.request("DELETE", "/api/v1/checkpoints/ck-1", token="trial-1-token").status == 403


@pytest.mark.parametrize("action", ["pause", "activate", "cancel", "kill", "archive", "unarchive"])
def test_experiment_actions(client: Client, fake: FakeMaster, action: str) -> None:
    answer = client.post(f"/api/v1/experiments/1/{action}")
    assert answer.status == 200
    assert answer.json["experiment"]["id"] == 1
    assert fake.called("experiment_action") == [((1, action), {})]


def test_trial_reads_and_kill(client: Client, fake: FakeMaster) -> None:
    assert client.get("/api/v1/trials/1").json["trial"]["id"] == 1
    assert client.post("/api/v1/trials/3/kill").json["trial"]["id"] == 3
    assert fake.called("kill_trial") == [((3,), {})]
    client.get("/api/v1/trials/1/metrics?group=training&after_id=5&limit=10")
    assert fake.called("get_metrics")[-1][1] == {
        "trial_id": 1,
        "experiment_id": None,
        "group": "training",
        "after_id": 5,
        "limit": 10,
    }
    logs = client.get("/api/v1/trials/1/logs?tail=20&rank=0&stream=stdout")
    assert logs.json["logs"][0]["line"] == "hello"
    assert fake.called("get_logs")[-1] == (
        (1,),
        {"after_id": 0, "limit": None, "tail": 20, "rank": 0, "stream": "stdout"},
    )


def test_checkpoint_endpoints(client: Client, fake: FakeMaster) -> None:
    assert client.get("/api/v1/checkpoints/ck-1").json["checkpoint"]["uuid"] == "ck-1"
    download = client.get("/api/v1/checkpoints/ck-1/download")
    assert download.headers["Content-Type"] == "application/gzip"
    assert download.body == b"\x1f\x8barchive"
    answer = client.request(
        "PATCH", "/api/v1/checkpoints", {"checkpoints": [{"uuid": "ck-1", "resources": {}}]}
    )
    assert answer.status == 200
    assert fake.called("mark_checkpoints_deleted") == [(([{"uuid": "ck-1", "resources": {}}],), {})]


def test_resources(client: Client) -> None:
    assert client.get("/api/v1/resources").json["slots"][0]["type"] == "cpu"


# --- trial-facing endpoints with the trial's own token ---------------------------------------

TRIAL_1 = "trial-1-token"


def test_determined_metric_form_is_normalised(client: Client, fake: FakeMaster) -> None:
    answer = client.post(
        "/api/v1/trials/1/metrics",
        {
            "group": "validation",
            "metrics": {
                "trialId": 1,
                "trialRunId": 2,
                "stepsCompleted": 100,
                "reportTime": "2026-11-22T01:02:03Z",
                "metrics": {"avgMetrics": {"loss": 0.1}, "batchMetrics": [{"loss": 0.2}]},
            },
        },
        token=TRIAL_1,
    )
    assert answer.status == 200
    assert answer.json == {"accepted": 1}
    assert fake.called("report_metrics") == [
        (
            (
                1,
                [
                    {
                        "group": "validation",
                        "steps_completed": 100,
                        "metrics": {"loss": 0.1},
                        "batch_metrics": [{"loss": 0.2}],
                        "report_time": "2026-11-22T01:02:03Z",
                        "trial_run_id": 2,
                    }
                ],
            ),
            {},
        )
    ]


def test_batch_metric_form_is_passed_through(client: Client, fake: FakeMaster) -> None:
    reports = [
        {"group": "training", "steps_completed": 10, "metrics": {"loss": 1.0}},
        {"group": "training", "steps_completed": 20, "metrics": {"loss": 0.9}},
    ]
    answer = client.post("/api/v1/trials/1/metrics", {"reports": reports}, token=TRIAL_1)
    assert answer.json == {"accepted": 2}
    assert fake.called("report_metrics") == [((1, reports), {})]


def test_metric_form_with_another_trial_id_in_the_body_is_rejected(client: Client) -> None:
    answer = client.post(
        "/api/v1/trials/1/metrics",
        {"group": "training", "metrics": {"trialId": 3, "stepsCompleted": 1, "metrics": {}}},
        token=TRIAL_1,
    )
    assert answer.status == 400
    assert "trialId" in answer.json["message"]


def test_trial_reports(client: Client, fake: FakeMaster) -> None:
    assert (
        client.post(
            "/api/v1/trials/1/progress", {"progress": 0.5, "is_raw": True}, token=TRIAL_1
        ).json
        == {}
    )
    assert (
        client.post("/api/v1/trials/1/runner/metadata", {"state": "training"}, token=TRIAL_1).status
        == 200
    )
    assert (
        client.post(
            "/api/v1/trials/1/early_exit", {"reason": "EXITED_REASON_INVALID_HP"}, token=TRIAL_1
        ).status
        == 200
    )
    assert (
        client.post(
            "/api/v1/trials/1/searcher/completed_operation",
            {"op": {"length": "100"}, "searcherMetric": 0.3},
            token=TRIAL_1,
        ).status
        == 200
    )
    assert fake.called("report_progress") == [((1, 0.5), {})]
    assert fake.called("set_runner_state") == [((1, "training"), {})]
    assert fake.called("report_early_exit") == [((1, "EXITED_REASON_INVALID_HP"), {})]
    assert fake.called("complete_operation") == [((1, 100, 0.3), {})]


def test_long_polls_pass_the_timeout(client: Client, fake: FakeMaster) -> None:
    op = client.get("/api/v1/trials/1/searcher/operation?timeout_seconds=5", token=TRIAL_1)
    assert op.json == {"completed": False, "op": {"validateAfter": {"length": "100"}}}
    assert fake.called("next_operation") == [((1, 5.0), {})]
    preempt = client.get("/api/v1/allocations/trial-1.1/signals/preemption", token=TRIAL_1)
    assert preempt.json == {"preempt": False}
    assert fake.called("wait_preemption") == [(("trial-1.1", 60.0), {})]
    ack = client.post("/api/v1/allocations/trial-1.1/signals/ack_preemption", token=TRIAL_1)
    assert ack.status == 200
    assert fake.called("ack_preemption") == [(("trial-1.1",), {})]


def test_best_validation(client: Client) -> None:
    answer = client.get(
        "/api/v1/experiments/1/searcher/best_searcher_validation_metric", token=TRIAL_1
    )
    assert answer.json == {"metric": 0.25}
    none_yet = client.get("/api/v1/experiments/2/searcher/best_searcher_validation_metric")
    assert none_yet.status == 404


def test_checkpoint_report_accepts_trial_id_or_task_id(client: Client, fake: FakeMaster) -> None:
    body = {
        "uuid": "new-1",
        "allocationId": "trial-1.1",
        "trialId": 1,
        "metadata": {"steps_completed": 5},
        "resources": {"model.pt": 10},
        "reportTime": "2026-11-22T01:02:03Z",
        "state": "COMPLETED",
    }
    answer = client.post("/api/v1/checkpoints", body, token=TRIAL_1)
    assert answer.status == 200
    assert answer.json["checkpoint"]["uuid"] == "new-1"
    del body["trialId"]
    body["taskId"] = "trial-1"
    body["resources"] = {"model.pt": "10"}  # Determined's int64-as-string
    assert client.post("/api/v1/checkpoints", body, token=TRIAL_1).status == 200
    records = [args[0] for args, _ in fake.called("report_checkpoint")]
    assert [r["trial_id"] for r in records] == [1, 1]
    assert records[0]["resources"] == records[1]["resources"] == {"model.pt": 10}
    assert records[0]["allocation_id"] == "trial-1.1"


# --- authentication and trial scopes -------------------------------------------------------


def test_missing_token_is_401(client: Client) -> None:
    answer = client.get("/api/v1/experiments", token=None)
    assert answer.status == 401
    assert "token" in answer.json["message"]


def test_wrong_token_is_401(client: Client) -> None:
    answer = client.get("/api/v1/experiments", token="nope")
    assert answer.status == 401
    assert "invalid token" in answer.json["message"]


def test_token_query_parameter_is_accepted(client: Client) -> None:
    assert client.get(f"/api/v1/experiments?token={USER_TOKEN}", token=None).status == 200


def test_trial_token_on_another_trial_names_both_ids(client: Client, fake: FakeMaster) -> None:
    answer = client.post("/api/v1/trials/3/progress", {"progress": 0.5}, token=TRIAL_1)
    assert answer.status == 403
    assert answer.json["message"] == "trial token of trial 1 may not access trial 3"
    assert fake.called("report_progress") == []


def test_trial_token_on_another_allocation_or_experiment(client: Client) -> None:
    preempt = client.get("/api/v1/allocations/trial-2.1/signals/preemption", token=TRIAL_1)
    assert preempt.status == 403
    assert "trial-1.1" in preempt.json["message"] and "trial-2.1" in preempt.json["message"]
    best = client.get(
        "/api/v1/experiments/2/searcher/best_searcher_validation_metric", token=TRIAL_1
    )
    assert best.status == 403
    assert "experiment 1" in best.json["message"] and "experiment 2" in best.json["message"]


def test_trial_token_checkpoint_scopes(client: Client, fake: FakeMaster) -> None:
    assert client.get("/api/v1/checkpoints/ck-1", token=TRIAL_1).status == 200
    other = client.get("/api/v1/checkpoints/ck-2", token=TRIAL_1)
    assert other.status == 403
    assert "ck-2" in other.json["message"]
    # A warm-start source from another experiment is readable.
    fake.configs[1] = {"searcher": {"name": "single", "source_checkpoint_uuid": "ck-2"}}
    assert client.get("/api/v1/checkpoints/ck-2", token=TRIAL_1).status == 200
    report = client.post(
        "/api/v1/checkpoints",
        {"uuid": "x", "trialId": 3, "metadata": {}, "resources": {}},
        token=TRIAL_1,
    )
    assert report.status == 403
    assert report.json["message"] == "trial token of trial 1 may not report a checkpoint of trial 3"
    delete = client.request(
        "PATCH", "/api/v1/checkpoints", {"checkpoints": [{"uuid": "ck-2"}]}, token=TRIAL_1
    )
    assert delete.status == 403
    assert fake.called("report_checkpoint") == [] and fake.called("mark_checkpoints_deleted") == []


def _concrete_path(route_path: str, principal: TrialPrincipal) -> str:
    """The route's path filled with the principal's own ids, so only the scope decides."""
    values = {
        "experiment_id": principal.experiment_id,
        "trial_id": principal.trial_id,
        "allocation_id": principal.allocation_id,
        "uuid": "ck-1",
        "action": "archive"
        if route_path.startswith(("/models/", "/workspaces/", "/projects/"))
        else "pause",
        "model": "m",
        "version": 1,
        "tensorboard_id": "0f0e0d0c-0000-4000-8000-000000000000",
        "user_id": 1,
        "username": "alice",
        "workspace_id": 1,
        "project_id": 1,
    }
    return "/api/v1" + re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), route_path)


def test_auth_matrix_trial_token_only_reaches_trial_scoped_operations(client: Client) -> None:
    principal = TRIAL_TOKENS[TRIAL_1]
    for route in ROUTES:
        for method, operation in route.operations.items():
            if not operation.auth or route.path == "/events":
                continue
            answer = client.request(
                method.upper(), _concrete_path(route.path, principal), {}, token=TRIAL_1
            )
            if operation.trial_scope is None:
                assert answer.status == 403, (method, route.path)
                assert "needs the user token" in answer.json["message"]
            else:
                assert answer.status != 403 and answer.status != 401, (method, route.path)
            unauthenticated = client.request(
                method.upper(), _concrete_path(route.path, principal), {}, token=None
            )
            assert unauthenticated.status == 401, (method, route.path)


def test_trial_scoped_operations_are_the_documented_ones() -> None:
    scoped = {
        (method.upper(), route.path): operation.trial_scope
        for route in ROUTES
        for method, operation in route.operations.items()
        if operation.trial_scope
    }
    assert scoped == {
        ("POST", "/trials/{trial_id}/metrics"): TrialScope.TRIAL,
        ("POST", "/trials/{trial_id}/progress"): TrialScope.TRIAL,
        ("POST", "/trials/{trial_id}/runner/metadata"): TrialScope.TRIAL,
        ("POST", "/trials/{trial_id}/early_exit"): TrialScope.TRIAL,
        ("GET", "/trials/{trial_id}/searcher/operation"): TrialScope.TRIAL,
        ("POST", "/trials/{trial_id}/searcher/completed_operation"): TrialScope.TRIAL,
        (
            "GET",
            "/experiments/{experiment_id}/searcher/best_searcher_validation_metric",
        ): TrialScope.EXPERIMENT,
        ("GET", "/allocations/{allocation_id}/signals/preemption"): TrialScope.ALLOCATION,
        ("POST", "/allocations/{allocation_id}/signals/ack_preemption"): TrialScope.ALLOCATION,
        ("POST", "/checkpoints"): TrialScope.CHECKPOINT_REPORT,
        ("PATCH", "/checkpoints"): TrialScope.CHECKPOINT_DELETE,
        ("GET", "/checkpoints/{uuid}"): TrialScope.CHECKPOINT_READ,
        ("GET", "/checkpoints/{uuid}/model_versions"): TrialScope.CHECKPOINT_READ,
        # An unmanaged run's kernel (core_v2), with its trial's token (docs/rest-api.md).
        ("POST", "/unmanaged/trials/{trial_id}/heartbeat"): TrialScope.TRIAL,
        ("POST", "/unmanaged/trials/{trial_id}/logs"): TrialScope.TRIAL,
        ("POST", "/unmanaged/trials/{trial_id}/close"): TrialScope.TRIAL,
    }


# --- errors ---------------------------------------------------------------------------------


def test_malformed_json_is_400(client: Client) -> None:
    answer = client.post("/api/v1/experiments", raw=b"{not json")
    assert answer.status == 400
    assert "not valid JSON" in answer.json["message"]


def test_wrong_field_type_names_the_field(client: Client) -> None:
    answer = client.post("/api/v1/trials/1/progress", {"progress": "half"}, token=TRIAL_1)
    assert answer.status == 400
    assert answer.json["message"].startswith("invalid request body: body.progress:")
    missing = client.post("/api/v1/experiments", {"context": None})
    assert missing.status == 400
    assert "'config' is a required property" in missing.json["message"]


def test_bad_base64_context_is_400(client: Client) -> None:
    answer = client.post("/api/v1/experiments", {"config": "a: 1", "context": "!!!"})
    assert answer.status == 400
    assert answer.json["message"].startswith("body.context: not valid base64")


def test_bad_query_parameter_is_400(client: Client) -> None:
    answer = client.get("/api/v1/trials/1/logs?after_id=abc")
    assert answer.status == 400
    assert answer.json["message"] == "query parameter after_id: expected an integer, got 'abc'"
    enum = client.get("/api/v1/events?types=trial,bogus")
    assert enum.status == 400
    assert "bogus" in enum.json["message"]


def test_invalid_request_keeps_every_error(client: Client, fake: FakeMaster) -> None:
    fake.fail_with = errors.InvalidRequest(
        "invalid experiment config: 2 errors",
        ["searcher.max_trials: required", "hyperparameters.lr.minval: must be a number"],
    )
    answer = client.post("/api/v1/experiments", {"config": "x: 1"})
    assert answer.status == 400
    assert answer.json == {
        "message": "invalid experiment config: 2 errors",
        "errors": ["searcher.max_trials: required", "hyperparameters.lr.minval: must be a number"],
    }


def test_not_found(client: Client) -> None:
    answer = client.get("/api/v1/experiments/99")
    assert answer.status == 404
    assert answer.json == {"message": "experiment 99 not found"}
    unknown = client.get("/api/v1/no/such/thing")
    assert unknown.status == 404
    assert "no endpoint GET /api/v1/no/such/thing" in unknown.json["message"]


def test_method_not_allowed_is_json(client: Client) -> None:
    answer = client.request("DELETE", "/api/v1/experiments")
    assert answer.status == 405
    assert answer.json["message"] == "DELETE is not allowed on /api/v1/experiments; use GET, POST"


def test_conflict(client: Client) -> None:
    answer = client.post("/api/v1/experiments/2/activate")
    assert answer.status == 409
    assert "COMPLETED" in answer.json["message"]


def test_too_large_from_the_facade(client: Client, fake: FakeMaster) -> None:
    fake.fail_with = errors.TooLarge("context is 120 MiB, over the 96 MiB limit")
    answer = client.post("/api/v1/experiments", {"config": "a: 1"})
    assert answer.status == 413
    assert "96 MiB" in answer.json["message"]


def test_body_over_the_limit_is_413_naming_the_limit(client: Client, fake: FakeMaster) -> None:
    big = base64.b64encode(b"\0" * (1024 * 1024)).decode()
    answer = client.post("/api/v1/experiments", {"config": "a: 1", "context": big})
    assert answer.status == 413
    assert "exceeds the limit of" in answer.json["message"]
    assert fake.called("create_experiment") == []


def test_unexpected_error_is_500_without_the_traceback(
    client: Client, fake: FakeMaster, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail_with = RuntimeError("database exploded at /secret/path")
    with caplog.at_level(logging.ERROR):
        answer = client.get("/api/v1/resources")
    assert answer.status == 500
    assert answer.json == {
        "message": "internal error in master_lite; the master's log has the details"
    }
    assert "database exploded" in caplog.text  # the traceback went to the log


def test_a_closed_store_is_a_clean_503_master_stopping(
    client: Client, fake: FakeMaster, caplog: pytest.LogCaptureFixture
) -> None:
    """A request that arrives while (or after) the master stops: 503 and what is going on,
    never the internal 500 of a closed store (issue 28 item 1)."""
    from master_lite.errors import MASTER_STOPPING_MESSAGE, MasterStopping

    fake.fail_with = MasterStopping(MASTER_STOPPING_MESSAGE)
    with caplog.at_level(logging.ERROR):
        answer = client.get("/api/v1/resources")
    assert answer.status == 503
    assert answer.json["message"].startswith("the master is stopping")
    assert "Traceback" not in caplog.text


# --- server-sent events ---------------------------------------------------------------------


def test_events_stream_a_published_event_and_unsubscribe_on_disconnect(
    client: Client, fake: FakeMaster, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
        writer.write(
            f"GET /api/v1/events?experiment_id=1&types=trial,metric&token={USER_TOKEN}"
            " HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
        )
        await writer.drain()
        received = b""
        while b": connected" not in received:
            received += await asyncio.wait_for(reader.read(4096), 10)
        assert b"text/event-stream" in received
        fake.events.publish("trial", {"id": 7, "experiment_id": 2, "state": "ACTIVE"})  # filtered
        fake.events.publish("log", {"id": 1, "trial_id": 1, "experiment_id": 1})  # filtered
        fake.events.publish("trial", {"id": 1, "experiment_id": 1, "state": "COMPLETED"})
        while b"COMPLETED" not in received:
            received += await asyncio.wait_for(reader.read(4096), 10)
        assert len(fake.events._subscriptions) == 1
        writer.close()
        for _ in range(200):
            if not fake.events._subscriptions:
                break
            await asyncio.sleep(0.02)
        return received.decode()

    with caplog.at_level(logging.INFO, logger="tornado.access"):
        text = client.loop.run_until_complete(scenario())
    assert "GET /api/v1/events" in caplog.text
    assert USER_TOKEN not in caplog.text  # the access log redacts ?token=
    assert (
        'event: trial\ndata: {"id": 1, "experiment_id": 1, "state": "COMPLETED"}\n\n'
        in text.replace("\r\n", "\n")
    )
    assert '"id": 7' not in text and "event: log" not in text
    assert fake.events._subscriptions == []


def test_events_send_keepalive_comments(
    client: Client, fake: FakeMaster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from master_lite.api._events import EventsHandler

    monkeypatch.setattr(EventsHandler, "KEEPALIVE_SECONDS", 0.05)

    async def scenario() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", client.port)
        writer.write(
            f"GET /api/v1/events HTTP/1.1\r\nHost: localhost\r\n"
            f"Authorization: Bearer {USER_TOKEN}\r\n\r\n".encode()
        )
        received = b""
        while b": keepalive" not in received:
            received += await asyncio.wait_for(reader.read(4096), 10)
        writer.close()
        return received

    assert b": keepalive\n\n" in client.loop.run_until_complete(scenario())


def test_events_need_a_token(client: Client) -> None:
    assert client.get("/api/v1/events", token=None).status == 401


# --- mounted inside jupyter_server -----------------------------------------------------------


def test_handlers_mount_inside_jupyter_server(
    fake: FakeMaster, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same handlers on jupyter's APIHandler: Jupyter's user via `user_auth`, trial tokens as
    standalone (no XSRF cookie needed), anything else refused."""
    from jupyter_server.base.handlers import APIHandler
    from jupyter_server.serverapp import ServerApp
    from jupyter_server.utils import url_path_join

    for name in ("JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        serverapp = ServerApp()
        serverapp.initialize(
            argv=[
                "--ServerApp.token=jupyter-token",
                f"--ServerApp.root_dir={tmp_path}",
                "--ServerApp.base_url=/lab-base/",
            ],
            find_extensions=False,
            new_httpserver=False,
        )
        prefix = url_path_join(serverapp.base_url, "determined")
        serverapp.web_app.add_handlers(
            ".*$",
            make_handlers(
                fake,
                prefix,
                base_handler=APIHandler,
                user_auth=lambda handler, action: handler.current_user is not None,
            ),
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        server = tornado.httpserver.HTTPServer(serverapp.web_app)
        server.add_sockets([sock])
        client = Client(loop, sock.getsockname()[1])
        root = "/lab-base/determined/api/v1"

        as_user = client.get(
            root + "/experiments", token=None, headers={"Authorization": "token jupyter-token"}
        )
        assert as_user.status == 200
        assert [e["id"] for e in as_user.json["experiments"]] == [1, 2]
        as_trial = client.post(root + "/trials/1/progress", {"progress": 0.25}, token=TRIAL_1)
        assert as_trial.status == 200, as_trial.body
        assert fake.called("report_progress") == [((1, 0.25), {})]
        context = client.get(root + "/experiments/1/context", token=USER_TOKEN)
        assert context.headers["Content-Type"] == "application/gzip"
        assert context.body == b"\x1f\x8bcontext"
        assert client.get(root + "/experiments", token=None).status == 401
        assert client.get(root + "/experiments", token=TRIAL_1).status == 403
        assert client.get(root + "/openapi.json", token=None).json["servers"] == [
            {"url": "/lab-base/determined"}
        ]
        server.stop()
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def test_metric_body_errors_point_inside_the_report(client: Client) -> None:
    reports = [{"group": "training", "steps_completed": "ten", "metrics": {"loss": 1.0}}] * 50
    answer = client.post("/api/v1/trials/1/metrics", {"reports": reports}, token=TRIAL_1)
    assert answer.status == 400
    assert answer.json["message"] == (
        "invalid request body: body.reports[0].steps_completed: 'ten' is not of type 'integer'"
    )
    assert all(len(line) <= 300 for line in answer.json["errors"])
