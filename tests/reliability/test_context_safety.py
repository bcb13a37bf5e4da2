"""Hostile input through the HTTP API: unsafe context tarballs are refused with a 400 that
names the member, nothing lands outside the master's root dir, and names full of HTML come
back verbatim as JSON strings (the sidebar's browser test checks they render inert)."""

from __future__ import annotations

import base64
import pathlib
import tarfile

import pytest
import requests

from tests._support import MasterProcess, context_tarball

pytestmark = pytest.mark.slow

CONFIG = {
    "name": "ctx",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "x", "max_length": 1},
}


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, **fields) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info, None


ESCAPE_NAME = "escaped-by-context-test"
HOSTILE = {
    "dotdot": [_file(f"../../{ESCAPE_NAME}")],
    "dotdot-inside": [_file(f"sub/../../{ESCAPE_NAME}")],
    "absolute": [_file(f"/tmp/{ESCAPE_NAME}")],
    "symlink-out": [_special("link", tarfile.SYMTYPE, linkname="/etc/passwd")],
    "symlink-dotdot": [_special("link", tarfile.SYMTYPE, linkname=f"../../{ESCAPE_NAME}")],
    "hardlink-out": [_special("hard", tarfile.LNKTYPE, linkname="/etc/passwd")],
    "char-device": [_special("null", tarfile.CHRTYPE, devmajor=1, devminor=3)],
    "block-device": [_special("disk", tarfile.BLKTYPE, devmajor=8, devminor=0)],
    "fifo": [_special("pipe", tarfile.FIFOTYPE)],
    "symlink-then-write-through": [
        _special("d", tarfile.SYMTYPE, linkname="/tmp"),
        _file(f"d/{ESCAPE_NAME}"),
    ],
}


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory):
    with MasterProcess(tmp_path_factory.mktemp("ctx") / "root", cpu_slots=1) as running:
        yield running


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_unsafe_context_is_refused(
    master: MasterProcess, case: str, tmp_path: pathlib.Path
) -> None:
    before = {p.name for p in master.root_dir.parent.iterdir()}
    hostile = context_tarball({"train.py": "pass\n"}, members=HOSTILE[case])
    response = requests.post(
        f"{master.url}/api/v1/experiments",
        json={"config": CONFIG, "context": hostile},
        headers={"Authorization": f"Bearer {master.token}"},
        timeout=60,
    )
    assert response.status_code == 400, (case, response.status_code, response.text[:300])
    assert response.headers["Content-Type"].startswith("application/json")
    message = response.json()["message"]
    # The message names the (first) offending member.
    assert any(info.name.lstrip("/") in message for info, _ in HOSTILE[case]), (case, message)
    # Nothing escaped next to the root dir, or into /tmp; no experiment was recorded.
    assert {p.name for p in master.root_dir.parent.iterdir()} == before
    assert not pathlib.Path("/tmp", ESCAPE_NAME).exists()
    assert all(e["name"] != "ctx" for e in master.session.get("/experiments")["experiments"])


def test_context_that_is_not_a_tarball_is_refused(master: MasterProcess) -> None:
    for payload in ("not base64 at all!", base64.b64encode(b"plain bytes, not gzip").decode()):
        response = requests.post(
            f"{master.url}/api/v1/experiments",
            json={"config": CONFIG, "context": payload},
            headers={"Authorization": f"Bearer {master.token}"},
            timeout=60,
        )
        assert response.status_code == 400, response.text[:300]
        assert response.json()["message"]


MARKUP = [
    '<script>alert("x")</script>',
    "<img src=x onerror=alert(1)>",
    "a & b < c > d \" ' `",
    "</div><b>bold</b>",
    "{{constructor.constructor('x')()}}",
]


@pytest.mark.parametrize("name", MARKUP)
def test_markup_in_names_comes_back_verbatim_as_json(master: MasterProcess, name: str) -> None:
    config = {**CONFIG, "name": name, "description": name, "labels": [name]}
    exp_id = master.session.post(
        "/experiments", {"config": config, "context": None, "activate": False}
    )["experiment"]["id"]
    headers = {"Authorization": f"Bearer {master.token}"}
    for path in (f"/experiments/{exp_id}", "/experiments"):
        response = requests.get(f"{master.url}/api/v1{path}", headers=headers, timeout=30)
        assert response.status_code == 200
        assert response.headers["Content-Type"].split(";")[0] == "application/json"
        body = response.json()
        experiment = (
            body["experiment"]
            if "experiment" in body
            else next(e for e in body["experiments"] if e["id"] == exp_id)
        )
        assert experiment["name"] == name
        assert experiment["description"] == name
        assert experiment["labels"] == [name]
