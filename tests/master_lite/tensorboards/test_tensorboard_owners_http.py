"""TensorBoards have owners (docs/team.md): who launches one owns it, its JSON names them,
and only they or an admin may kill it (another user's kill is a 403 naming the owner, and the
TensorBoard keeps running)."""

from __future__ import annotations

import pytest

from tests.master_lite.users.test_users_http import Api, with_api

pytestmark = pytest.mark.slow


@with_api
async def test_only_who_launched_a_tensorboard_or_an_admin_kills_it(api: Api) -> None:
    await api.user("spaces_tina")
    await api.user("spaces_tom")
    tina, tom = await api.login("spaces_tina"), await api.login("spaces_tom")
    experiment = await api.experiment(tom)  # anyone's experiments may be shown (a read)

    status, answer = await api.call(
        "POST", "/tensorboards", {"experiment_ids": [experiment["id"]]}, token=tina
    )
    assert status == 201, answer
    board = answer["tensorboard"]
    assert board["username"] == "spaces_tina" and board["userId"] > 1
    status, listing = await api.call("GET", "/tensorboards", token=tom)
    assert [b["username"] for b in listing["tensorboards"]] == ["spaces_tina"]

    status, answer = await api.call("POST", f"/tensorboards/{board['id']}/kill", token=tom)
    assert status == 403
    assert answer["message"] == (
        f"tensorboard {board['id']} belongs to spaces_tina: only spaces_tina or an admin may "
        "kill it"
    )
    status, answer = await api.call("GET", f"/tensorboards/{board['id']}", token=tom)
    assert status == 200 and answer["tensorboard"]["state"] != "STATE_TERMINATED"

    status, answer = await api.call("POST", f"/tensorboards/{board['id']}/kill", token=tina)
    assert status == 200 and answer["tensorboard"]["state"] == "STATE_TERMINATED"

    # An admin (the owner account) kills anyone's.
    status, answer = await api.call(
        "POST", "/tensorboards", {"experiment_ids": [experiment["id"]]}, token=tom
    )
    assert status == 201 and answer["tensorboard"]["username"] == "spaces_tom"
    status, _ = await api.call("POST", f"/tensorboards/{answer['tensorboard']['id']}/kill")
    assert status == 200
    status, answer = await api.call("POST", "/tensorboards/0f0e0d0c-0000/kill", token=tom)
    assert status == 404
