"""Sign-in hygiene over HTTP (docs/team.md, "Sessions and sign-in limits"): sessions expire
(401 naming that and `det user login`), and wrong passwords are limited per username and per
client address (429 with Retry-After naming when to retry). Time is moved, never waited for."""

from __future__ import annotations

import json

import pytest
import tornado.httpclient

from master_lite import errors
from master_lite.users import SignInGuard
from tests.master_lite.users.test_users_http import Api, with_api

WEEK = 7 * 24 * 3600


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def login(api: Api, name: str, password: str) -> tornado.httpclient.HTTPResponse:
    return await api.http.fetch(
        f"http://127.0.0.1:{api.port}/api/v1/auth/login",
        method="POST",
        body=json.dumps({"username": name, "password": password}),
        raise_error=False,
    )


@with_api
async def test_a_session_expires_after_a_week_saying_to_sign_in_again(api: Api) -> None:
    clock = api.master.users.clock = Clock()
    await api.user("signin_alice", "right-pw")
    token = await api.login("signin_alice", "right-pw")
    clock.now += WEEK - 1
    status, answer = await api.call("GET", "/me", token=token)
    assert status == 200 and answer["user"]["username"] == "signin_alice"

    clock.now += 2
    status, answer = await api.call("GET", "/me", token=token)
    assert (status, answer["message"]) == (
        401,
        "the session of user 'signin_alice' expired: sessions last 7 days "
        "(session_lifetime_hours); sign in again: det user login signin_alice",
    )
    fresh = await api.login("signin_alice", "right-pw")
    assert (await api.call("GET", "/me", token=fresh))[0] == 200
    # The master token has no session: it never expires.
    assert (await api.call("GET", "/me"))[0] == 200


@with_api
async def test_ten_wrong_passwords_for_a_name_make_the_next_sign_in_wait(api: Api) -> None:
    clock = api.master.users.clock = Clock()
    await api.user("signin_bob", "right-pw")
    for _ in range(10):
        assert (await login(api, "signin_bob", "guess")).code == 401
    response = await login(api, "signin_bob", "right-pw")  # even the right one, for now
    assert response.code == 429
    assert response.headers["Retry-After"] == "300"
    message = json.loads(response.body)["message"]
    assert message.startswith(
        "too many failed sign-ins for user 'signin_bob' (10 in the last 5 minutes): try again "
        "in 5 min 0 s, at "
    ), message

    clock.now += 120
    response = await login(api, "signin_bob", "right-pw")
    assert (response.code, response.headers["Retry-After"]) == (429, "180")
    clock.now += 181
    assert (await login(api, "signin_bob", "right-pw")).code == 200


@with_api
async def test_ten_wrong_sign_ins_from_one_address_make_it_wait(api: Api) -> None:
    clock = api.master.users.clock = Clock()
    await api.user("signin_carol", "right-pw")
    for index in range(10):  # guesses at ten names, from this test's address
        assert (await login(api, f"nobody{index}", "guess")).code == 401
    response = await login(api, "signin_carol", "right-pw")
    assert response.code == 429
    assert "for client address 127.0.0.1 (10 in the last 5 minutes)" in response.body.decode()
    clock.now += 300
    assert (await login(api, "signin_carol", "right-pw")).code == 200


def test_a_right_password_forgives_its_names_failures_not_its_addresses() -> None:
    clock = Clock()
    guard = SignInGuard(clock)
    for _ in range(9):
        guard.failed("dora", "10.0.0.1")
    guard.succeeded("dora")
    for _ in range(9):
        guard.failed("dora", "10.0.0.2")
    guard.check("dora", "10.0.0.3")  # 9 since the success: still allowed
    guard.failed("dora", "10.0.0.2")
    with pytest.raises(errors.TooManyRequests, match="for user 'dora'"):
        guard.check("dora", "10.0.0.3")
    with pytest.raises(errors.TooManyRequests, match="for client address 10.0.0.2") as caught:
        guard.check("erin", "10.0.0.2")
    assert caught.value.retry_after == 300
    clock.now += 300
    guard.check("dora", "10.0.0.2")
