"""Which master a user's Jupyter server uses (docs/team.md, "Every user's JupyterLab uses the
shared master"): the trait `shared_master_url`, else DET_MASTER, else one hosted here."""

from __future__ import annotations

import pytest

from jupyter_determined.server._shared_settings import (
    SharedMaster,
    authorization_action,
    choose_shared_master,
)

OWN = "http://127.0.0.1:8888/jl/determined"
HUB = "https://hub.example.org/services/determined"


def test_det_master_names_a_shared_master():
    assert choose_shared_master(None, {"DET_MASTER": HUB + "/api/v1/"}, [OWN]) == SharedMaster(
        HUB, "DET_MASTER"
    )
    assert choose_shared_master(None, {"DET_MASTER_ADDR": "gpu:8080"}, [OWN]) == SharedMaster(
        "http://gpu:8080", "DET_MASTER_ADDR"
    )


def test_no_det_master_or_this_servers_own_hosts_a_master():
    assert choose_shared_master(None, {}, [OWN]) is None
    assert choose_shared_master(None, {"DET_MASTER": ""}, [OWN]) is None
    # A shell that inherited this server's own hosted API (a restart) is not a shared master.
    assert choose_shared_master(None, {"DET_MASTER": OWN + "/"}, [OWN]) is None


def test_the_trait_wins_over_det_master():
    name = "DeterminedServerExtension.shared_master_url"
    chosen = choose_shared_master(HUB, {"DET_MASTER": "http://other:8080"}, [OWN])
    assert chosen == SharedMaster(HUB, name)
    # Empty: always a hosted master, whatever DET_MASTER says.
    assert choose_shared_master("", {"DET_MASTER": HUB}, [OWN]) is None


def test_a_bad_url_names_the_setting():
    with pytest.raises(ValueError, match=r"DET_MASTER='http://\?x=1' is not a master URL"):
        choose_shared_master(None, {"DET_MASTER": "http://?x=1"}, [OWN])
    with pytest.raises(ValueError, match="shared_master_url='ftp://x' is not a master URL"):
        choose_shared_master("ftp://x", {}, [OWN])


def test_the_authorizer_is_asked_what_the_hosted_api_asks():
    assert authorization_action("/experiments", "GET") == "read"
    assert authorization_action("/experiments", "POST") == "execute"  # runs uploaded code
    assert authorization_action("/experiments/3/kill", "POST") == "write"
    assert authorization_action("/no/such/route", "GET") == "read"
    assert authorization_action("/no/such/route", "DELETE") == "write"
