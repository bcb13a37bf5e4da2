"""The server extension: master_lite hosted inside the Jupyter server.

The API is served under `<base_url>determined/api/v1/` by the same handlers as the standalone
master (`master_lite.api.make_handlers` with jupyter_server's `APIHandler`), so users are
authenticated by Jupyter (token, cookie, XSRF) and trials by their session tokens.

Settings are the traits of `master_lite.MasterLite` (`c.MasterLite.root_dir`, `cpu_slots`,
`resource_manager`, ...): the app is created with the server as its parent, so
`jupyter_server_config.py` and `--MasterLite.cpu_slots=4` on the command line both apply.

Shared-master mode (`_shared_master.py`): when `DET_MASTER` or the trait `shared_master_url`
names another master, no master is hosted here and the same URLs are proxied to that one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tornado.httpserver
import tornado.netutil
import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from traitlets import Bool, Unicode

from jupyter_determined import _contract
from jupyter_determined.server._shared_master import Upstream, shared_master_handlers
from jupyter_determined.server._shared_settings import (
    SharedMaster,
    choose_shared_master,
    upstream_credential,
)
from jupyter_determined.server._tensorboard_proxy import TensorBoardProxyHandler

if TYPE_CHECKING:  # the kernel imports this package too: keep the server app out of it
    from jupyter_server.serverapp import ServerApp

# The paths the labextension calls are defined once, in jupyter_determined._contract.
URL_SEGMENT = _contract.URL_SEGMENT  # the API lives under <base_url>determined/api/v1
# <base_url>determined/tensorboard/<id>/: the master's TensorBoards, behind Jupyter's login.
TENSORBOARD_PATH = _contract.TENSORBOARD_PATH.removeprefix(URL_SEGMENT + "/")
# <base_url>determined/export-preview: a Jupyter endpoint (the labextension's), not the master's.
EXPORT_PREVIEW_PATH = _contract.EXPORT_PREVIEW_PATH.removeprefix(URL_SEGMENT + "/")


# The resource jupyter_server's Authorizer is asked about for everything the master serves:
# "read" for GETs, "write" for actions and reports, "execute" for creating an experiment (it
# runs the uploaded code, as a kernel would). See docs/jupyter.md, "Authorization".
AUTH_RESOURCE = "determined"
AUTH_ACTIONS = ("read", "write", "execute")


async def _allowed(handler: Any) -> None:
    """Nothing: `authorized` below raises 403 before it runs when the authorizer refuses."""


# jupyter_server's own decorator, one per action: it asks `handler.authorizer.is_authorized`
# (whatever Authorizer the deployment configured: JupyterHub's roles, a read-only policy...).
_AUTHORIZE: dict[str, Callable[[Any], Awaitable[None]]] = {
    action: authorized(action, AUTH_RESOURCE)(_allowed) for action in AUTH_ACTIONS
}


async def authorize_jupyter_user(handler: Any, action: str) -> bool:
    """The master's `user_auth`: Jupyter's logged-in user (token, cookie) is the master's user
    when the server's Authorizer allows `action` on `AUTH_RESOURCE`.

    Returns False when nobody is logged in (the API answers 401); raises a 403 HTTPError when
    the authorizer refuses.
    """
    if handler.current_user is None:
        return False
    await _AUTHORIZE[action](handler)
    return True


def _listening_port(serverapp: Any) -> int:
    """The TCP port the server listens on. `--port 0` asks the OS for one and a busy port
    moves on to another (`port_retries`): the bound socket says which, so a listening
    socket is asked first and `serverapp.port` (set once the server chose) is the fallback."""
    server = getattr(serverapp, "_http_server", None)
    for sock in (getattr(server, "_sockets", None) or {}).values():
        address = sock.getsockname()
        if isinstance(address, tuple) and len(address) >= 2 and address[1]:
            return int(address[1])
    return int(serverapp.port)


def _local_connection_url(serverapp: Any) -> str:
    """connection_url names the host name on a wildcard ip; trials run here: use loopback.
    The base URL (a proxy's prefix, e.g. JupyterHub's /user/<name>/) is kept: the server
    itself answers under it, so the URL reaches it from this host."""
    host = serverapp.ip
    if host in ("", "0.0.0.0", "*"):
        host = "127.0.0.1"
    elif host == "::":
        host = "[::1]"
    elif ":" in host:
        host = f"[{host}]"
    scheme = "https" if serverapp.certfile else "http"
    return f"{scheme}://{host}:{_listening_port(serverapp)}{serverapp.base_url}"


class ExportPreviewHandler(APIHandler):
    """POST `{"cells": [...], "submit_cell_id"?, "path"?}` → what a submission would export
    (`jupyter_determined.server._preview.preview_export`); the labextension's export preview."""

    auth_resource = AUTH_RESOURCE

    @tornado.web.authenticated
    @authorized("read")  # a preview changes nothing
    async def post(self) -> None:
        from jupyter_determined.kernel._export import NotebookExportError
        from jupyter_determined.server._preview import preview_export

        body = self.get_json_body()
        if not isinstance(body, dict):
            self._bad_request('expected a JSON object with "cells"')
            return
        submit_cell_id = body.get("submit_cell_id")
        path = body.get("path")
        cells: Any = body.get("cells")  # preview_export says what is wrong with it
        try:
            # IPython's transformer and ast work per cell: off the event loop for big notebooks.
            preview = await asyncio.to_thread(
                preview_export,
                cells,
                submit_cell_id=None if submit_cell_id is None else str(submit_cell_id),
                notebook_path=None if path is None else str(path),
            )
        except (NotebookExportError, ValueError) as exc:
            self._bad_request(str(exc))
            return
        self.finish(preview.to_json())

    def _bad_request(self, message: str) -> None:
        # Not HTTPError: its message is a %-format, and cell text is full of `%`.
        self.set_status(400)
        self.finish({"message": message})


