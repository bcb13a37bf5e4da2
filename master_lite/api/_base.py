"""What every API handler shares: who is asking, what they may touch, parsing, errors.

The logic lives in `ApiHandlerMixin`, which `make_handlers` combines with a base handler class:
`tornado.web.RequestHandler` standalone, jupyter_server's `APIHandler` inside JupyterLab. So the
same handlers serve both, and nothing here may assume more of the base class than tornado gives.
"""

from __future__ import annotations

import errno
import http
import inspect
import json
import logging
import re
import sqlite3
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import tornado.web

from master_lite import errors
from master_lite._core import _limits, strict_dumps
from master_lite._core._auth import TrialPrincipal, UserPrincipal
from master_lite.api._declarations import Operation, Param, Route, TrialScope
from master_lite.api._parsing import (
    SQLITE_INT_MAX,
    SQLITE_INT_MIN,
    ApiError,
    checkpoint_trial_id,
    decode_base64,
    error_line,
    json_default,
    max_body_bytes,
    parse_query_value,
    request_validator,
    unauthorized,
    unstorable_text,
)
from master_lite.api._permissions import check_body_owner, check_path_owner, creator_id
from master_lite.api._reads import check_path_reader, readable_answer

log = logging.getLogger("master_lite.api")

# How a host (jupyter_server) vouches for its logged-in user: `(handler, action)` → True when
# the user may do `action` ("read", "write", "execute"), False when nobody is logged in; it
# raises a 403 HTTPError when the host's authorizer refuses.
UserAuth = Callable[[Any, str], bool | Awaitable[bool]]


if TYPE_CHECKING:
    # What the mixins are mixed into: tornado's RequestHandler, or jupyter_server's APIHandler.
    _Handler = tornado.web.RequestHandler
else:
    _Handler = object


def encode_json(payload: Any) -> str:
    """The strict JSON text of an answer (non-finite numbers as "NaN", docs/rest-api.md)."""
    return strict_dumps(payload, default=json_default)


