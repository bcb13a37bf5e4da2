from __future__ import annotations

from typing import Any


class APIError(Exception):
    """A request to the master failed; `status` is the HTTP status (0 when unreachable)."""

    def __init__(
        self, status: int, message: str, errors: list[str] | None = None, body: Any = None
    ):
        self.status = status
        self.message = message
        self.errors = list(errors or [])
        self.body = body
        text = (
            message
            if not self.errors
            else message + "\n" + "\n".join(f"  {e}" for e in self.errors)
        )
        super().__init__(text)


class Unauthorized(APIError):
    """401: no token or an unknown token."""


class Forbidden(APIError):
    """403: the token is valid but may not do this."""


class NotFound(APIError):
    """404: the object does not exist."""


class MasterUnreachable(APIError):
    """The master's address is known but nothing answers there (status 0); the message says
    where the address came from and what to do."""


class MasterNotFound(RuntimeError):
    """No master address could be found (no -m, DET_MASTER or master.json)."""


class TokenStoreError(RuntimeError):
    """The token store of `det user login` (auth.json) cannot be read or changed; the message
    names the file and what to do."""
