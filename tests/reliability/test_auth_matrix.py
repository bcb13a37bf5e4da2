"""Every endpoint of the route table x every kind of caller: the allowed set, exactly.

Callers: no token, a wrong token, the user token, the trial token of the trial the request is
about ("own"), and the trial token of a trial of another experiment ("foreign"). The expected
answer is derived from `master_lite.api.ROUTES` (each operation's `auth` and `trial_scope`), so
a route added to the table is checked without editing this test:

* no token / wrong token: 401, except operations declared `auth=False` (answered normally);
* user token: never 401/403;
* own trial token: never 401/403 when the operation has a `trial_scope`, 403 when it has none;
* foreign trial token: 403 everywhere (every scope points at the first trial's resources).

"Answered normally" means any status except 401/403 and never 5xx: a 400 for the deliberately
empty bodies of user-only operations still proves the request got past authentication, since
the pipeline authenticates before it parses the body (docs/rest-api.md).
"""

from __future__ import annotations

import json
import pathlib
import uuid as uuid_module

import pytest
import requests

from master_lite.api import ROUTES, TrialScope
from tests._support import MasterProcess, context_tarball, wait_for_experiment, wait_until

pytestmark = pytest.mark.slow

# Writes its identity and a real checkpoint, then idles until the test is done.
TOKEN_SCRIPT = """
import json, os, pathlib, time
import determined as det

info = det.get_cluster_info()
out = pathlib.Path(os.environ["AUTH_OUT"])
with det.core.init() as core:
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, ckpt):
        (path / "weights").write_text("w")
    identity = {"token": os.environ["DET_SESSION_TOKEN"], "trial_id": info.trial.trial_id,
                "experiment_id": info.trial.experiment_id,
                "allocation_id": os.environ["DET_ALLOCATION_ID"], "checkpoint": ckpt}
    (out / "tmp.json").write_text(json.dumps(identity))
    (out / "tmp.json").rename(out / f"trial-{info.trial.trial_id}.json")
    while not (out / "stop").exists():
        time.sleep(0.1)
"""

PRINCIPALS = ("none", "wrong", "user", "own", "foreign")
DESTRUCTIVE = {
    ("post", "/trials/{trial_id}/kill"),
    ("post", "/experiments/{experiment_id}/{action}"),
}


def _idle_trial(master: MasterProcess, out: pathlib.Path, name: str) -> dict:
    config = {
        "name": name,
        "entrypoint": "python3 idle.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "environment": {"environment_variables": [f"AUTH_OUT={out}"]},
    }
    exp_id = master.create_experiment(config, context_tarball({"idle.py": TOKEN_SCRIPT}))
    trial_id = wait_until(lambda: [t["id"] for t in master.trials(exp_id)], 60, "a trial")[0]
    path = out / f"trial-{trial_id}.json"
    wait_until(path.exists, 120, f"trial {trial_id} to write its token")
    return json.loads(path.read_text())


def _request_for(method: str, path_template: str, operation, own: dict) -> tuple[str, dict]:
    """A concrete path and request kwargs that pass every scope check for `own`'s token."""
    values = {
        "experiment_id": own["experiment_id"],
        "trial_id": own["trial_id"],
        "allocation_id": own["allocation_id"],
        "uuid": own["checkpoint"],
        "action": "unarchive",
        "tensorboard_id": "0f0e0d0c-0000-4000-8000-000000000000",
        "model": "auth-model",  # none such: a user's call is answered 404, past auth
        "version": 1,
        "user_id": 1,  # the owner account (the user token's): no one else's account
        "username": "auth-user",  # none such: 404, past auth
        "workspace_id": 999,  # none such: 404, past auth (the defaults are not to be deleted)
        "project_id": 999,
    }
    path = path_template.format(**values)
    kwargs: dict = {"params": {}}
    if any(p.name == "timeout_seconds" for p in operation.query):
        kwargs["params"]["timeout_seconds"] = 0
    if operation.trial_scope is TrialScope.CHECKPOINT_REPORT:
        kwargs["json"] = {
            "uuid": str(uuid_module.uuid4()),
            "trialId": own["trial_id"],
            "allocationId": own["allocation_id"],
            "metadata": {"steps_completed": 1},
            "resources": {},
            "state": "COMPLETED",
        }
    elif operation.trial_scope is TrialScope.CHECKPOINT_DELETE:
        # A spare checkpoint of `own`'s experiment (registered by the test), so the real one
        # stays readable for the other operations.
        kwargs["json"] = {"checkpoints": [{"uuid": own["spare_checkpoint"], "resources": {}}]}
    elif operation.request is not None:
        kwargs["json"] = {}  # invalid for most: 400 after authentication
    if path_template == "/events":
        kwargs["stream"] = True
    return path, kwargs


