"""`master-lite --jupyterhub`: the master as a JupyterHub-managed service.

JupyterHub starts a managed service with the standard `JUPYTERHUB_*` variables (its API
token and URL, the service's name, URL prefix, bind URL and OAuth client). `HubService` reads
them; the app then serves the whole API under the prefix (`<hub>/services/<name>/api/v1/...`
through the Hub's proxy), identifies callers through the Hub (master_lite/users/_hub.py), and
shows a small page at the prefix that signs a browser in with the Hub's OAuth.
(docs/team.md, "The shared master as a JupyterHub service".)
"""

from __future__ import annotations

import dataclasses
import html
import os
import urllib.parse
from collections.abc import Mapping
from typing import Any

import tornado.web

from master_lite import errors

# The variables a managed service gets from JupyterHub that the master needs.
REQUIRED_VARIABLES = ("JUPYTERHUB_API_TOKEN", "JUPYTERHUB_API_URL", "JUPYTERHUB_SERVICE_PREFIX")
# How long a Hub answer about a token is reused (seconds): a user deleted from the Hub, or a
# revoked token, stops working here at most this long after. Env: MASTER_LITE_HUB_CACHE_SECONDS.
DEFAULT_CACHE_SECONDS = 60


class HubServiceError(ValueError):
    """`--jupyterhub` without what a Hub-managed service is given; the message says what."""


@dataclasses.dataclass(frozen=True)
class HubService:
    """What JupyterHub told this service about itself (from the environment)."""

    api_token: str
    api_url: str
    prefix: str  # "/services/determined/"
    name: str = "determined"
    service_url: str = ""  # where to listen, e.g. "http://127.0.0.1:10101"
    client_id: str = ""
    callback_url: str = ""
    hub_host: str = ""
    cache_seconds: int = DEFAULT_CACHE_SECONDS

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> HubService:
        env = os.environ if environ is None else environ
        for name in REQUIRED_VARIABLES:
            if not env.get(name):
                raise HubServiceError(
                    f"--jupyterhub needs {name}: run it as a JupyterHub service "
                    "(c.JupyterHub.services, see docs/team.md), which sets the JUPYTERHUB_* "
                    "variables"
                )
        prefix = env["JUPYTERHUB_SERVICE_PREFIX"]
        prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
        name = env.get("JUPYTERHUB_SERVICE_NAME") or "determined"
        raw_cache = env.get("MASTER_LITE_HUB_CACHE_SECONDS") or str(DEFAULT_CACHE_SECONDS)
        try:
            cache_seconds = int(raw_cache)
            if cache_seconds < 1:
                raise ValueError(raw_cache)
        except ValueError:
            raise HubServiceError(
                f"MASTER_LITE_HUB_CACHE_SECONDS={raw_cache!r}: expected a whole number of "
                "seconds >= 1"
            ) from None
        return cls(
            api_token=env["JUPYTERHUB_API_TOKEN"],
            api_url=env["JUPYTERHUB_API_URL"],
            prefix=prefix,
            name=name,
            service_url=env.get("JUPYTERHUB_SERVICE_URL", ""),
            # A managed service with oauth_client_id unset gets "service-<name>".
            client_id=env.get("JUPYTERHUB_CLIENT_ID") or f"service-{name}",
            callback_url=env.get("JUPYTERHUB_OAUTH_CALLBACK_URL", ""),
            hub_host=env.get("JUPYTERHUB_HOST", ""),
            cache_seconds=cache_seconds,
        )

    def bind_address(self) -> tuple[str | None, int | None]:
        """Host and port of JUPYTERHUB_SERVICE_URL (None for what it does not say)."""
        if not self.service_url:
            return None, None
        parts = urllib.parse.urlsplit(self.service_url)
        return parts.hostname, parts.port

    def make_auth(self) -> Any:
        """The library's `HubOAuth` for this service."""
        from master_lite.users import make_hub_auth

        return make_hub_auth(
            api_url=self.api_url,
            api_token=self.api_token,
            base_url=self.prefix,
            service_name=self.name,
            client_id=self.client_id,
            callback_url=self.callback_url,
            hub_host=self.hub_host,
            cache_max_age=self.cache_seconds,
        )


def hub_handlers(master: Any, auth: Any) -> list[tuple[str, type, dict]]:
    """The service page at the prefix and the OAuth callback (the API is served beside)."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

    prefix = auth.base_url  # "/services/determined/"

    class CallbackHandler(HubOAuthCallbackHandler):
        def initialize(self, hub_auth: Any) -> None:
            self.hub_auth = hub_auth

    class ServicePageHandler(HubOAuthenticated, tornado.web.RequestHandler):
        """Who you are signed in as and where the API is; signs a browser in with the Hub's
        OAuth first (asked without blocking the event loop)."""

        def initialize(self, hub_auth: Any) -> None:
            self.hub_auth = hub_auth

        async def get(self) -> None:
            try:
                model = await self.hub_auth.get_user(self, sync=False)
            except tornado.web.HTTPError as exc:
                raise tornado.web.HTTPError(
                    503, f"the JupyterHub at {self.hub_auth.api_url} did not answer: {exc}"
                ) from None
            if not model:
                self.redirect(self.get_login_url())
                return
            try:
                principal = master.users.hub.principal_for(model)
            except errors.MasterError as exc:
                self.set_status(exc.status)
                self.finish(_page("Not allowed", f"<p>{html.escape(exc.message)}</p>"))
                return
            api = f"{prefix}api/v1/"
            role = "an admin" if principal.admin else "a user"
            self.finish(
                _page(
                    "Determined (master-lite)",
                    f"<p>Signed in as <b id='user'>{html.escape(principal.name)}</b> "
                    f"({role} of this master).</p>"
                    f"<p>The API is at <code>{html.escape(api)}</code>, e.g. "
                    f"<a href='{html.escape(api)}me'>{html.escape(api)}me</a>. Programs send "
                    "<code>Authorization: token &lt;JupyterHub API token&gt;</code>; "
                    "<code>det</code> uses "
                    f"<code>DET_MASTER=&lt;hub&gt;{html.escape(prefix.rstrip('/'))}</code>.</p>",
                )
            )

    return [
        (prefix + "oauth_callback", CallbackHandler, {"hub_auth": auth}),
        (prefix.rstrip("/") + "/?", ServicePageHandler, {"hub_auth": auth}),
    ]


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


__all__ = ["HubService", "HubServiceError", "hub_handlers"]