# Set for the server's kernels: %%det_submit runs its trials in kernels when it is "1".
NOTEBOOK_KERNELS_ENV = "DET_NOTEBOOK_TRIALS_IN_KERNELS"


class DeterminedServerExtension(ExtensionApp):
    """Hosts the Determined master in the Jupyter server (see the module docstring)."""

    name = "jupyter_determined"
    load_other_extensions = True

    notebook_trials_in_kernels = Bool(
        True,
        config=True,
        help=(
            "Run the trials that %%det_submit submits from this server's notebooks in Jupyter "
            "kernels (environment.kernel: {}), unless their config says otherwise "
            "(environment.image or environment.kernel, or more than one slot). False: processes."
        ),
    )

    shared_master_url = Unicode(
        None,
        allow_none=True,
        config=True,
        help=(
            "The URL of a shared Determined master (e.g. a JupyterHub service: "
            "https://hub.example.org/services/determined) for this server to use instead of "
            "hosting a master of its own: the sidebar, widgets and magics then reach that master "
            "as this server's user (docs/team.md). Unset: DET_MASTER decides (a URL that is not "
            "this server's own hosted API means a shared master). Empty string: always host a "
            "master here, whatever DET_MASTER says."
        ),
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.master_app: Any = None  # master_lite.MasterLite, holds the settings
        self.master: Any = None  # master_lite._master.Master; None with a shared master
        self.master_url: str | None = None
        # The shared master this server proxies to instead of hosting one (None: hosting).
        self.shared_master: SharedMaster | None = None
        self._upstream: Upstream | None = None
        self._started: asyncio.Future | None = None
        self._wrote_master_json = False

    @property
    def server(self) -> ServerApp:
        """The Jupyter server this extension is loaded into."""
        if self.serverapp is None:
            raise RuntimeError("jupyter_determined is not loaded into a Jupyter server")
        return self.serverapp

    # --- loading (synchronous, before the event loop serves requests) ---------------------------

    def initialize_settings(self) -> None:
        serverapp = self.server
        own_api = url_path_join(_local_connection_url(serverapp), URL_SEGMENT)
        self.shared_master = choose_shared_master(
            self.shared_master_url, os.environ, (own_api, self.master_url or "")
        )
        if self.shared_master is not None:
            self._use_shared_master(self.shared_master)
            return
        self._host_master()

    def _use_shared_master(self, shared: SharedMaster) -> None:
        """No master here: kernels and terminals talk to the shared one directly (as the user,
        with `det`'s own credential lookup), the browser through this server's proxy."""
        self.master_url = shared.url
        self._upstream = Upstream(shared)
        # Kernels and terminals started from now on inherit these. No DET_MASTER_TOKEN of a
        # hosted master: `det` and the SDK find the user's own credential (docs/cli.md).
        os.environ["DET_MASTER"] = shared.url
        # The shared master runs the trials it schedules: never in this server's kernels.
        os.environ[NOTEBOOK_KERNELS_ENV] = "0"
        _, source = upstream_credential(shared.url)
        self.log.info(
            "jupyter_determined | using the shared master %s (named by %s): this server hosts "
            "no master; %s/api/v1 is forwarded to it with the credential from %s",
            shared.url,
            shared.source,
            url_path_join(self.server.base_url, URL_SEGMENT),
            source or "nowhere",
        )
        if source is None:
            self.log.warning(
                "jupyter_determined | no credential for the shared master %s: it will answer "
                "401; set JUPYTERHUB_API_TOKEN (JupyterHub sets it), DET_MASTER_TOKEN, or run "
                "`det user login` in this server's environment",
                shared.url,
            )

    def _host_master(self) -> None:
        from master_lite import MasterLite

        serverapp = self.server
        self.master_app = MasterLite(parent=serverapp)
        Path(self.master_app.root_dir).mkdir(parents=True, exist_ok=True)
        # The master's user token is Jupyter's token when there is one, so the token printed
        # in the server's URL also works as DET_MASTER_TOKEN for `det` in another shell.
        jupyter_token = getattr(serverapp.identity_provider, "token", "") or None
        self.master = self.master_app.build_master(user_token=jupyter_token)
        self.settings["determined_master"] = self.master
        self.master.jupyter_host = serverapp  # kernel trials' kernels in its kernel manager
        self._publish_url()
        os.environ["DET_MASTER_TOKEN"] = self.master.user_token
        os.environ[NOTEBOOK_KERNELS_ENV] = "1" if self.notebook_trials_in_kernels else "0"

    def _publish_url(self) -> None:
        """Where trials, kernels and master.json find the master: the server's URL with the
        port it listens on. Called at load (the port may still be 0 or about to move on) and
        again at start, when the server has chosen its port."""
        self.master_url = url_path_join(_local_connection_url(self.server), URL_SEGMENT).rstrip("/")
        # Kernels and terminals started from now on inherit these: notebooks find the master
        # with no configuration. (Trials never see DET_MASTER_TOKEN: the runner drops it.)
        os.environ["DET_MASTER"] = self.master_url
        self.master.tensorboards.serve_through(f"{self.master_url}/{TENSORBOARD_PATH}")

    def initialize_handlers(self) -> None:
        from master_lite.api import make_handlers, max_body_bytes

        prefix = url_path_join(self.server.base_url, URL_SEGMENT).rstrip("/")
        if self._upstream is not None:
            self.server.web_app.add_handlers(
                ".*$",
                [
                    (url_path_join(prefix, EXPORT_PREVIEW_PATH), ExportPreviewHandler),
                    *shared_master_handlers(self._upstream, prefix, AUTH_RESOURCE),
                ],
            )
            return
        handlers = make_handlers(
            self.master,
            prefix,
            base_handler=APIHandler,
            user_auth=authorize_jupyter_user,
            context_size_limit=self.master_app.context_size_limit,
        )
        self.server.web_app.add_handlers(".*$", handlers)
        tensorboards = url_path_join(prefix, TENSORBOARD_PATH)
        self.server.web_app.add_handlers(
            ".*$",
            [
                (url_path_join(prefix, EXPORT_PREVIEW_PATH), ExportPreviewHandler),
                (
                    tensorboards + r"/(?P<tensorboard_id>[0-9a-f-]+)(?P<path>/.*)?",
                    TensorBoardProxyHandler,
                    {"master": self.master, "auth_resource": AUTH_RESOURCE},
                ),
            ],
        )
        # Contexts arrive base64 in JSON; ServerApp.max_body_size (512 MiB by default) must
        # exceed the API's own limit so that the API can answer 413 with a message.
        limit = max_body_bytes(self.master_app.context_size_limit)
        if self.server.max_body_size < limit:
            self.log.warning(
                "jupyter_determined | ServerApp.max_body_size (%s) is below the "
                "largest experiment upload (%s bytes): raise it, or lower "
                "MasterLite.context_size_limit",
                self.server.max_body_size,
                limit,
            )
        # The start hook only runs under `ServerApp.start()`; scheduling the start here also
        # covers servers driven another way (pytest-jupyter starts no hooks).
        self.server.io_loop.add_callback(self.ensure_started)

    # --- starting and stopping (on the event loop) ---------------------------------------------

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        await self.ensure_started()

    async def ensure_started(self) -> None:
        """Start the master once (recovering experiments from the store); idempotent. With a
        shared master there is nothing to start."""
        if self.shared_master is not None:
            return
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        await asyncio.shield(self._started)

    async def _start(self) -> None:
        # The loop runs: the server has picked its port (`--port 0`, port_retries) by now.
        self._publish_url()
        # Trials and master.json's `url` use MasterLite.advertised_url when it is set (the full
        # URL of this API, .../determined, as another machine reaches it); clients on this host
        # keep the server's local URL (master.json's `local_url`).
        advertised = self.master_app.advertised_url or self.master_url
        self.master_app.url = advertised
        self.master_app.local_url = self.master_url
        try:
            # One master per root dir (an OS lock, taken before the store is opened), e.g. a
            # standalone master-lite or a second Jupyter server on the same root dir.
            self.master_app.claim_root_dir()
            self.master_app.check_not_running()  # a master of an earlier version (no lock)
            await self.master.start(advertised)
        except Exception as exc:
            self.master_app.release_root_dir()
            self.log.error(
                "jupyter_determined | the master did not start, so the "
                "determined API of this server will not work: %s",
                exc,
            )
            raise
        self.master_app.write_master_json(self.master.user_token)
        self._wrote_master_json = True
        self.log.info(
            "jupyter_determined | master serving %s/api/v1 from %s",
            self.master_url,
            self.master_app.root_dir,
        )

    async def stop_extension(self) -> None:
        """Pause running trials (they checkpoint through the API), then close the store.

        The server stops listening before it asks extensions to stop; while trials save
        their checkpoints the API is served again on the same port.
        """
        if self._upstream is not None:
            self._upstream.close()
        if self._started is None:
            return
        try:
            await asyncio.shield(self._started)
        except Exception:  # it never started: nothing to stop
            return
        interim = self._serve_during_shutdown()
        try:
            await self.master.stop(pause_running=True)
        finally:
            if interim is not None:
                interim.stop()
                try:
                    await asyncio.wait_for(interim.close_all_connections(), 5)
                except asyncio.TimeoutError:
                    pass
            if self._wrote_master_json:
                self.master_app.remove_master_json()
            self.master_app.release_root_dir()
        self.log.info("jupyter_determined | master stopped; running trials were paused")

    def _serve_during_shutdown(self) -> tornado.httpserver.HTTPServer | None:
        serverapp = self.server
        if not getattr(serverapp, "_stopping", False) or serverapp.sock:
            return None
        try:
            sockets = tornado.netutil.bind_sockets(serverapp.port, address=serverapp.ip or None)
        except OSError:  # still listening (the server was not stopped by a signal): fine
            return None
        server = tornado.httpserver.HTTPServer(serverapp.web_app)
        server.add_sockets(sockets)
        return server


def master_info(serverapp: Any) -> dict:
    """`{"url", "token"}` of the master hosted by `serverapp` (for tests and tools); with a
    shared master, its URL and no token (the user's own credential applies)."""
    point = serverapp.extension_manager.extension_points["jupyter_determined"]
    extension: DeterminedServerExtension = point.app
    token = extension.master.user_token if extension.master is not None else None
    return {"url": extension.master_url, "token": token}


__all__ = [
    "DeterminedServerExtension",
    "EXPORT_PREVIEW_PATH",
    "TENSORBOARD_PATH",
    "ExportPreviewHandler",
    "URL_SEGMENT",
    "master_info",
    "authorize_jupyter_user",
    "AUTH_RESOURCE",
]
