"""The advertised URL (issue 31 row 1): what trials and other machines use to reach a master,
distinct from the address it binds (master_lite/_app/_address.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

import pytest
from traitlets import TraitError

from master_lite import _cli
from master_lite._app import MasterLite, _address
from tests.master_lite.test_app import LifecycleFakeMaster


@pytest.mark.parametrize(
    "value",
    [
        "10.0.0.5:8080",  # no scheme
        "ftp://10.0.0.5:8080",
        "http://",
        "http://10.0.0.5:eighty",
        "http://10.0.0.5:70000",
        "http://0.0.0.0:8080",
        "http://user:pw@10.0.0.5:8080",
        "http://10.0.0.5:8080/?x=1",
        "http://10.0.0.5:0",
    ],
)
def test_a_malformed_advertised_url_is_refused_naming_it(value: str) -> None:
    with pytest.raises(TraitError, match=r"advertised_url: .* is not a URL trials can use"):
        MasterLite(advertised_url=value)


def test_a_good_advertised_url_is_kept_without_its_trailing_slash() -> None:
    assert MasterLite(advertised_url="http://10.0.0.5:8080/").advertised_url == (
        "http://10.0.0.5:8080"
    )
    assert MasterLite(advertised_url="https://[fd00::5]:443/det").advertised_url == (
        "https://[fd00::5]:443/det"
    )


def test_the_environment_variable_sets_it_and_a_bad_one_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MASTER_LITE_ADVERTISED_URL", "http://head.example:8080")
    assert MasterLite().advertised_url == "http://head.example:8080"
    monkeypatch.setenv("MASTER_LITE_ADVERTISED_URL", "head.example:8080")
    with pytest.raises(TraitError, match="environment variable MASTER_LITE_ADVERTISED_URL"):
        _ = MasterLite().advertised_url


def test_master_lite_refuses_a_malformed_url_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _cli.main(["--root-dir", str(tmp_path), "--advertised-url", "10.0.0.5:8080"])
    assert code == 2
    err = capsys.readouterr().err
    assert "advertised_url: '10.0.0.5:8080' is not a URL trials can use" in err
    assert "http(s)://HOST:PORT" in err
    assert not (tmp_path / "master.json").exists()


# --- the derivation rule -------------------------------------------------------------------


def test_a_specific_bind_address_is_advertised_as_is() -> None:
    assert _address.derived_host("127.0.0.1") == "127.0.0.1"
    assert _address.derived_host("10.0.0.5") == "10.0.0.5"
    assert _address.derived_host("fd00::5") == "[fd00::5]"


def test_a_wildcard_bind_advertises_the_routed_non_loopback_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def routed(toward: str, family: int = socket.AF_INET) -> str | None:
        asked.append(toward)
        return {"ray-head.example": "10.1.0.7", "192.0.2.1": "192.168.5.5"}.get(toward)

    monkeypatch.setattr(_address, "routed_address", routed)
    assert _address.derived_host("0.0.0.0", toward="ray-head.example") == "10.1.0.7"
    assert _address.derived_host("0.0.0.0") == "192.168.5.5"  # the default route's
    assert asked == ["ray-head.example", "192.0.2.1"]


def test_without_a_route_the_fqdn_then_loopback_is_advertised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_address, "routed_address", lambda toward, family=0: None)
    monkeypatch.setattr(_address, "_fqdn_address", lambda family: "node1.cluster.example")
    assert _address.derived_host("0.0.0.0") == "node1.cluster.example"
    monkeypatch.setattr(_address, "_fqdn_address", lambda family: None)
    assert _address.derived_host("0.0.0.0") == "127.0.0.1"
    assert _address.derived_host("::") == "[::1]"


def test_the_routed_address_of_loopback_is_loopback() -> None:
    assert _address.routed_address("127.0.0.1") == "127.0.0.1"
    assert _address.routed_address("no-such-host.invalid") is None


def test_the_ray_head_host_is_read_from_its_address() -> None:
    assert _address.ray_head_host("10.0.0.9:6379") == "10.0.0.9"
    assert _address.ray_head_host("ray://head.example:10001") == "head.example"
    assert _address.ray_head_host("auto") is None
    assert _address.ray_head_host(None) is None


# --- what the master does with it ----------------------------------------------------------


def _start_and_read(app: MasterLite, fake: LifecycleFakeMaster, root: Path) -> tuple[str, dict]:
    async def scenario() -> tuple[str, dict]:
        url = await app.start()
        try:
            return url, json.loads((root / "master.json").read_text())
        finally:
            await app.stop()

    return asyncio.run(scenario())


def test_trials_and_master_json_get_the_advertised_url_and_local_clients_loopback(
    tmp_path: Path,
) -> None:
    fake = LifecycleFakeMaster(tmp_path)
    app = MasterLite(
        root_dir=str(tmp_path),
        host="0.0.0.0",
        port=0,
        advertised_url="http://head.example:8123",
        master=fake,
    )
    url, info = _start_and_read(app, fake, tmp_path)
    assert url == fake.started_with == "http://head.example:8123"  # every trial's DET_MASTER
    assert info["url"] == "http://head.example:8123"
    assert info["local_url"].startswith("http://127.0.0.1:")
    assert info["hostname"] == socket.gethostname() and info["pid"] == os.getpid()


def test_a_wildcard_bind_without_a_setting_advertises_the_derived_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MASTER_LITE_ADVERTISED_URL", raising=False)
    monkeypatch.setattr(_address, "routed_address", lambda toward, family=0: "10.20.30.40")
    fake = LifecycleFakeMaster(tmp_path)
    app = MasterLite(root_dir=str(tmp_path), host="0.0.0.0", port=0, master=fake)
    url, info = _start_and_read(app, fake, tmp_path)
    port = info["local_url"].rsplit(":", 1)[1]
    assert fake.started_with == url == f"http://10.20.30.40:{port}"


def test_a_loopback_master_writes_master_json_as_before(tmp_path: Path) -> None:
    fake = LifecycleFakeMaster(tmp_path)
    app = MasterLite(root_dir=str(tmp_path), port=0, master=fake)
    url, info = _start_and_read(app, fake, tmp_path)
    assert url.startswith("http://127.0.0.1:") and info["url"] == url
    assert "local_url" not in info


def test_clients_on_the_masters_host_use_local_url_and_others_the_advertised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from determined.common.api import _master

    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "user_token").write_text("tok\n")
    info = {
        "url": "http://head.example:8080",
        "local_url": "http://127.0.0.1:8080",
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "token_file": str(tmp_path / "private" / "user_token"),
    }
    (tmp_path / "master.json").write_text(json.dumps(info))
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path))
    for name in ("DET_MASTER", "DET_MASTER_ADDR", "DET_MASTER_TOKEN", "DET_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    found = _master.discover_master()
    assert (found.url, found.token) == ("http://127.0.0.1:8080", "tok")
    # DET_MASTER naming the advertised URL still gets master.json's token.
    monkeypatch.setenv("DET_MASTER", "http://head.example:8080")
    assert _master.discover_master().token == "tok"
    monkeypatch.delenv("DET_MASTER")
    # Another machine reading the same (shared) root dir uses the advertised URL.
    (tmp_path / "master.json").write_text(json.dumps({**info, "hostname": "elsewhere"}))
    assert _master.discover_master().url == "http://head.example:8080"
