"""Shared-master mode: the server extension hosts no master and proxies to a shared one.

On a team's machine (JupyterHub with a server per user) one master hands out the GPUs; every
user's JupyterLab points at it with `DET_MASTER` (the Hub's spawner sets it) or with the trait
`c.DeterminedServerExtension.shared_master_url`. The extension then starts no master of its
own (no store, no scheduler, no master.json) and serves the URLs the labextension calls,
`<base_url>determined/api/v1/...` (REST and the event stream) and
`<base_url>determined/tensorboard/...`, by forwarding them to the shared master as the user:

* Jupyter authenticates the request first (its token or cookie, XSRF) and its Authorizer is
  asked, as for the hosted API (read / write / execute on `determined`); nobody logged in → 401.
* Jupyter's own credentials (the `Authorization` header, cookies, `?token=`) never leave this
  server; the request goes out with `Authorization: token <T>`, T being the credential `det`
  would use for that URL (`determined.common.api.discover_master`): DET_MASTER_TOKEN, a
  `det user login` session stored for that URL, else the user's JupyterHub API token
  (`JUPYTERHUB_API_TOKEN`, set by JupyterHub in every single-user server).
* Answers stream through unbuffered (the event stream, checkpoint downloads); the shared
  master's status codes (its 401 and 403 included) and bodies pass through unchanged. A shared
  master that does not answer is a 502 JSON naming its URL and what to check.
"""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import tornado.httpclient
import tornado.httputil
import tornado.web
from jupyter_server.auth.decorator import allow_unauthenticated, authorized
from jupyter_server.base.handlers import APIHandler

from determined.common import api as det_api
from determined.common.api import canonical_url

TRAIT_NAME = "DeterminedServerExtension.shared_master_url"
ENV_NAMES = ("DET_MASTER", "DET_MASTER_ADDR")  # the harness's order (docs/cli.md)

# Request headers a client's call needs at the shared master. Everything else stays here:
# above all `Authorization` and `Cookie`, which carry this Jupyter server's own credentials.
_FORWARDED_REQUEST_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "content-encoding",
        "content-type",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "last-event-id",  # an EventSource resuming the stream
        "range",
        "user-agent",
        "x-xsrf-protected",  # TensorBoard's own POSTs
    }
)
# Headers of one connection (or set by this server itself): never copied back to the client.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "server",
        "date",
        "set-cookie",  # the shared master's cookies are not this server's to set
    }
)
CONNECT_TIMEOUT_SECONDS = 10.0
# Responses stream through, so no size is buffered; this bounds one answer's total size only
# (a checkpoint download), far above anything the master serves.
MAX_ANSWER_BYTES = 1 << 40
# Concurrent requests to the shared master: every open sidebar holds one for its event stream.
MAX_CONNECTIONS = 256


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


async def _allowed(handler: Any) -> None:
    """Nothing: `authorized` raises 403 before it runs when the Authorizer refuses."""


_AUTHORIZE: dict[str, Callable[[Any], Awaitable[None]]] = {
    action: authorized(action)(_allowed) for action in ("read", "write", "execute")
}


