"""An authenticated session with the master's REST API (requests, with retries on connect errors).

`requests` is imported on a session's first request, not with this module: it costs ~100 ms of
start-up, and in a trial the first request is made by a background thread (the preemption
watcher), so `det.core.init()` and the user's code never wait for it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from determined.common.api._errors import APIError, MasterUnreachable, error_for_status
from determined.common.api._master import MasterAddress, discover_master, unreachable_message
from determined.common.api._nonfinite import decode_non_finite, may_hold_non_finite

if TYPE_CHECKING:
    import requests

# Someone is waiting (a notebook cell, a `det` command): a refused connection is reported after
# two quick retries (0.6 s, enough for a master that is just restarting), not after ~6 s.
INTERACTIVE_CONNECT_RETRIES = 2
INTERACTIVE_CONNECT_TIMEOUT_S = 10.0
_ERRNO_REASON = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")


class Session:
    """`Session(url, token)`; paths are relative to `<url>/api/v1`, e.g. `session.get("/experiments")`."""

    def __init__(
        self,
        master_url: str,
        token: str | None,
        *,
        timeout: float = 60.0,
        connect_retries: int = 5,
        connect_timeout: float | None = None,
        address: MasterAddress | None = None,
    ) -> None:
        """`connect_timeout` bounds establishing a connection (default: `timeout`); `address`
        (from `discover_master`) lets a connection failure say where the URL came from."""
        self.master_url = master_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.connect_retries = connect_retries
        self.connect_timeout = connect_timeout
        self.address = address
        self._http: requests.Session | None = None  # made by the first request
        self._pool: Any = None  # urllib3 pool of the fast path, made with _http
        self._origin = ""  # scheme://host:port of master_url (the pool's)

    def _client(self) -> requests.Session:
        if self._http is None:
            import requests

            http = requests.Session()
            if self.token:
                # "Bearer" for the master's own tokens; "token" for a JupyterHub API token
                # (discover_master says which), the scheme JupyterHub's clients use.
                scheme = self.address.token_scheme if self.address is not None else "Bearer"
                http.headers["Authorization"] = f"{scheme} {self.token}"
            # This session talks to one host, so the environment's say on it (proxies,
            # REQUESTS_CA_BUNDLE) is settled once here; requests would otherwise re-read the
            # environment and ~/.netrc on every request, which is most of a metrics POST's CPU in
            # a trial's shipping thread (time the training loop loses to the GIL).
            settings = http.merge_environment_settings(self.master_url, {}, None, None, None)
            http.proxies.update(settings["proxies"])
            http.verify = settings["verify"]
            http.trust_env = False
            if self.master_url.startswith("http://") and not http.proxies:
                import urllib3

                # Pre-encoded bodies (the Core API's metrics batches, several a second from a
                # trial) go through urllib3, the transport requests itself uses, without
                # requests' per-call preparation: about a quarter less CPU per POST, left to
                # the training loop.
                self._pool = urllib3.connection_from_url(self.master_url, maxsize=4, block=False)
                parsed = urllib3.util.parse_url(self.master_url)
                self._origin = f"{parsed.scheme}://{parsed.netloc}"
            self._http = http
        return self._http

    def _send_bytes(
        self, method: str, url: str, data: bytes, headers: dict[str, str] | None, timeout: float
    ) -> requests.Response:
        """`request()`'s fast path for a pre-encoded body to a plain-HTTP master (no proxy)."""
        import requests
        import urllib3

        assert self._pool is not None and self._http is not None  # set together by _client()
        try:
            # The pool knows the host; the request line names the path (origin form).
            target = url[len(self._origin) :]
            raw = self._pool.urlopen(
                method,
                target,
                body=data,
                headers={**self._http.headers, **(headers or {})},
                timeout=urllib3.Timeout(total=timeout),
                retries=False,
                redirect=False,
            )
        except urllib3.exceptions.ReadTimeoutError as e:  # as requests says it (not retried)
            raise requests.ReadTimeout(e) from e
        except urllib3.exceptions.HTTPError as e:  # refused, reset: retried like requests' own
            raise requests.ConnectionError(e) from e
        response = requests.Response()
        response.status_code = raw.status
        response.reason = raw.reason
        response.headers = requests.structures.CaseInsensitiveDict(raw.headers)
        response._content = raw.data
        response.url = url
        response.encoding = requests.utils.get_encoding_from_headers(response.headers)
        return response

    def url(self, path: str) -> str:
        return f"{self.master_url}/api/v1/{path.lstrip('/')}"

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        stream: bool = False,
    ) -> requests.Response:
        import requests

        http = self._client()
        params = {k: v for k, v in (params or {}).items() if v is not None}
        json_arg = json_body
        if json_body is not None and data is None:
            try:
                json.dumps(json_body, allow_nan=False)
            except ValueError:
                # requests refuses NaN/Infinity (allow_nan=False), so a diverged searcher
                # metric could not even be sent: encode it here, as the bare tokens Python
                # writes (what the master reads, as for metric reports; docs/rest-api.md).
                data = json.dumps(json_body).encode()
                headers = {"Content-Type": "application/json", **(headers or {})}
                json_arg = None
        delay = 0.2
        for attempt in range(self.connect_retries + 1):
            try:
                if (
                    self._pool is not None
                    and data is not None
                    and json_body is None
                    and not params
                    and not stream
                ):
                    response = self._send_bytes(
                        method,
                        self.url(path),
                        data,
                        headers,
                        timeout if timeout is not None else self.timeout,
                    )
                    break
                read_timeout = timeout if timeout is not None else self.timeout
                response = http.request(
                    method,
                    self.url(path),
                    params=params,
                    json=json_arg,
                    data=data,
                    headers=headers,
                    timeout=read_timeout
                    if self.connect_timeout is None
                    else (self.connect_timeout, read_timeout),
                    stream=stream,
                )
                break
            except requests.ConnectionError as e:
                # The master may be restarting (JupyterLab restart, recovery): retry briefly.
                if attempt == self.connect_retries:
                    raise MasterUnreachable(
                        0, unreachable_message(self.master_url, _reason(e), self.address)
                    ) from e
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        if response.status_code >= 400:
            raise _error_from(response)
        return response

    def get(self, path: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        return _json(self.request("GET", path, params=params, **kw))

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return _json(self.request("POST", path, json_body=body if body is not None else {}, **kw))

    def patch(self, path: str, body: Any = None, **kw: Any) -> Any:
        return _json(self.request("PATCH", path, json_body=body if body is not None else {}, **kw))

    def delete(self, path: str, **kw: Any) -> Any:
        return _json(self.request("DELETE", path, **kw))

    def get_bytes(self, path: str, params: dict[str, Any] | None = None) -> bytes:
        return self.request("GET", path, params=params).content

    def events(self, params: dict[str, Any] | None = None) -> Iterator[tuple[str, Any]]:
        """Follow the server-sent event stream: yields (type, payload) until the server closes."""
        response = self.request("GET", "/events", params=params, stream=True, timeout=None)
        event_type = "message"
        data_lines: list[str] = []
        for raw in response.iter_lines(decode_unicode=True):
            if raw is None:
                continue
            if raw == "":
                if data_lines:
                    text = "\n".join(data_lines)
                    payload = json.loads(text)
                    if may_hold_non_finite(text):
                        payload = decode_non_finite(payload)
                    yield event_type, payload
                event_type, data_lines = "message", []
            elif raw.startswith(":"):
                continue
            elif raw.startswith("event:"):
                event_type = raw[len("event:") :].strip()
            elif raw.startswith("data:"):
                data_lines.append(raw[len("data:") :].lstrip())

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._http is not None:
            self._http.close()


def connect(
    master: str | None = None,
    *,
    interactive: bool = False,
    given_as: str = "-m",
    token: str | None = None,
    user: str | None = None,
) -> Session:
    """A session with the discovered master (`discover_master(master, token)`).

    `token` is the master's token (default: `DET_MASTER_TOKEN`, or master.json's when it names
    the same master, else the login `det user login` stored for it: `user`'s, default the active
    user's). `interactive=True` (someone waits: a notebook cell, a CLI command) gives up on an
    unreachable master within about a second; either way the error says where the address came
    from and how to start a master.
    """
    address = discover_master(master, token, given_as=given_as, user=user)
    if interactive:
        return Session(
            address.url,
            address.token,
            address=address,
            connect_retries=INTERACTIVE_CONNECT_RETRIES,
            connect_timeout=INTERACTIVE_CONNECT_TIMEOUT_S,
        )
    return Session(address.url, address.token, address=address)


def _reason(error: Exception) -> str:
    """`[Errno 111] Connection refused` out of requests' long ConnectionError text."""
    text = str(error)
    found = _ERRNO_REASON.findall(text)
    return found[-1].strip() if found else text


def _json(response: requests.Response) -> Any:
    if not response.content:
        return {}
    body = response.json()
    # "NaN"/"Infinity" of a diverged metric back to floats, as Determined's SDK reads them.
    if may_hold_non_finite(response.text):
        body = decode_non_finite(body)
    return body


def _error_from(response: requests.Response) -> APIError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("reason") or response.reason)
        errors = body.get("errors") or []
    else:
        message = f"{response.status_code} {response.reason}: {response.text[:200]}"
        errors = []
    return error_for_status(response.status_code, message, errors, body)