def _expected_allowed(operation, principal: str) -> bool:
    if not operation.auth:
        return True
    if principal in ("none", "wrong"):
        return False
    if principal == "user":
        return True
    if principal == "own":
        return operation.trial_scope is not None
    return False  # foreign


def test_every_endpoint_allows_exactly_the_declared_callers(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with MasterProcess(tmp_path / "root", cpu_slots=2) as master:
        own = _idle_trial(master, out, "auth-own")
        foreign = _idle_trial(master, out, "auth-foreign")
        own["spare_checkpoint"] = master.session.post(
            "/checkpoints",
            {
                "uuid": str(uuid_module.uuid4()),
                "trialId": own["trial_id"],
                "allocationId": own["allocation_id"],
                "metadata": {"steps_completed": 1},
                "resources": {},
                "state": "COMPLETED",
            },
        )["checkpoint"]["uuid"]
        tokens = {
            "none": None,
            "wrong": "not-a-token",
            "user": master.token,
            "own": own["token"],
            "foreign": foreign["token"],
        }
        operations = [
            (route.path, method, operation)
            for route in ROUTES
            for method, operation in route.operations.items()
        ]
        assert len(operations) >= 25, "the route table shrank: is ROUTES still the whole API?"
        # Destructive user calls last, so every other check sees live trials.
        operations.sort(key=lambda item: (item[1], item[0]) in DESTRUCTIVE)
        mismatches = []
        for path_template, method, operation in operations:
            # A destructive call by the user token ends the trial run, which revokes the
            # trial tokens: ask every other caller first.
            principals = (
                sorted(PRINCIPALS, key=lambda p: p == "user")
                if (method, path_template) in DESTRUCTIVE
                else PRINCIPALS
            )
            for principal in principals:
                path, kwargs = _request_for(method, path_template, operation, own)
                headers = (
                    {"Authorization": f"Bearer {tokens[principal]}"} if tokens[principal] else {}
                )
                response = requests.request(
                    method.upper(),
                    f"{master.url}/api/v1{path}",
                    headers=headers,
                    timeout=30,
                    **kwargs,
                )
                status = response.status_code
                message = (
                    ""
                    if status == 200 and kwargs.get("stream")
                    else response.json().get("message", "")
                    if status >= 400
                    else ""
                )
                response.close()
                allowed = status not in (401, 403)
                if status >= 500:
                    mismatches.append(f"{method.upper()} {path} as {principal}: {status}")
                elif allowed != _expected_allowed(operation, principal):
                    mismatches.append(
                        f"{method.upper()} {path} as {principal}: {status} "
                        f"(expected {'allowed' if not allowed else 'refused'})"
                    )
                elif not allowed and principal in ("none", "wrong"):
                    assert status == 401, (path, principal, status)
                elif not allowed and (method, path_template) in DESTRUCTIVE:
                    # An earlier destructive call may have ended the run and revoked its token
                    # (401 instead of 403): refused either way, which is what matters here.
                    assert message, (path, principal, status)
                elif not allowed:
                    assert status == 403 and message, (path, principal, status)
        (out / "stop").write_text("")
        for identity in (own, foreign):
            wait_for_experiment(master, identity["experiment_id"])
    assert not mismatches, "\n".join(mismatches)


def test_openapi_document_publishes_the_trial_scopes(tmp_path: pathlib.Path) -> None:
    with MasterProcess(tmp_path / "root", cpu_slots=1) as master:
        document = requests.get(f"{master.url}/api/v1/openapi.json", timeout=30).json()
    for route in ROUTES:
        for method, operation in route.operations.items():
            published = document["paths"]["/api/v1" + route.path][method].get("x-trial-scope")
            expected = operation.trial_scope.value if operation.trial_scope else None
            assert published == expected, (route.path, method, published)
