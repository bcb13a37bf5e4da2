"""`master-lite --jupyterhub` reads what JupyterHub gives a managed service (docs/team.md, "The
shared master as a JupyterHub service"): where to listen (JUPYTERHUB_SERVICE_URL unless --host
or --port say), the prefix, the cache setting, and, running as root, trials run as their
owners where the master has that setting (`run_trials_as`)."""

from __future__ import annotations

import argparse

import pytest
from traitlets.config import Config

from master_lite import _cli
from master_lite._app import HubService, HubServiceError, MasterLite

SERVICE_ENV = {
    "JUPYTERHUB_API_TOKEN": "service-token",
    "JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api",
    "JUPYTERHUB_SERVICE_PREFIX": "services/determined",
    "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:10101",
    "JUPYTERHUB_SERVICE_NAME": "determined",
}


@pytest.fixture
def service_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SERVICE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("JUPYTERHUB_CLIENT_ID", raising=False)
    monkeypatch.delenv("MASTER_LITE_HUB_CACHE_SECONDS", raising=False)
    monkeypatch.delenv("MASTER_LITE_RUN_TRIALS_AS", raising=False)


def args(*argv: str) -> argparse.Namespace:
    return _cli._parser().parse_args(["--jupyterhub", *argv])


def test_the_service_listens_where_the_hub_says_unless_told_otherwise(service_env: None) -> None:
    config = Config()
    service = _cli._hub_service(args(), config)
    assert (config.MasterLite.host, config.MasterLite.port) == ("127.0.0.1", 10101)
    assert service.prefix == "/services/determined/"  # normalised
    assert service.client_id == "service-determined"  # the Hub's default for a service
    config = Config({"MasterLite": {"port": 9999}})
    _cli._hub_service(args("--port", "9999"), config)
    assert config.MasterLite.port == 9999


def test_a_bad_cache_setting_is_named(service_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_LITE_HUB_CACHE_SECONDS", "soon")
    with pytest.raises(HubServiceError, match="MASTER_LITE_HUB_CACHE_SECONDS='soon'"):
        HubService.from_environment()


def test_as_root_trials_run_as_their_owners_where_the_master_can(
    service_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cli.os, "geteuid", lambda: 0)
    traits: dict[str, object] = dict(MasterLite.class_traits())
    traits.setdefault("run_trials_as", object())  # the setting of issue 29's runas part
    monkeypatch.setattr(MasterLite, "class_traits", classmethod(lambda cls, **kw: traits))
    config = Config()
    _cli._hub_service(args(), config)
    assert config.MasterLite.run_trials_as == "owner"
    # An explicit choice stays.
    monkeypatch.setenv("MASTER_LITE_RUN_TRIALS_AS", "master")
    config = Config()
    _cli._hub_service(args(), config)
    assert "run_trials_as" not in config.MasterLite
    # Not root: unchanged.
    monkeypatch.delenv("MASTER_LITE_RUN_TRIALS_AS")
    monkeypatch.setattr(_cli.os, "geteuid", lambda: 1000)
    config = Config()
    _cli._hub_service(args(), config)
    assert "run_trials_as" not in config.MasterLite
