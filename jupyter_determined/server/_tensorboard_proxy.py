"""The master's TensorBoards, served through the Jupyter server behind Jupyter's own login.

A TensorBoard listens on a loopback port and has no authentication of its own; a browser reaches
it only as `<base_url>determined/tensorboard/<id>/...`, which this handler forwards to that port
for a logged-in user whom the server's Authorizer allows to read `determined`. A request without
Jupyter's token or cookie is refused (a GET is sent to the login page, like every Jupyter page).

TensorBoard's pages use relative URLs, so the path below `<id>/` is forwarded as it is.
"""

from __future__ import annotations

from typing import Any

import tornado.httpclient
import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler

from master_lite import errors

# Headers that describe one connection, or a body we re-encode: never copied across the proxy.
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-encoding",
    "server",
    "date",
}
# TensorBoard's own front end marks every POST with this header; a form on another site cannot
# set it, and a script on another origin could only after a CORS preflight that Jupyter refuses.
_TENSORBOARD_XSRF_HEADER = "X-XSRF-Protected"
REQUEST_TIMEOUT_SECONDS = 120.0


class TensorBoardProxyHandler(JupyterHandler):
    """GET/POST `<prefix>/tensorboard/<id><path>` → the TensorBoard's `http://127.0.0.1:<port><path>`."""

    def initialize(self, master: Any, auth_resource: str) -> None:
        self.master = master
        self.auth_resource = auth_resource  # what `authorized` asks the Authorizer about

    def check_xsrf_cookie(self) -> None:
        if self.request.headers.get(_TENSORBOARD_XSRF_HEADER):
            return None
        return super().check_xsrf_cookie()

    @tornado.web.authenticated
    @authorized("read")
    async def get(self, tensorboard_id: str, path: str | None) -> None:
        if not path:
            # Without the slash, TensorBoard's relative URLs would resolve one level too high.
            self.redirect(self.request.path + "/", permanent=False)
            return
        await self._forward(tensorboard_id, path)

    @tornado.web.authenticated
    @authorized("read")  # TensorBoard's POSTs are queries (scalars of many runs), not changes
    async def post(self, tensorboard_id: str, path: str | None) -> None:
        await self._forward(tensorboard_id, path or "/")

    async def _forward(self, tensorboard_id: str, path: str) -> None:
        try:
            upstream = self.master.tensorboards.upstream(tensorboard_id)
        except errors.MasterError as exc:
            raise tornado.web.HTTPError(exc.status, "%s", exc.message) from None
        url = f"{upstream}{path}"
        if self.request.query:
            url += "?" + self.request.query
        headers = {
            name: value
            for name, value in self.request.headers.get_all()
            if name.lower() in ("accept", "content-type", _TENSORBOARD_XSRF_HEADER.lower())
        }
        request = tornado.httpclient.HTTPRequest(
            url,
            method=self.request.method or "GET",
            headers=headers,
            body=self.request.body if self.request.method == "POST" else None,
            follow_redirects=False,
            request_timeout=REQUEST_TIMEOUT_SECONDS,
            decompress_response=True,
        )
        try:
            response = await tornado.httpclient.AsyncHTTPClient().fetch(request, raise_error=False)
        except OSError as exc:
            raise tornado.web.HTTPError(
                502, "tensorboard %s did not answer: %s", tensorboard_id, exc
            ) from None
        if response.code == 599:  # tornado's code for no HTTP answer at all
            raise tornado.web.HTTPError(
                502, "tensorboard %s did not answer: %s", tensorboard_id, response.error
            )
        self.set_status(response.code, response.reason)
        # Jupyter's own Content-Security-Policy is for Jupyter's pages: TensorBoard's (its
        # scripts' hashes) replaces it, still framed only by this origin, as Jupyter's pages are.
        self.clear_header("Content-Security-Policy")
        policy = "frame-ancestors 'self'"
        for name, value in response.headers.get_all():
            if name.lower() == "content-security-policy":
                policy = f"{value.rstrip('; ')}; {policy}"
            elif name.lower() == "location":
                self.add_header(name, self._public_location(value, upstream, path))
            elif name.lower() not in _HOP_BY_HOP:
                self.add_header(name, value)
        self.set_header("Content-Security-Policy", policy)
        self.finish(response.body or b"")

    def _public_location(self, location: str, upstream: str, path: str) -> str:
        """A redirect of TensorBoard's as the browser must follow it: through this proxy,
        never naming the board's secret path prefix (`upstream` is
        `http://host:port/<secret>`; `path` what followed the board's id in this request)."""
        secret = "/" + upstream.split("/", 3)[3]
        board_base = self.request.path
        if path and board_base.endswith(path):
            board_base = board_base[: -len(path)]
        for start in (upstream, secret):
            if location == start or location.startswith(start + "/"):
                return board_base.rstrip("/") + location[len(start) :]
        return location


__all__ = ["TensorBoardProxyHandler"]
