"""Hub identity: a master run as a JupyterHub service knows its callers through the Hub.

A token the master does not know itself (not the master token, a session or a trial's) is
asked of the Hub with JupyterHub's own client library (`jupyterhub.services.auth.HubOAuth`),
and so is the service's OAuth cookie of a browser. The Hub user it names is the master user
of the same name (made without a password on first sight); its admin flag is the Hub's:
a Hub admin or a member of the Hub group `determined-admins`, recomputed at every
identification. A master admin's `det user deactivate` still wins over the Hub.
(docs/team.md, "The shared master as a JupyterHub service".)
"""

from __future__ import annotations

from typing import Any

import tornado.web

from master_lite import errors
from master_lite._core import MasterState, _auth
from master_lite.store import OWNER_ID

from ._usernames import check_username

# Members of this Hub group are the master's admins (beside the Hub's own admins).
ADMIN_GROUP = "determined-admins"
# Credentials the master issues itself: never sent to the Hub (it cannot know them, and a
# trial's or a user's session token must not leave the master).
_MASTER_TOKEN_PREFIXES = ("session.", "trial.")


class HubIdentity:
    """Who a request comes from, asked of the JupyterHub whose service this master is.

    `auth` is a configured `jupyterhub.services.auth.HubOAuth` (api_url, api_token,
    access_scopes, cache_max_age, ...); only its asynchronous calls are used, so the event
    loop never waits on the Hub.
    """

    def __init__(self, shared: MasterState, auth: Any, *, admin_group: str = ADMIN_GROUP) -> None:
        self._shared = shared
        self.auth = auth
        self.admin_group = admin_group

    @property
    def hub_url(self) -> str:
        """The Hub's API URL (for messages)."""
        return str(self.auth.api_url)

    @property
    def required_scopes(self) -> list[str]:
        return sorted(self.auth.access_scopes)

    async def identify(self, handler: tornado.web.RequestHandler, token: str | None) -> Any:
        """The user of `token` (a Hub API token) or, without one, of the service's OAuth cookie;
        None when the Hub knows neither. Forbidden: not a user, or without the access scope;
        Unauthorized: deactivated here; Unavailable: the Hub did not answer."""
        try:
            if token:
                if token.startswith(_MASTER_TOKEN_PREFIXES):
                    return None
                model = await self.auth.user_for_token(
                    token,
                    use_cache=True,
                    session_id=self.auth.get_session_id(handler),
                    sync=False,
                )
            elif handler.application.settings.get("cookie_secret"):
                # The OAuth cookie (set at <prefix>oauth_callback); a POST without the
                # Hub's XSRF token is not accepted on the cookie alone (the library checks).
                model = await self.auth.get_user(handler, sync=False)
            else:
                return None  # an application without a cookie secret signs no browser in
        except tornado.web.HTTPError as exc:
            detail = exc.log_message or str(exc)
            raise errors.Unavailable(
                f"the JupyterHub at {self.hub_url} did not answer the master's question "
                f"about this token ({detail}): the master cannot identify Hub users until "
                "it does; retry later, or ask the Hub's administrator"
            ) from None
        if not model:
            return None
        return self.principal_for(model)

    def unauthorized(self, *, token_given: bool) -> str:
        """The 401 message when neither the master nor the Hub knows the caller."""
        if token_given:
            return (
                "missing or invalid token: the token given is not the master's token, a live "
                f"session or trial token, nor a token the JupyterHub at {self.hub_url} knows "
                "(expired or revoked, or its user was deleted from the Hub)"
            )
        return (
            "missing token: send 'Authorization: token <your JupyterHub API token>' (in a "
            "JupyterHub single-user server: $JUPYTERHUB_API_TOKEN), or sign in with a browser "
            f"at {self.auth.base_url}"
        )

    def principal_for(self, model: dict) -> _auth.UserPrincipal:
        """The master user of the Hub user `model` (the Hub's identify answer)."""
        name = str(model.get("name", ""))
        kind = model.get("kind", "user")
        if kind != "user":
            raise errors.Forbidden(
                f"JupyterHub {kind} {name!r} is not a user: only Hub users may use this "
                "master; send a user's JupyterHub API token"
            )
        if not self.auth.check_scopes(self.auth.access_scopes, model):
            wanted = " or ".join(self.required_scopes)
            raise errors.Forbidden(
                f"the JupyterHub token of user {name} lacks the scope {wanted}: ask the Hub's "
                "administrator for a role that grants it (docs/team.md), then use a new token"
            )
        admin = bool(model.get("admin")) or self.admin_group in (model.get("groups") or ())
        return self._master_user(name, admin)

    def _master_user(self, name: str, admin: bool) -> _auth.UserPrincipal:
        users = self._shared.store.users
        row = users.by_name(name)
        if row is None:
            try:
                check_username(name)
            except errors.InvalidRequest as exc:
                raise errors.Forbidden(
                    f"JupyterHub user {name!r} cannot be a user of this master: {exc}"
                ) from None
            new_id = users.create(name, password_hash=None, admin=admin)
            # None: made at the same moment by another request.
            row = users.get(new_id) if new_id is not None else users.by_name(name)
            if row is None:  # made and renamed at once: ask again
                raise errors.Conflict(f"user {name!r} changed while being made; retry")
        if not row.active:
            raise errors.Unauthorized(
                f"user {row.username!r} is deactivated on this master: its JupyterHub sign-in "
                f"no longer works here; an admin can activate it (det user activate "
                f"{row.username})"
            )
        if row.id == OWNER_ID:
            admin = True  # the owner account stays an admin
        elif row.admin != admin:
            users.change(row.id, admin=admin)
        return _auth.UserPrincipal(name=row.username, user_id=row.id, admin=admin)


def make_hub_auth(
    *,
    api_url: str,
    api_token: str,
    base_url: str,
    service_name: str,
    client_id: str,
    callback_url: str = "",
    hub_host: str = "",
    cache_max_age: int = 60,
    access_scopes: set[str] | None = None,
) -> Any:
    """A `HubOAuth` for the service `service_name`, configured explicitly (not from the
    process's environment, so tests and embedders may build several)."""
    from jupyterhub.services.auth import HubOAuth  # the `hub` extra

    settings: dict[str, Any] = {
        "api_url": api_url,
        "api_token": api_token,
        "base_url": base_url,
        "oauth_client_id": client_id,
        "hub_host": hub_host,
        "cache_max_age": cache_max_age,
        "access_scopes": access_scopes
        if access_scopes is not None
        else {f"access:services!service={service_name}"},
    }
    if callback_url:
        settings["oauth_redirect_uri"] = callback_url
    return HubOAuth(**settings)


__all__ = ["ADMIN_GROUP", "HubIdentity", "make_hub_auth"]
