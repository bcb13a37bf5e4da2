"""A Ray cluster with token authentication (Ray >= 2.52; issue 31 row 7): its head and nodes
run with RAY_AUTH_MODE=token and the token; a master with the same two variables in its
environment runs trials on it, and the token itself stays out of the trials' environment.

(Without them the master's `ray.init` is refused: "Authentication token is missing or
incorrect", docs/distributed.md.)"""

from __future__ import annotations

import os

import pytest

from tests._support import (
    MasterProcess,
    all_logs,
    marked_values,
    submit,
    wait_for_experiment,
)
from tests.master_lite.runners.ray.test_ray import config

pytestmark = pytest.mark.slow

TOKEN = "reach-test-token-5f0c9a17e2"
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}

SHOW_AUTH = """
    import json, os
    print("AUTH " + json.dumps({name: os.environ.get(name)
                                for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}), flush=True)
"""


@pytest.fixture(scope="module")
def token_cluster():
    from ray._private.authentication_test_utils import reset_auth_token_state
    from ray.cluster_utils import Cluster

    # Ray reads the mode and token from the environment of every process of the cluster
    # (GCS, raylet, workers) and of this one, which watches the nodes start (and caches them:
    # Ray's own test helper refreshes the cache).
    saved = {name: os.environ.get(name) for name in AUTH}
    os.environ.update(AUTH)
    reset_auth_token_state()
    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "no_monitor": True,
                "include_log_monitor": False,
            },
        )
        yield cluster
    finally:
        if cluster is not None:
            cluster.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reset_auth_token_state()


def test_a_master_with_the_token_runs_trials_on_a_token_auth_cluster(token_cluster, tmp_path):
    with MasterProcess(
        tmp_path / "root",
        cpu_slots=None,
        env={
            "MASTER_LITE_RESOURCE_MANAGER": "ray",
            "MASTER_LITE_RAY_ADDRESS": token_cluster.address,
            **AUTH,
        },
    ) as master:
        exp_id = submit(master.session, config("auth", "python3 show.py"), {"show.py": SHOW_AUTH})
        experiment = wait_for_experiment(master.session, exp_id, timeout=120)
        text = all_logs(master.session, exp_id)
    assert experiment["state"] == "COMPLETED", text
    (shown,) = marked_values(text, "AUTH")
    assert shown == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": None}
    assert TOKEN not in text
