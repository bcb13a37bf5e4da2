"""Which master a user's Jupyter server uses, and as whom it calls a shared one.

`choose_shared_master` reads the trait `DeterminedServerExtension.shared_master_url` and
`DET_MASTER` (docs/team.md, "Settings and precedence"); `upstream_credential` finds the user's
credential for the shared master as `det` does; `authorization_action` is what Jupyter's
Authorizer is asked for a proxied API call (the hosted API's own action for that route).
The proxy itself is `_shared_master.py`.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Collection, Mapping
from typing import Any

from determined.common import api as det_api
from determined.common.api import canonical_url

TRAIT_NAME = "DeterminedServerExtension.shared_master_url"
ENV_NAMES = ("DET_MASTER", "DET_MASTER_ADDR")  # the harness's order (docs/cli.md)


@dataclasses.dataclass(frozen=True)
class SharedMaster:
    """The shared master this server forwards to: `url` without `/api/v1`, and the setting
    that named it (for log lines and error messages)."""

    url: str
    source: str


def choose_shared_master(
    configured: str | None, environ: Mapping[str, str], own_urls: Collection[str]
) -> SharedMaster | None:
    """Which shared master to use, or None to host a master here (docs/team.md).

    1. The trait `shared_master_url`, when configured: a URL uses that master; "" hosts one
       here whatever DET_MASTER says.
    2. Else `DET_MASTER` (or `DET_MASTER_ADDR`) of the server's environment, unless it names
       this server's own hosted API (`own_urls`: e.g. a server restarted in a shell that
       inherited its earlier DET_MASTER).
    3. Else None: the master is hosted in this server, as for one person.
    """
    if configured is not None:
        configured = configured.strip()
        return (
            SharedMaster(_checked_url(configured, TRAIT_NAME), TRAIT_NAME) if configured else None
        )
    own = {canonical_url(url) for url in own_urls if url}
    for name in ENV_NAMES:
        value = environ.get(name, "").strip()
        if value:
            url = _checked_url(value, name)
            return None if url in own else SharedMaster(url, name)
    return None


def _checked_url(value: str, setting: str) -> str:
    url = canonical_url(value)  # `host:port` gets http://, as `det` reads it
    parts = urllib.parse.urlsplit(url)
    other_scheme = "://" in value and not value.startswith(("http://", "https://"))
    if other_scheme or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(
            f"{setting}={value!r} is not a master URL: give http(s)://host[:port][/path] "
            "(e.g. https://hub.example.org/services/determined)"
        )
    return url


def upstream_credential(url: str) -> tuple[str | None, str | None]:
    """(`Authorization` header value, where its token came from) for requests to `url`: the
    token `det` would use for that master (docs/cli.md, "Which master"), or (None, None)."""
    try:
        address = det_api.discover_master(url, given_as=TRAIT_NAME)
    except det_api.MasterNotFound:  # an unreadable master.json: not this master's business
        return None, None
    if not address.token:
        return None, None
    # The shared master accepts `token` and `bearer` alike; `token` is the Hub's own scheme.
    return f"token {address.token}", address.token_source


def _compiled_routes() -> list[tuple[re.Pattern[str], Any]]:
    from master_lite.api import ROUTES

    return [(re.compile(route.tornado_pattern() + "$"), route) for route in ROUTES]


_ROUTES: list[tuple[re.Pattern[str], Any]] | None = None


def authorization_action(api_path: str, method: str) -> str:
    """The Authorizer's action for `method` on the API path below /api/v1 (`/experiments`):
    the one the hosted API asks for the same route (creating an experiment: "execute"), else
    "read" for reads and "write" for the rest."""
    global _ROUTES
    if _ROUTES is None:
        _ROUTES = _compiled_routes()
    for pattern, route in _ROUTES:
        if pattern.match(api_path):
            operation = route.operations.get(method.lower())
            if operation is not None:
                return str(operation.action_for(method))
            break
    return "read" if method.upper() in ("GET", "HEAD", "OPTIONS") else "write"


__all__ = [
    "ENV_NAMES",
    "SharedMaster",
    "TRAIT_NAME",
    "authorization_action",
    "choose_shared_master",
    "upstream_credential",
]
