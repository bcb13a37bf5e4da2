"""`det user create|list|activate|deactivate|change-password|login|logout|whoami` and the SDK's
user functions, through a real master-lite (docs/team.md).

The admin is the master's owner account (the master token, found through master.json on the
master's machine); alice and bob sign in with passwords from another "machine" (DET_MASTER,
their own HOME). Every `det` runs without a terminal, so passwords come from stdin.
"""

from __future__ import annotations

import getpass
import json
import pathlib

import pytest
import requests

from determined.common.api import authentication
from determined.common.api import errors as api_errors
from tests._support import MasterProcess, context_tarball
from tests.cli.test_cli_verbs import auth_file, det, failed, local_env, ok, remote_env

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "alices",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with MasterProcess(tmp_path_factory.mktemp("users-root")) as process:
        yield process


def stored_token(master: MasterProcess, home: pathlib.Path, user: str) -> str:
    login = authentication.stored_login(master.url, user, path=auth_file(home))
    assert login is not None and login[0] == user
    return login[1]


def experiment_of(master: MasterProcess, token: str) -> int:
    response = requests.post(
        f"{master.url}/api/v1/experiments",
        json={
            "config": CONFIG,
            "context": context_tarball({"train.py": "print(1)\n"}),
            "activate": False,
        },
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return int(response.json()["experiment"]["id"])


def test_accounts_sign_in_and_ownership(master, tmp_path):
    admin = local_env(master, tmp_path / "admin")
    ok(det(admin, "user", "create", "alice", stdin="Alice-pw1\n"))
    ok(det(admin, "user", "create", "bob", "--password", "Bob-pw12"))
    ok(det(admin, "user", "create", "carol", "--admin", "--password", "Carol-pw1"))
    listed = ok(det(admin, "user", "list"))
    for name in ("alice", "bob", "carol", getpass.getuser()):
        assert name in listed
    failed(det(admin, "user", "create", "alice", "--password", "Other-pw1"), "already exists")
    # Determined's password rules, checked before anything is sent: each rule listed, marked.
    weak = det(admin, "user", "create", "erin", "--password", "erin-pass")
    failed(weak, "\u2717 password must include an uppercase letter")
    assert "\u2713 password must have at least 8 characters" in weak.stderr
    assert "\u2717 password must include a number" in weak.stderr
    assert "erin" not in ok(det(admin, "user", "list", "--all"))

    alice_home, bob_home = tmp_path / "alice", tmp_path / "bob"
    alice, bob = remote_env(master, alice_home), remote_env(master, bob_home)
    failed(
        det(alice, "user", "login", "alice", stdin="wrong\n"), "invalid username and/or password"
    )
    ok(det(alice, "user", "login", "alice", stdin="Alice-pw1\n"))
    token = stored_token(master, alice_home, "alice")
    assert token.startswith("session.") and token != master.token
    assert ok(det(alice, "user", "whoami")).strip() == "You are logged in as user 'alice'"
    ok(det(bob, "user", "login", "bob", stdin="Bob-pw12\n"))
    # An account whose password predates the rules (set through the API) still signs in, with
    # Determined's warning to change it.
    master.session.post("/users", {"user": {"username": "frank"}, "password": "frankpw"})
    frank = det(remote_env(master, tmp_path / "frank"), "user", "login", "frank", stdin="frankpw\n")
    ok(frank)
    assert (
        "does not appear to satisfy" in frank.stderr and "det user change-password" in frank.stderr
    )

    # A non-admin may not manage accounts.
    failed(det(bob, "user", "create", "mallory", "--password", "Mallory-1"), "only an admin")
    failed(det(bob, "user", "deactivate", "alice"), "bob may not change user alice")

    # bob may read alice's experiment, not kill it; an admin may.
    exp_id = experiment_of(master, token)
    assert f"{exp_id}" in ok(det(bob, "e", "list"))
    failed(
        det(bob, "e", "kill", str(exp_id)),
        f"experiment {exp_id} belongs to alice: only alice or an admin may kill it",
    )
    assert master.session.get(f"/experiments/{exp_id}")["experiment"]["state"] == "PAUSED"
    ok(det(admin, "e", "kill", str(exp_id)))

    # Deactivated: alice's stored session is refused with the reason.
    ok(det(admin, "user", "deactivate", "alice"))
    failed(det(alice, "e", "list"), "deactivated")
    failed(det(alice, "user", "login", "alice", stdin="Alice-pw1\n"), "deactivated")
    assert "alice" not in ok(det(admin, "user", "list"))
    assert "alice" in ok(det(admin, "user", "list", "--all"))
    ok(det(admin, "user", "activate", "alice"))
    ok(det(alice, "e", "list"))

    # One's own password (asked twice: the confirmation is read the same way).
    failed(det(alice, "user", "change-password", stdin="short\n"), "at least 8 characters")
    ok(det(alice, "user", "change-password", stdin="Alice-new1\n"))
    failed(det(alice, "user", "login", "alice", stdin="Alice-pw1\n"), "invalid username")
    ok(det(alice, "user", "login", "alice", stdin="Alice-new1\n"))
    # Another's: admins only.
    failed(
        det(bob, "user", "change-password", "alice", stdin="Alice-by-bob1\n"),
        "bob may not set the password of user alice",
    )
    ok(det(admin, "user", "change-password", "bob", stdin="Bob-new12\n"))
    ok(det(bob, "user", "login", "bob", stdin="Bob-new12\n"))

    # Logout ends the session on the master, not only in auth.json.
    token = stored_token(master, alice_home, "alice")
    ok(det(alice, "user", "logout"))
    answer = requests.get(
        f"{master.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert answer.status_code == 401
    assert json.loads(auth_file(alice_home).read_text())["masters"] == {}


def test_sdk_login_and_user_functions(master, tmp_path):
    from determined.experimental import client

    admin = client.Determined(master.url, token=master.token)
    dave = admin.create_user("dave", admin=False, password="Dave-pw12")
    assert dave.username == "dave" and not dave.admin and dave.active
    assert admin.get_user_by_name("dave").user_id == dave.user_id
    assert admin.whoami().username == getpass.getuser() and admin.whoami().admin
    assert "dave" in [u.username for u in admin.list_users()]

    with pytest.raises(ValueError, match="\u2717 password must include a number"):
        admin.create_user("weak", admin=False, password="Weak-password")
    with pytest.raises(ValueError, match="\u2717 password cannot be blank"):
        admin.create_user("blank", admin=False)
    assert "weak" not in [u.username for u in admin.list_users(active=None)]
    with pytest.raises(ValueError, match="at least 8 characters"):
        dave.change_password("Dv-1")

    signed_in = client.Determined(master.url, user="dave", password="Dave-pw12")
    assert signed_in.whoami().username == "dave"
    assert signed_in.get_session_username() == "dave"
    dave.deactivate()
    assert "dave" not in [u.username for u in admin.list_users(active=True)]
    assert "dave" in [u.username for u in admin.list_users(active=False)]
    dave.activate()
    signed_in.logout()

    # Determined's default sign-in (no such account here) with the master token at hand keeps
    # working as before users: the token is used. Without it, the refusal is raised.
    determined_default = client.Determined(
        master.url, user="determined", password="", token=master.token
    )
    assert determined_default.whoami().username == getpass.getuser()
    with pytest.raises(api_errors.Unauthorized, match="invalid username and/or password"):
        client.Determined(master.url, user="dave", password="wrong")
