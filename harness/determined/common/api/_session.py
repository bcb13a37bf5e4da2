"""An authenticated session with the master's REST API (requests, with retries on connect errors)."""
from __future__ import annotations

import json
import time
from typing import Any, Iterator

import requests

from determined.common.api._errors import APIError, Forbidden, NotFound, Unauthorized

_ERROR_TYPES = {401: Unauthorized, 403: Forbidden, 404: NotFound}


class Session:
    """`Session(url, token)`; paths are relative to `<url>/api/v1`, e.g. `session.get("/experiments")`."""

    def __init__(
        self,
        master_url: str,
        token: str | None,
        *,
        timeout: float = 60.0,
        connect_retries: int = 5,
    ) -> None:
        self.master_url = master_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.connect_retries = connect_retries
        self._http = requests.Session()
        if token:
            self._http.headers["Authorization"] = f"Bearer {token}"

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
        params = {k: v for k, v in (params or {}).items() if v is not None}
        delay = 0.2
        for attempt in range(self.connect_retries + 1):
            try:
                response = self._http.request(
                    method,
                    self.url(path),
                    params=params,
                    json=json_body,
                    data=data,
                    headers=headers,
                    timeout=timeout if timeout is not None else self.timeout,
                    stream=stream,
                )
                break
            except requests.ConnectionError as e:
                # The master may be restarting (JupyterLab restart, recovery): retry briefly.
                if attempt == self.connect_retries:
                    raise APIError(0, f"cannot reach the master at {self.master_url}: {e}") from e
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

    def get_bytes(self, path: str, params: dict[str, Any] | None = None) -> bytes:
        return self.request("GET", path, params=params).content

    def events(self, params: dict[str, Any] | None = None) -> Iterator[tuple[str, Any]]:
        """Follow the server-sent event stream: yields (type, payload) until the server closes."""
        response = self.request("GET", "/events", params=params, stream=True, timeout=None)
        event_type, data_lines = "message", []
        for raw in response.iter_lines(decode_unicode=True):
            if raw is None:
                continue
            if raw == "":
                if data_lines:
                    yield event_type, json.loads("\n".join(data_lines))
                event_type, data_lines = "message", []
            elif raw.startswith(":"):
                continue
            elif raw.startswith("event:"):
                event_type = raw[len("event:"):].strip()
            elif raw.startswith("data:"):
                data_lines.append(raw[len("data:"):].lstrip())

    def close(self) -> None:
        self._http.close()


def _json(response: requests.Response) -> Any:
    if not response.content:
        return {}
    return response.json()


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
    cls = _ERROR_TYPES.get(response.status_code, APIError)
    return cls(response.status_code, message, errors, body)
