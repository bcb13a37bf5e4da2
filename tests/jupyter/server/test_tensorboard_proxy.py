"""A master's TensorBoard opened through the Jupyter server (pytest-jupyter): served to Jupyter's
logged-in user at <base_url>determined/tensorboard/<id>/, refused to everyone else."""

from __future__ import annotations

import json
import urllib.parse

import pytest
import tornado.httpclient

from tests._support import context_tarball, wait_until_async
from tests._support.hosted import (
    TWO_STEP_TRIAL_SCRIPT,
    hosted_api,
    hosted_server_config,
    start_hosted,
)

pytest_plugins = ["pytest_jupyter.jupyter_server"]
pytestmark = pytest.mark.slow

TRIAL_CONFIG = {
    "name": "tensorboard-proxy",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 2},
}


@pytest.fixture
def jp_server_config(tmp_path, monkeypatch):
    return hosted_server_config(tmp_path, monkeypatch, cpu_slots=2)


@pytest.fixture
def hosted(jp_serverapp, jp_asyncio_loop):
    return start_hosted(jp_serverapp, jp_asyncio_loop)


async def test_tensorboard_is_served_through_jupyter_to_its_user_only(
    hosted, jp_fetch, jp_http_port, jp_base_url
):
    created = await hosted_api(
        jp_fetch,
        "POST",
        "experiments",
        {"config": TRIAL_CONFIG, "context": context_tarball({"train.py": TWO_STEP_TRIAL_SCRIPT})},
    )
    exp_id = created["experiment"]["id"]

    async def completed() -> dict | None:
        answer = await hosted_api(jp_fetch, "GET", f"experiments/{exp_id}")
        return answer if answer["experiment"]["state"] == "COMPLETED" else None

    answer = await wait_until_async(completed, 120, f"experiment {exp_id} to complete", 0.3)
    trial_id = answer["trials"][0]["id"]

    board = (await hosted_api(jp_fetch, "POST", "tensorboards", {"experiment_ids": [exp_id]}))[
        "tensorboard"
    ]
    board_id = board["id"]
    assert board["serviceAddress"] == f"{hosted.master_url}/tensorboard/{board_id}/"

    async def running() -> bool:
        state = (await hosted_api(jp_fetch, "GET", f"tensorboards/{board_id}"))["tensorboard"][
            "state"
        ]
        assert state != "STATE_TERMINATED"
        return state == "STATE_RUNNING"

    await wait_until_async(running, 90, "the TensorBoard to serve", 0.2)

    async def through_jupyter(*path: str, **kwargs):
        return await jp_fetch("determined", "tensorboard", board_id, *path, **kwargs)

    page = await through_jupyter("index.html")
    assert page.headers["Content-Type"].startswith("text/html")
    assert b"<tf-tensorboard" in page.body or b"<tb-webapp" in page.body
    # TensorBoard's own policy (its scripts), framed only by JupyterLab's origin.
    policy = page.headers["Content-Security-Policy"]
    assert "script-src" in policy and policy.endswith("frame-ancestors 'self'")
    run = f"experiment_{exp_id}/trial_{trial_id}"
    tags = json.loads((await through_jupyter("data", "plugin", "scalars", "tags")).body)
    assert set(tags[run]) == {"training/loss", "validation/loss"}
    points = json.loads(
        (
            await through_jupyter(
                "data", "plugin", "scalars", "scalars", params={"run": run, "tag": "training/loss"}
            )
        ).body
    )
    assert [(step, value) for _, step, value in points] == [(1, 1.0), (2, 0.5)]
    # TensorBoard's front end asks for many runs at once with a POST (marked by its header).
    multirun = await through_jupyter(
        "data",
        "plugin",
        "scalars",
        "scalars_multirun",
        method="POST",
        body=urllib.parse.urlencode([("tag", "validation/loss"), ("runs", run)]),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-XSRF-Protected": "1",
        },
    )
    assert [s for _, s, _ in json.loads(multirun.body)[run]] == [2]

    # Without Jupyter's token (or with a wrong one) nothing of TensorBoard is served.
    client = tornado.httpclient.AsyncHTTPClient()
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}determined/tensorboard/{board_id}/"
    for headers in ({}, {"Authorization": "token not-the-token"}):
        for path in ("", "data/plugin/scalars/tags"):
            refused = await client.fetch(
                url + path, headers=headers, follow_redirects=False, raise_error=False
            )
            assert refused.code in (302, 401, 403), (path, refused.code)
            assert b"training/loss" not in (refused.body or b"")
            if refused.code == 302:
                assert "/login" in refused.headers["Location"]
        posted = await client.fetch(
            url + "data/plugin/scalars/scalars_multirun",
            method="POST",
            body="tag=validation/loss",
            headers={**headers, "X-XSRF-Protected": "1"},
            raise_error=False,
        )
        assert posted.code in (401, 403), posted.code

    killed = await hosted_api(jp_fetch, "POST", f"tensorboards/{board_id}/kill", {})
    assert killed["tensorboard"]["state"] == "STATE_TERMINATED"
    with pytest.raises(tornado.httpclient.HTTPClientError) as gone:
        await through_jupyter("data", "plugin", "scalars", "tags")
    assert gone.value.code == 404


def test_tensorboard_redirects_go_through_the_proxy_without_the_secret_prefix():
    """A redirect of TensorBoard's (absolute URL or path under its secret prefix) is rewritten
    to the proxy's URL for the board; anything else passes unchanged."""
    import types

    from jupyter_determined.server._tensorboard_proxy import TensorBoardProxyHandler

    upstream = "http://127.0.0.1:6006/s3cret"
    handler = types.SimpleNamespace(
        request=types.SimpleNamespace(path="/user/a/determined/tensorboard/b1/x/y")
    )

    def public(location: str) -> str:
        return TensorBoardProxyHandler._public_location(handler, location, upstream, "/x/y")

    base = "/user/a/determined/tensorboard/b1"
    assert public("/s3cret/") == f"{base}/"
    assert public("/s3cret") == base
    assert public("http://127.0.0.1:6006/s3cret/data/x?y=1") == f"{base}/data/x?y=1"
    assert public("/s3cretish/") == "/s3cretish/"
    assert public("https://example.com/") == "https://example.com/"
