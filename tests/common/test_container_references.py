"""Image references and registry credentials (`determined.common.containers`), and the names
`det image build` reports."""

from __future__ import annotations

import base64

import pytest

from determined.cli._image import stored_name
from determined.common import containers


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        ("registry.example.com/team/trainer:1", "registry.example.com"),
        ("127.0.0.1:5000/trainer", "127.0.0.1:5000"),
        ("localhost:5000/trainer:2", "localhost:5000"),
        ("[::1]:5000/trainer", "[::1]:5000"),
        ("docker.io/library/python:3.11", "docker.io"),
        # Names only the local store can have: short names and Podman's localhost/ names.
        ("python:3.11", None),
        ("me/trainer", None),
        ("localhost/jupyter-determined-trial:latest", None),
    ],
)
def test_registry_of_an_image_reference(image: str, registry: str | None) -> None:
    assert containers.registry_of(image) == registry


@pytest.mark.parametrize(
    ("registry", "loopback"),
    [
        ("127.0.0.1:5000", True),
        ("localhost:5000", True),
        ("[::1]:5000", True),
        ("127.0.0.2", True),
        ("registry.example.com", False),
        ("10.0.0.1:5000", False),
    ],
)
def test_only_registries_on_this_machine_are_loopback(registry: str, loopback: bool) -> None:
    assert containers.is_loopback(registry) is loopback


def test_auth_config_from_determined_registry_auth() -> None:
    made = containers.auth_config({"username": "me", "password": "pw"}, "r.example.com:5000")
    assert made == {"auths": {"r.example.com:5000": {"auth": base64.b64encode(b"me:pw").decode()}}}
    # serveraddress names the registry (Docker's URL form is accepted); auth is used as given.
    given = containers.auth_config(
        {"auth": "abc=", "serveraddress": "https://other.example.com/v1/", "email": "a@b"},
        "r.example.com",
    )
    assert given == {"auths": {"other.example.com": {"auth": "abc=", "email": "a@b"}}}


def test_build_names_as_the_runtime_stores_them() -> None:
    assert stored_name("trainer", "podman") == "localhost/trainer:latest"
    assert stored_name("team/trainer:2", "/usr/bin/podman") == "localhost/team/trainer:2"
    assert stored_name("localhost/trainer", "podman") == "localhost/trainer:latest"
    assert stored_name("127.0.0.1:5000/trainer", "podman") == "127.0.0.1:5000/trainer:latest"
    assert stored_name("trainer", "docker") == "trainer:latest"