class Upstream:
    """The shared master and the HTTP client that talks to it (made on the server's loop at
    first use; closed by the extension's stop)."""

    def __init__(self, master: SharedMaster) -> None:
        self.master = master
        self._client: tornado.httpclient.AsyncHTTPClient | None = None

    def client(self) -> tornado.httpclient.AsyncHTTPClient:
        if self._client is None:
            self._client = tornado.httpclient.AsyncHTTPClient(
                force_instance=True, max_clients=MAX_CONNECTIONS, max_body_size=MAX_ANSWER_BYTES
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class _ClientGone(Exception):
    """The browser closed its connection: stop reading the shared master's answer."""


class SharedMasterProxyHandler(APIHandler):
    """Any method on `<base_url>determined/<kind>/<path>` → `<shared master>/<kind>/<path>`."""

    def initialize(self, upstream: Upstream, kind: str, auth_resource: str) -> None:
        self.upstream = upstream
        self.kind = kind  # "api/v1" or "tensorboard"
        self.auth_resource = auth_resource  # what `authorized` asks the Authorizer about
        self._gone = False
        self._answer_started = False

    def check_xsrf_cookie(self) -> None:
        # TensorBoard's front end marks its POSTs with this header (see _tensorboard_proxy).
        if self.kind == "tensorboard" and self.request.headers.get("X-XSRF-Protected"):
            return None
        return super().check_xsrf_cookie()

    def on_connection_close(self) -> None:
        self._gone = True

    @allow_unauthenticated
    async def get(self, path: str | None) -> None:
        await self._proxy(path)

    @allow_unauthenticated
    async def head(self, path: str | None) -> None:
        await self._proxy(path)

    @allow_unauthenticated
    async def post(self, path: str | None) -> None:
        await self._proxy(path)

    @allow_unauthenticated
    async def put(self, path: str | None) -> None:
        await self._proxy(path)

    @allow_unauthenticated
    async def patch(self, path: str | None) -> None:
        await self._proxy(path)

    @allow_unauthenticated
    async def delete(self, path: str | None) -> None:
        await self._proxy(path)

    async def _proxy(self, path: str | None) -> None:
        path = path or ""
        method = self.request.method or "GET"
        if self.current_user is None:
            # The API's contract: a JSON 401, never a redirect to a login page.
            self._answer(
                401,
                "not signed in to this Jupyter server: send its token "
                "(Authorization: token …) or its login cookie",
            )
            return
        action = authorization_action(path or "/", method) if self.kind == "api/v1" else "read"
        await _AUTHORIZE[action](self)  # 403 when this server's Authorizer refuses
        await self._forward(path, method)

    def _upstream_url(self, path: str) -> str:
        url = f"{self.upstream.master.url}/{self.kind}{path}"
        # Jupyter's `?token=` stays here: it is this server's credential, not the user's.
        query = [
            (name, value)
            for name, value in urllib.parse.parse_qsl(self.request.query, keep_blank_values=True)
            if name != "token"
        ]
        return url + ("?" + urllib.parse.urlencode(query) if query else "")

    async def _forward(self, path: str, method: str) -> None:
        headers = tornado.httputil.HTTPHeaders()
        for name, value in self.request.headers.get_all():
            if name.lower() in _FORWARDED_REQUEST_HEADERS:
                headers.add(name, value)
        authorization, _ = upstream_credential(self.upstream.master.url)
        if authorization:
            headers["Authorization"] = authorization
        forwarded_for = self.request.remote_ip
        if forwarded_for:
            headers["X-Forwarded-For"] = forwarded_for
        has_body = method not in ("GET", "HEAD")
        request = tornado.httpclient.HTTPRequest(
            self._upstream_url(path),
            method=method,
            headers=headers,
            body=self.request.body if has_body else None,
            allow_nonstandard_methods=True,  # a DELETE with a body, a POST without one
            follow_redirects=False,
            decompress_response=False,  # bytes pass through as the master encoded them
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            request_timeout=0,  # none: the event stream lasts as long as the browser wants
            header_callback=self._header_line,
            streaming_callback=self._chunk,
        )
        self._status_line: tornado.httputil.ResponseStartLine | None = None
        self._upstream_headers = tornado.httputil.HTTPHeaders()
        try:
            await self.upstream.client().fetch(request, raise_error=False)
        except _ClientGone:
            return
        except Exception as exc:  # no (complete) answer: refused, reset, DNS, TLS, timeout
            if self._answer_started:  # mid-stream: the status is sent, only closing is left
                if not self._gone:
                    # The client must not take a cut answer for a whole one.
                    self.request.connection.close()  # type: ignore[union-attr]
                return
            self._answer(502, self._unreachable(exc))
            return
        if not self._gone and not self._finished:
            self._start_answer()
            # APIHandler.finish would make every answer JSON: keep the shared master's type.
            content_type = self._headers.get("Content-Type") or "application/json"
            self.finish(set_content_type=content_type)

    # -- the answer, as it arrives ------------------------------------------------------------
    def _header_line(self, line: str) -> None:
        if line.startswith("HTTP/"):
            self._status_line = tornado.httputil.parse_response_start_line(line.strip())
            self._upstream_headers = tornado.httputil.HTTPHeaders()
        elif line.strip():
            self._upstream_headers.parse_line(line)

    def _start_answer(self) -> None:
        if self._answer_started:
            return
        self._answer_started = True
        status = self._status_line
        if status is not None:
            self.set_status(status.code, status.reason or None)
        for name in ("Content-Type", "Content-Security-Policy"):
            self.clear_header(name)
        for name, value in self._upstream_headers.get_all():
            if name.lower() not in _HOP_BY_HOP:
                self.add_header(name, value)

    def _chunk(self, chunk: bytes) -> None:
        if self._gone:
            raise _ClientGone()
        self._start_answer()
        self.write(chunk)
        # Each chunk goes out as it arrives: an event must not wait behind a buffer.
        self.flush().add_done_callback(_ignore_closed)

    # -- our own answers ----------------------------------------------------------------------
    def _answer(self, status: int, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))

    def _unreachable(self, exc: Exception) -> str:
        master = self.upstream.master
        reason = str(exc) or type(exc).__name__
        return (
            f"the shared Determined master at {master.url} did not answer ({reason}); "
            f"this JupyterLab hosts no master of its own because {master.source} names that "
            "one: check that the master runs and is reachable from this server (for a "
            "JupyterHub service: the Hub is up and `determined` is in c.JupyterHub.services), "
            f"or correct {master.source}"
        )


def _ignore_closed(future: Any) -> None:
    # The browser went away while a chunk was on its way: the next chunk stops the fetch.
    if not future.cancelled():
        future.exception()


def shared_master_handlers(
    upstream: Upstream, prefix: str, auth_resource: str
) -> list[tuple[str, type, dict[str, Any]]]:
    """The routes that forward `prefix/api/v1/...` and `prefix/tensorboard/...`."""
    return [
        (
            prefix + r"/api/v1(?P<path>/.*)?",
            SharedMasterProxyHandler,
            {"upstream": upstream, "kind": "api/v1", "auth_resource": auth_resource},
        ),
        (
            prefix + r"/tensorboard(?P<path>/.*)?",
            SharedMasterProxyHandler,
            {"upstream": upstream, "kind": "tensorboard", "auth_resource": auth_resource},
        ),
    ]


__all__ = [
    "ENV_NAMES",
    "SharedMaster",
    "SharedMasterProxyHandler",
    "TRAIT_NAME",
    "Upstream",
    "authorization_action",
    "choose_shared_master",
    "shared_master_handlers",
    "upstream_credential",
]
