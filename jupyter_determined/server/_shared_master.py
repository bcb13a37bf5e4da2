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

import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

import tornado.httpclient
import tornado.httputil
import tornado.web
from jupyter_server.auth.decorator import allow_unauthenticated, authorized
from jupyter_server.base.handlers import APIHandler

from jupyter_determined.server._shared_settings import (
    SharedMaster,
    authorization_action,
    upstream_credential,
)

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
        if self.kind != "api/v1":
            await _AUTHORIZE["read"](self)  # TensorBoard's POSTs are queries, as hosted
            await self._forward_to_tensorboard(path, method)
            return
        await _AUTHORIZE[authorization_action(path or "/", method)](self)
        authorization, _ = upstream_credential(self.upstream.master.url)
        await self._forward(f"{self.upstream.master.url}/api/v1{path}", method, authorization)

    async def _forward_to_tensorboard(self, path: str, method: str) -> None:
        """`/<id>/<rest>` → `<rest>` of the TensorBoard the shared master names for `<id>`
        (its `serviceAddress`: on a standalone master the board's own loopback URL with its
        secret path, reachable from a server on the same machine)."""
        found = re.fullmatch(r"/([0-9a-f-]+)(/.*)?", path)
        if found is None:
            self._answer(404, f"no TensorBoard at {self.request.path}: expected .../<id>/")
            return
        board_id, rest = found.group(1), found.group(2)
        if not rest:
            # Without the slash, TensorBoard's relative URLs would resolve one level too high.
            self.redirect(self.request.path + "/", permanent=False)
            return
        master = self.upstream.master.url
        authorization, _ = upstream_credential(master)
        headers = {"Authorization": authorization} if authorization else {}
        try:
            answer = await self.upstream.client().fetch(
                f"{master}/api/v1/tensorboards/{board_id}",
                headers=headers,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                request_timeout=60,
                raise_error=False,
            )
        except Exception as exc:
            self._answer(502, self._unreachable(exc))
            return
        if answer.code != 200:  # its 401, 403, 404 as they are
            self.set_status(answer.code, answer.reason)
            self.finish(answer.body or b"")
            return
        board = json.loads(answer.body)["tensorboard"]
        if board.get("state") != "STATE_RUNNING":
            detail = f": {board['error']}" if board.get("error") else ""
            self._answer(
                409, f"tensorboard {board_id} is {board.get('state')}, not STATE_RUNNING{detail}"
            )
            return
        base = str(board.get("serviceAddress") or "").rstrip("/")
        # The user's credential goes only to the shared master itself, never to another host.
        same_master = base == master or base.startswith(master + "/")
        await self._forward(base + rest, method, authorization if same_master else None)

    def _with_query(self, url: str) -> str:
        # Jupyter's `?token=` and `?_xsrf=` (an event stream's, behind JupyterHub) stay here:
        # they are this server's credentials, not the user's.
        query = [
            (name, value)
            for name, value in urllib.parse.parse_qsl(self.request.query, keep_blank_values=True)
            if name not in ("token", "_xsrf")
        ]
        return url + ("?" + urllib.parse.urlencode(query) if query else "")

    async def _forward(self, url: str, method: str, authorization: str | None) -> None:
        """Send this request on to `url` and stream the answer back as it comes."""
        headers = tornado.httputil.HTTPHeaders()
        for name, value in self.request.headers.get_all():
            if name.lower() in _FORWARDED_REQUEST_HEADERS:
                headers.add(name, value)
        if authorization:
            headers["Authorization"] = authorization
        forwarded_for = self.request.remote_ip
        if forwarded_for:
            headers["X-Forwarded-For"] = forwarded_for
        has_body = method not in ("GET", "HEAD")
        request = tornado.httpclient.HTTPRequest(
            self._with_query(url),
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
        self.clear_header("Content-Type")
        policy = None
        for name, value in self._upstream_headers.get_all():
            if name.lower() == "content-security-policy":
                policy = value
            elif name.lower() == "location" and self.kind == "tensorboard":
                continue  # a board's redirect names its secret path: never passed on
            elif name.lower() not in _HOP_BY_HOP:
                self.add_header(name, value)
        if self.kind == "tensorboard":
            # Jupyter's policy is for Jupyter's pages: TensorBoard's own (its scripts' hashes)
            # replaces it, framed only by this origin, as for a hosted master's boards.
            self.clear_header("Content-Security-Policy")
            frame = "frame-ancestors 'self'"
            self.set_header(
                "Content-Security-Policy", f"{policy.rstrip('; ')}; {frame}" if policy else frame
            )

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


__all__ = ["SharedMasterProxyHandler", "Upstream", "shared_master_handlers"]
