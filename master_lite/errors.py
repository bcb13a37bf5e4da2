"""Errors raised by the Master facade; the API layer maps each to its HTTP status."""

from __future__ import annotations


class MasterError(Exception):
    """Base class: `status` is the HTTP status the API answers with."""

    status = 500

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors: list[str] = list(errors or [])


class InvalidRequest(MasterError):
    """Bad input (400); `.errors` lists every problem as "path: message"."""

    status = 400


class Unauthorized(MasterError):
    """No valid credentials: a wrong password, or the token of a deactivated user (401)."""

    status = 401


class Forbidden(MasterError):
    status = 403


class NotFound(MasterError):
    status = 404


class Conflict(MasterError):
    """The action is not allowed in the object's current state (409)."""

    status = 409


class TooLarge(MasterError):
    status = 413


class TooManyRequests(MasterError):
    """Too many attempts in a while (429): `retry_after` is how many seconds until the next
    one is taken (the API sends it as the Retry-After header)."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(MasterError):
    """Something the request needs is missing on the master's machine, e.g. a package (503)."""

    status = 503


class MasterStopping(Unavailable, RuntimeError):
    """The master is shutting down (or has shut down) and its store is closed (503).

    A `RuntimeError` too, so code that caught the store's old `RuntimeError("store ... is
    closed")` still catches it.
    """


MASTER_STOPPING_MESSAGE = (
    "the master is stopping: its runs were asked to checkpoint and exit; "
    "start the master again (restart the Jupyter server) to continue"
)

__all__ = [
    "MasterError",
    "InvalidRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "TooLarge",
    "Unavailable",
    "MasterStopping",
    "MASTER_STOPPING_MESSAGE",
]
