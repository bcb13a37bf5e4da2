"""The master's HTTP API (tornado), mountable standalone or inside jupyter_server.

`make_handlers(master, prefix)` returns tornado route specs for every endpoint under
`prefix + "/api/v1/"`. Standalone, callers authenticate with the master token; inside
jupyter_server pass `base_handler=APIHandler` and a `user_auth(handler, action)` that accepts
Jupyter's logged-in user when the server's authorizer allows the operation's action
(`Operation.action_for`).
"""

from __future__ import annotations

from typing import Any

import tornado.web

from determined.common import context as context_mod
from master_lite.api._base import (
    ApiError,
    ApiHandlerMixin,
    NotFoundHandlerMixin,
    UserAuth,
    max_body_bytes,
)
from master_lite.api._declarations import Operation, Param, PathParam, Route, TrialScope
from master_lite.api._openapi import build_document
from master_lite.api._routes import ROUTES


def make_handlers(
    master: Any,
    prefix: str = "",
    *,
    base_handler: type[tornado.web.RequestHandler] = tornado.web.RequestHandler,
    user_auth: UserAuth | None = None,
    context_size_limit: int = context_mod.DEFAULT_LIMIT_BYTES,
) -> list[tuple[str, type, dict]]:
    """Tornado `(pattern, handler class, kwargs)` for every route, under `prefix/api/v1`.

    `prefix` is the URL path before `/api/v1` ("" standalone; "<base_url>determined" in
    JupyterLab). The last entry answers JSON 404 for unknown paths under the API root.
    """
    prefix = prefix.rstrip("/")
    shared = {"api_routes": ROUTES, "api_prefix": prefix}
    common = {
        "master": master,
        "user_auth": user_auth,
        "body_limit": max_body_bytes(context_size_limit),
    }
    handlers: list[tuple[str, type, dict]] = []
    for route in ROUTES:
        for method in route.operations:
            # jupyter_server's prepare() refuses requests without a Jupyter user unless the
            # method is marked; ours authenticate trial tokens themselves (and ask `user_auth`).
            setattr(getattr(route.handler, method), "__allow_unauthenticated", True)
        handler = type(route.handler.__name__, (route.handler, base_handler), dict(shared))
        handlers.append(
            (prefix + "/api/v1" + route.tornado_pattern(), handler, {**common, "route": route})
        )
    not_found = type("NotFoundHandler", (NotFoundHandlerMixin, base_handler), dict(shared))
    handlers.append(
        (
            prefix + "/api/v1/.*",
            not_found,
            {**common, "route": Route("/.*", NotFoundHandlerMixin, {})},
        )
    )
    return handlers


__all__ = [
    "make_handlers",
    "build_document",
    "ROUTES",
    "Route",
    "Operation",
    "Param",
    "PathParam",
    "TrialScope",
    "ApiError",
    "ApiHandlerMixin",
    "UserAuth",
    "max_body_bytes",
]
