"""Fixtures every test folder may use."""
from __future__ import annotations

import socket
from typing import Iterator

import pytest


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test.

    The socket stays bound and never listens: connecting gets ECONNREFUSED at once, and no other
    process can take the port meanwhile. (A port bound and closed before use may be taken by
    another process whose listener never answers: the connect then waits for its timeout.)
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