class ApiHandlerMixin(_Handler):
    """Handler logic; concrete handlers are `type(name, (Handler, base_handler), {})`.

    Before a handler method runs, `prepare` has: authenticated the caller (`self.principal`),
    checked a trial token against the operation's `trial_scope`, parsed the query into
    `self.args` and the JSON body into `self.body`, and converted path parameters.
    """

    # Set by `initialize` from the route's kwargs.
    master: Any
    route: Route
    user_auth: UserAuth | None
    body_limit: int

    # Set on each concrete class by `make_handlers` (the OpenAPI handler reads them).
    api_routes: tuple[Route, ...] = ()
    api_prefix: str = ""

    principal: UserPrincipal | TrialPrincipal | None = None
    operation: Operation | None = None
    args: dict[str, Any]
    body: Any = None

    def initialize(
        self,
        *,
        master: Any,
        route: Route,
        user_auth: UserAuth | None,
        body_limit: int,
        **kwargs: Any,
    ) -> None:
        self.master = master
        self.route = route
        self.user_auth = user_auth
        self.body_limit = body_limit
        self.args = {}
        parent = getattr(super(), "initialize", None)
        if parent is not None:
            parent(**kwargs)

    # --- who is asking ---------------------------------------------------------------------

    def request_token(self) -> str | None:
        header = self.request.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() in ("bearer", "token") and value.strip():
            return value.strip()
        return self.get_query_argument("token", None) or None

    def _principal_from_token(self) -> UserPrincipal | TrialPrincipal | None:
        token = self.request_token()
        return self.master.authenticate(token) if token else None

    def check_xsrf_cookie(self) -> None:
        # Inside jupyter_server, trial processes post with their session token and no cookie;
        # a request that carries a valid master-issued token is not a browser form post.
        if self._principal_from_token() is not None:
            return None
        return super().check_xsrf_cookie()

    def owner_id(self) -> int:
        """Who owns what this request creates (_permissions.creator_id)."""
        return creator_id(self.master, self.principal)

    async def _authenticate(self, action: str) -> UserPrincipal | TrialPrincipal:
        token, hub = self.request_token(), self.master.users.hub
        # A Hub service asks the Hub last (a Hub token, or its OAuth cookie); never a redirect.
        principal = await self.master.identify(self, token) if hub else self._principal_from_token()
        if principal is not None:
            return principal
        if self.user_auth is not None and hub is None:
            # The host's user (Jupyter's login): `user_auth` answers False for nobody logged
            # in, and raises a 403 when the host's authorizer refuses `action`.
            allowed = self.user_auth(self, action)
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if allowed:
                return self.master.users.owner_principal()
        raise unauthorized(token_given=bool(token), hub=hub)

    # --- the request pipeline ----------------------------------------------------------------

    async def prepare(self) -> None:
        parent = super().prepare()
        if inspect.isawaitable(parent):
            await parent
        if self._finished:
            return
        method = self.request.method.lower()
        if method not in self.route.operations:
            return  # tornado answers 405 from the unimplemented method
        operation = self.operation = self.route.operations[method]
        self._convert_path_params()
        size = len(self.request.body or b"")
        if operation.max_body_bytes is not None and size > operation.max_body_bytes:
            raise ApiError(
                413,
                f"request body of {size} bytes exceeds the limit of {operation.max_body_bytes} "
                f"bytes of {self.request.method} {self.route.path}; send it in smaller parts",
            )
        if size > self.body_limit:
            raise ApiError(
                413,
                f"request body of {len(self.request.body)} bytes exceeds the limit "
                f"of {self.body_limit} bytes (context_size_limit, base64-encoded, "
                "plus the config); shrink the context with a .detignore file",
            )
        if operation.auth:
            self.principal = await self._authenticate(operation.action_for(method))
        trial = self.principal if isinstance(self.principal, TrialPrincipal) else None
        if trial is not None:
            self._check_path_scope(trial, operation)
        # Another's object a user may not read (read_access "own"): 404, as none at all.
        check_path_reader(self.master, self.principal, self.route, operation, self.path_kwargs)
        # A user acting on another's object: 403 before the handler's state checks.
        check_path_owner(self.master, self.principal, operation, method, self.path_kwargs)
        self.args = {param.name: self._query_value(param) for param in operation.query}
        if operation.request is not None:
            self.body = self._json_body(operation.request, operation.fast_accept)
        if trial is not None:
            self._check_resource_scope(trial, operation)
        check_body_owner(self.master, self.principal, operation, self.body)

    def _convert_path_params(self) -> None:
        for param in self.route.params:
            raw = self.path_kwargs.get(param.name)
            if raw is not None:
                value = param.convert(raw)
                # No row can have an id beyond SQLite's integers (which would raise there).
                if isinstance(value, int) and not SQLITE_INT_MIN <= value <= SQLITE_INT_MAX:
                    raise ApiError(404, f"{param.description} {raw} not found")
                self.path_kwargs[param.name] = value

    def _query_value(self, param: Param) -> Any:
        raw = self.get_query_argument(param.name, None)
        if raw is None or raw == "":
            return param.default
        return parse_query_value(param, raw)

    def _json_body(self, schema: dict, fast_accept: Callable[[Any], bool] | None = None) -> Any:
        raw = self.request.body or b""
        if not raw.strip():
            body: Any = {}
        else:
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ApiError(400, f"request body is not valid JSON: {exc}") from None
            except ValueError as exc:  # an integer of over 4300 digits (sys.int_info)
                problem = f"body: {exc}; integers must fit in 64 bits"
                raise ApiError(400, problem, [problem]) from None
            except RecursionError:  # the parser recurses per level: thousands of `[`
                problem = (
                    f"body: nested deeper than {_limits.MAX_JSON_DEPTH} levels of objects and "
                    "arrays (the limit of every request body)"
                )
                raise ApiError(400, problem, [problem]) from None
            # Before any other work: every step after parsing (validation, copies, encoding,
            # the store) recurses per level or stores 64-bit integers.
            where = _limits.body_problem(body)
            if where:
                raise ApiError(400, f"invalid request body: {where}", [where])
        if fast_accept is not None and fast_accept(body):
            return body
        validator = request_validator(schema)
        problems = sorted(
            validator.iter_errors(body), key=lambda error: list(map(str, error.absolute_path))
        )
        if problems:
            messages = [error_line(e) for e in problems]
            raise ApiError(400, f"invalid request body: {messages[0]}", messages)
        return body

    def _check_path_scope(self, principal: TrialPrincipal, operation: Operation) -> None:
        who = f"trial token of trial {principal.trial_id}"
        scope = operation.trial_scope
        kwargs = self.path_kwargs
        if scope is None:
            raise ApiError(
                403,
                f"{who} may not call {self.request.method} "
                f"{self.request.path}: this endpoint needs the user token",
            )
        if scope is TrialScope.TRIAL and kwargs["trial_id"] != principal.trial_id:
            raise ApiError(403, f"{who} may not access trial {kwargs['trial_id']}")
        if scope is TrialScope.ALLOCATION and kwargs["allocation_id"] != principal.allocation_id:
            raise ApiError(
                403,
                f"{who} (allocation {principal.allocation_id}) may not access "
                f"allocation {kwargs['allocation_id']}",
            )
        if scope is TrialScope.EXPERIMENT and kwargs["experiment_id"] != principal.experiment_id:
            raise ApiError(
                403,
                f"{who} (experiment {principal.experiment_id}) may not access "
                f"experiment {kwargs['experiment_id']}",
            )

    def _check_resource_scope(self, principal: TrialPrincipal, operation: Operation) -> None:
        """Checks that need the body or a stored object (run after parsing)."""
        who = f"trial token of trial {principal.trial_id}"
        scope = operation.trial_scope
        if scope is TrialScope.CHECKPOINT_READ:
            self._check_checkpoint_readable(principal, self.path_kwargs["uuid"])
        if scope is TrialScope.CHECKPOINT_REPORT:
            trial_id = checkpoint_trial_id(self.body)
            if trial_id != principal.trial_id:
                raise ApiError(403, f"{who} may not report a checkpoint of trial {trial_id}")
            allocation_id = self.body.get("allocationId")
            if allocation_id is not None and allocation_id != principal.allocation_id:
                raise ApiError(
                    403,
                    f"{who} (allocation {principal.allocation_id}) may not report "
                    f"a checkpoint of allocation {allocation_id}",
                )
        if scope is TrialScope.CHECKPOINT_DELETE:
            for item in self.body.get("checkpoints", []):
                checkpoint = self.master.checkpoints.get_checkpoint(item["uuid"])
                if checkpoint.get("experiment_id") != principal.experiment_id:
                    raise ApiError(
                        403,
                        f"{who} (experiment {principal.experiment_id}) may not "
                        f"delete checkpoint {item['uuid']} of experiment "
                        f"{checkpoint.get('experiment_id')}",
                    )

    def _check_checkpoint_readable(self, principal: TrialPrincipal, uuid: str) -> None:
        checkpoint = self.master.checkpoints.get_checkpoint(uuid)  # NotFound -> 404 either way
        if checkpoint.get("experiment_id") == principal.experiment_id:
            return
        if uuid in self._warm_start_sources(principal):
            return
        raise ApiError(
            403,
            f"trial token of trial {principal.trial_id} (experiment "
            f"{principal.experiment_id}) may not access checkpoint {uuid} of "
            f"experiment {checkpoint.get('experiment_id')}",
        )

    def _warm_start_sources(self, principal: TrialPrincipal) -> set[str]:
        """Checkpoints a trial may start from although another experiment wrote them."""
        trial = self.master.views.get_trial(principal.trial_id)
        sources = {trial.get("warm_start_checkpoint"), trial.get("latest_checkpoint")}
        config = self.master.views.get_experiment_config(principal.experiment_id)
        searcher = config.get("searcher") or {}
        sources.add(searcher.get("source_checkpoint_uuid"))
        source_trial_id = searcher.get("source_trial_id")
        if source_trial_id is not None:
            source_trial = self.master.views.get_trial(source_trial_id)
            sources.add(source_trial.get("latest_checkpoint"))
        return {uuid for uuid in sources if uuid}

    # --- answers -----------------------------------------------------------------------------

    def send_json(self, payload: Any, status: int = 200) -> None:
        # Strict JSON (NaN as "NaN", docs/rest-api.md); lists narrowed to what one may read.
        payload = readable_answer(self.master, self.principal, self.operation, payload)
        self.send_json_text(encode_json(payload), status)

    def send_json_text(self, text: str, status: int = 200) -> None:
        """Answer JSON text already encoded by `encode_json` (e.g. in the read pool)."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(text)

    async def send_bytes(self, data: bytes, content_type: str, filename: str) -> None:
        self.set_header("Content-Type", content_type)
        self.set_header("Content-Disposition", f'attachment; filename="{filename}"')
        self.set_header("Content-Length", len(data))
        self.write(data)
        # Headers go out now: jupyter's APIHandler.finish() would relabel them as JSON.
        await self.flush()
        self.finish()

    async def read(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a read of the views (`self.master.views.list_experiments`) in the store's read
        pool, off the event loop: reads run beside each other and beside the writes."""
        return await self.master.read(method, *args, **kwargs)

    async def send_read(
        self, key: str, method: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> None:
        """Answer `{key: method(*args, **kwargs)}`, read and encoded in the read pool (a list of
        thousands of objects is encoded off the loop too)."""

        def read_and_encode() -> str:
            answer = {key: method(*args, **kwargs)}
            return encode_json(readable_answer(self.master, self.principal, self.operation, answer))

        self.send_json_text(await self.read(read_and_encode))

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a facade method; some (long polls) are coroutines."""
        result = method(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _request_summary(self) -> str:
        # tornado's access log and error log use this; EventSource puts the token in the query.
        uri = re.sub(r"([?&]token=)[^&]*", r"\1<redacted>", self.request.uri or "")
        return f"{self.request.method} {uri} ({self.request.remote_ip})"

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        client_error = isinstance(value, UnicodeEncodeError) and unstorable_text(self.body)
        if isinstance(value, (ApiError, errors.MasterError)) or client_error:
            log.info(
                "%s %s -> %s: %s",
                self.request.method,
                self.request.path,
                400 if client_error else getattr(value, "status", "?"),
                value,
            )
            return
        super().log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        errors_list: list[str] = []
        if isinstance(exc, ApiError):
            status_code, message, errors_list = exc.status, exc.message, exc.errors
        elif isinstance(exc, errors.MasterError) and exc.status != 500:
            status_code, message, errors_list = exc.status, exc.message, exc.errors
        elif isinstance(exc, UnicodeEncodeError) and unstorable_text(self.body):
            # Found only now, after the write failed (its transaction rolled back).
            status_code = 400
            message = f"{unstorable_text(self.body)}: send valid Unicode (UTF-8) text"
        elif status_code == 405:
            allowed = ", ".join(m.upper() for m in self.route.operations)
            message = f"{self.request.method} is not allowed on {self.request.path}; use {allowed}"
        elif _is_storage_failure(exc):
            status_code = 507
            message = (
                f"the master could not write to its store ({exc}): the disk holding its "
                "root dir may be full or read-only; free space and retry"
            )
        elif status_code >= 500:
            # The traceback went to the log (log_exception); never into the answer.
            message = "internal error in master_lite; the master's log has the details"
        elif isinstance(exc, tornado.web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
        else:
            message = http.HTTPStatus(status_code).phrase
        payload: dict[str, Any] = {"message": message}
        if errors_list:
            payload["errors"] = errors_list
        self.clear_header("Content-Disposition")
        self.set_status(status_code)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(strict_dumps(payload))


def _is_storage_failure(exc: BaseException | None) -> bool:
    """A full disk or read-only root dir (SQLite reports EFBIG as a disk I/O error)."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return any(
            sign in text for sign in ("disk is full", "disk i/o error", "readonly", "read-only")
        )
    return isinstance(exc, OSError) and exc.errno in (
        errno.ENOSPC,
        errno.EFBIG,
        errno.EROFS,
        errno.EDQUOT,
    )


class NotFoundHandlerMixin(ApiHandlerMixin):
    """JSON 404 for any path under /api/v1 that no route serves."""

    async def prepare(self) -> None:
        raise ApiError(
            404,
            f"no endpoint {self.request.method} {self.request.path}; "
            "GET /api/v1/openapi.json lists them all",
        )


__all__ = [
    "ApiHandlerMixin",
    "ApiError",
    "NotFoundHandlerMixin",
    "max_body_bytes",
    "checkpoint_trial_id",
    "decode_base64",
]
