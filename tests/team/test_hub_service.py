"""The shared master as a JupyterHub service, with a real JupyterHub and configurable-http-proxy
(docs/team.md, "The shared master as a JupyterHub service").

One Hub (tests/_support/hub.py) runs `master-lite --jupyterhub` as its managed service
`determined`; every call goes through the Hub's proxy to `<hub>/services/determined/api/v1/`
with a Hub user's API token (as a program in a user's server would), or with the service's
OAuth cookie (as a browser would).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import requests

from tests._support import MasterProcess, context_tarball, wait_for_experiment
from tests._support.hub import ADMIN_GROUP, HubProcess
from tests._support.process import child_env
from tests._support.waiting import wait_until

pytestmark = pytest.mark.slow

# The trial prints which Hub variables it was given (none may reach it).
TRAIN = """
import os
names = sorted(n for n in os.environ if n.startswith(("JUPYTERHUB_", "JPY_")))
print("hub variables:", ",".join(names) or "none")
"""
CONFIG = {
    "name": "hub-trivial",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with HubProcess(
        tmp_path_factory.mktemp("hub"),
        users=["hub_alice", "hub_bob", "hub_carol", "hub_dave"],
        admins_group=["hub_admin"],
        hub_admins=["hub_root"],
        # These Hub users have no Unix accounts: their trials run as the master's own account
        # here (a service run as root would run them as their owners: tests/team/test_team_e2e.py).
        service_environment={"MASTER_LITE_RUN_TRIALS_AS": "master"},
    ) as process:
        yield process


@pytest.fixture(scope="module")
def tokens(hub):
    names = ("hub_alice", "hub_bob", "hub_carol", "hub_admin", "hub_root")
    return {name: hub.new_token(name) for name in names}


def create(hub: HubProcess, token: str, *, activate: bool) -> requests.Response:
    body = {"config": CONFIG, "context": context_tarball({"train.py": TRAIN}), "activate": activate}
    return hub.api("POST", "/experiments", token, body)


def state_of(hub: HubProcess, token: str, exp_id: int) -> str:
    answer = hub.api("GET", f"/experiments/{exp_id}", token)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["experiment"]["state"])


def message(answer: requests.Response) -> str:
    assert answer.headers["Content-Type"].startswith("application/json"), answer.headers
    return str(answer.json()["message"])


def test_a_hub_user_owns_what_they_create_and_their_trial_runs_through_the_service(hub, tokens):
    created = create(hub, tokens["hub_alice"], activate=True)
    assert created.status_code == 201, created.text
    experiment = created.json()["experiment"]
    assert experiment["username"] == "hub_alice"
    me = hub.api("GET", "/me", tokens["hub_alice"]).json()["user"]
    assert me["username"] == "hub_alice" and me["admin"] is False
    assert experiment["userId"] == me["id"]

    # The trial reports to the master under the service's prefix, and gets no Hub variable.
    session = _session_for(hub, tokens["hub_alice"])
    wait_for_experiment(session, experiment["id"], {"COMPLETED"})
    trial = hub.api("GET", f"/experiments/{experiment['id']}/trials", tokens["hub_alice"])
    trial_id = trial.json()["trials"][0]["id"]
    logs = hub.api("GET", f"/trials/{trial_id}/logs", tokens["hub_alice"]).json()["logs"]
    assert "hub variables: none" in "".join(entry["line"] for entry in logs)


def test_another_users_kill_is_refused_naming_the_owner_and_an_admin_may(hub, tokens):
    exp_id = create(hub, tokens["hub_alice"], activate=False).json()["experiment"]["id"]
    before = state_of(hub, tokens["hub_alice"], exp_id)

    refused = hub.api("POST", f"/experiments/{exp_id}/kill", tokens["hub_bob"])
    assert refused.status_code == 403
    assert "hub_alice" in message(refused) and "kill" in message(refused)
    assert state_of(hub, tokens["hub_bob"], exp_id) == before  # nothing changed

    for admin in ("hub_admin", "hub_root"):  # the group determined-admins, a Hub admin
        assert hub.api("GET", "/me", tokens[admin]).json()["user"]["admin"] is True
    killed = hub.api("POST", f"/experiments/{exp_id}/kill", tokens["hub_admin"])
    assert killed.status_code == 200, killed.text
    wait_until(
        lambda: state_of(hub, tokens["hub_alice"], exp_id) == "CANCELED",
        60,
        "the admin's kill to cancel the experiment",
    )


def test_no_token_or_an_unknown_one_is_a_401_json_answer_never_a_redirect(hub):
    for token in (None, "garbage", "session.not-a-session"):
        answer = hub.api("GET", "/experiments", token)
        assert answer.status_code == 401, (token, answer.text)
        assert "Location" not in answer.headers
        text = message(answer)
        assert ("missing token" if token is None else "invalid token") in text
    assert "sign in with a browser at /services/determined/" in message(hub.api("GET", "/me"))


def test_a_token_without_the_access_scope_is_refused_naming_the_scope(hub):
    narrow = hub.new_token("hub_bob", scopes=["read:users:name!user=hub_bob"])
    answer = hub.api("GET", "/experiments", narrow)
    assert answer.status_code == 403
    assert "access:services!service=determined" in message(answer)
    assert "hub_bob" in message(answer)


def test_a_user_deleted_from_the_hub_is_no_longer_let_in(hub):
    token = hub.new_token("hub_dave")
    assert hub.api("GET", "/me", token).status_code == 200
    hub.delete_user("hub_dave")
    # The service reuses the Hub's answer for MASTER_LITE_HUB_CACHE_SECONDS (1 s here).
    # (A list: a 401 Response is falsy.)
    [answer] = wait_until(
        lambda: [r] if (r := hub.api("GET", "/me", token)).status_code == 401 else None,
        30,
        "the deleted user's token to be refused",
    )
    assert "invalid token" in message(answer)


def test_a_deactivated_master_user_stays_out_whatever_the_hub_says(hub, tokens):
    carol = hub.api("GET", "/me", tokens["hub_carol"]).json()["user"]
    patch = {"active": False}
    deactivated = hub.api("PATCH", f"/users/{carol['id']}", tokens["hub_admin"], patch)
    assert deactivated.status_code == 200, deactivated.text
    try:
        answer = hub.api("GET", "/experiments", tokens["hub_carol"])
        assert answer.status_code == 401
        assert "hub_carol" in message(answer) and "deactivated" in message(answer)
        # Not made an admin again, nor anything else, by the Hub.
        refused = hub.api("POST", "/experiments", tokens["hub_carol"], {"config": CONFIG})
        assert refused.status_code == 401
    finally:
        hub.api("PATCH", f"/users/{carol['id']}", tokens["hub_admin"], {"active": True})
    assert hub.api("GET", "/me", tokens["hub_carol"]).status_code == 200


def test_admin_follows_the_hub_group_at_every_identification(hub, tokens):
    hub.hub_api("POST", f"/groups/{ADMIN_GROUP}/users", {"users": ["hub_bob"]})
    try:
        wait_until(
            lambda: hub.api("GET", "/me", tokens["hub_bob"]).json()["user"]["admin"],
            30,
            "bob to be an admin after joining determined-admins",
        )
    finally:
        hub.hub_api("DELETE", f"/groups/{ADMIN_GROUP}/users", {"users": ["hub_bob"]})
    wait_until(
        lambda: hub.api("GET", "/me", tokens["hub_bob"]).json()["user"]["admin"] is False,
        30,
        "bob to be no admin after leaving determined-admins",
    )


def test_det_lists_experiments_through_the_hub_with_the_users_hub_token(hub, tokens, tmp_path):
    exp_id = create(hub, tokens["hub_alice"], activate=False).json()["experiment"]["id"]
    env = child_env(
        {
            "HOME": str(tmp_path),
            "DET_MASTER": hub.service_url,
            "DET_MASTER_TOKEN": tokens["hub_alice"],
            "MASTER_LITE_ROOT_DIR": str(tmp_path / "no-master-here"),
        }
    )
    listed = subprocess.run(
        [sys.executable, "-m", "determined.cli", "experiment", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = json.loads(listed.stdout)
    rows = rows.get("experiments", rows) if isinstance(rows, dict) else rows
    assert exp_id in [row["id"] for row in rows]


def test_a_browser_signs_in_with_the_hubs_oauth_and_the_page_names_the_user(hub):
    session = hub.browser_login("hub_alice")
    page = session.get(f"{hub.service_url}/", timeout=60)  # OAuth redirects, then the page
    assert page.status_code == 200, page.text
    assert "<b id='user'>hub_alice</b>" in page.text
    assert "/services/determined/api/v1/" in page.text
    # The API accepts the service's OAuth cookie for reads.
    me = session.get(f"{hub.service_url}/api/v1/me", timeout=60)
    assert me.status_code == 200 and me.json()["user"]["username"] == "hub_alice"
    # A state-changing request on the cookie alone (no XSRF token) is not let in.
    posted = session.post(f"{hub.service_url}/api/v1/experiments", json={}, timeout=60)
    assert posted.status_code == 401


def test_the_hub_not_answering_is_a_503_naming_it(tmp_path, refused_port):
    hub_api = f"http://127.0.0.1:{refused_port}/hub/api"
    env = {
        "JUPYTERHUB_API_TOKEN": "service-token",
        "JUPYTERHUB_API_URL": hub_api,
        "JUPYTERHUB_SERVICE_PREFIX": "/services/determined/",
        "JUPYTERHUB_SERVICE_NAME": "determined",
        "MASTER_LITE_RUN_TRIALS_AS": "master",  # runs no trial; tmp_path is closed to others
    }
    with MasterProcess(tmp_path / "root", extra_args=["--jupyterhub"], env=env) as master:
        assert master.url.endswith("/services/determined")
        answer = requests.get(
            f"{master.url}/api/v1/me", headers={"Authorization": "token abc"}, timeout=60
        )
        assert answer.status_code == 503
        assert f"the JupyterHub at {hub_api} did not answer" in answer.json()["message"]
        # The master's own token still works with the Hub down.
        own = requests.get(
            f"{master.url}/api/v1/me", headers={"Authorization": f"token {master.token}"}
        )
        assert own.status_code == 200


@pytest.mark.parametrize("missing", ["JUPYTERHUB_API_TOKEN", "JUPYTERHUB_SERVICE_PREFIX"])
def test_jupyterhub_mode_without_the_hubs_variables_says_what_is_missing(tmp_path, missing):
    env = child_env(
        {
            "JUPYTERHUB_API_TOKEN": "t",
            "JUPYTERHUB_API_URL": "http://127.0.0.1:1/hub/api",
            "JUPYTERHUB_SERVICE_PREFIX": "/services/determined/",
        }
    )
    del env[missing]
    result = subprocess.run(
        [sys.executable, "-m", "master_lite", "--jupyterhub", "--root-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert f"--jupyterhub needs {missing}: run it as a JupyterHub service" in result.stderr
    assert "docs/team.md" in result.stderr
    assert not (pathlib.Path(tmp_path) / "master.json").exists()


def _session_for(hub: HubProcess, token: str):
    from determined.common.api import Session

    return Session(hub.service_url, token)
