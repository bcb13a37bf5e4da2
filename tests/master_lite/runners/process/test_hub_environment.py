"""A master run as a JupyterHub service passes none of the Hub's variables to its trials
(docs/team.md, "The shared master as a JupyterHub service"): not the service's Hub API token
(JUPYTERHUB_API_TOKEN, JPY_API_TOKEN), nor its OAuth client and URLs (JUPYTERHUB_*)."""

from __future__ import annotations

import pytest

from master_lite.runners import process_environment

HUB_VARIABLES = {
    "JUPYTERHUB_API_TOKEN": "service-secret",
    "JPY_API_TOKEN": "service-secret",
    "JUPYTERHUB_CLIENT_ID": "service-determined",
    "JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api",
    "JUPYTERHUB_SERVICE_PREFIX": "/services/determined/",
    "JUPYTERHUB_OAUTH_CALLBACK_URL": "/services/determined/oauth_callback",
}


def test_a_trial_gets_none_of_the_hub_services_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in HUB_VARIABLES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = process_environment({"DET_MASTER": "http://127.0.0.1:1/services/determined"})
    assert not set(HUB_VARIABLES) & set(env)
    assert env["LANG"] == "C.UTF-8"  # the rest of the master's environment is kept
    assert env["DET_MASTER"] == "http://127.0.0.1:1/services/determined"
