"""The errors of talking to a master.

Our names (`APIError`, `NotFound`, ...) and Determined's (`APIException`, `NotFoundException`,
... in `determined.common.api.errors`) are one hierarchy: the session raises Determined's
classes, which subclass ours, so `except NotFound` and `except errors.NotFoundException` both
catch a 404, and `except errors.APIException` (or `BadRequestException`) catches every failed
request.
"""

from __future__ import annotations

from typing import Any


class BadRequestException(Exception):
    """Determined's base of the errors of a request to the master; `message` is its text."""

    def __init__(self, message: str, *args: Any) -> None:
        super().__init__(message, *args)
        self.message = message


class APIException(BadRequestException):
    """Determined's name for any failed API operation (the base of every HTTP error here)."""


class MasterNotFoundException(BadRequestException):
    """Determined's name for "the master cannot be found or reached"."""


class APIError(APIException):
    """A request to the master failed; `status` is the HTTP status (0 when unreachable).

    `status_code` is the same number under Determined's attribute name.
    """

    def __init__(
        self, status: int, message: str, errors: list[str] | None = None, body: Any = None
    ):
        self.status = status
        self.status_code = status
        self.errors = list(errors or [])
        self.body = body
        text = (
            message
            if not self.errors
            else message + "\n" + "\n".join(f"  {e}" for e in self.errors)
        )
        super().__init__(text)
        self.message = message


class Unauthorized(APIError):
    """401: no token or an unknown token."""


class Forbidden(APIError):
    """403: the token is valid but may not do this."""


class NotFound(APIError):
    """404: the object does not exist."""


class UnauthenticatedException(Unauthorized):
    """Determined's name for a 401; what the session raises."""

    def __init__(
        self,
        message: str = "missing or invalid token",
        errors: list[str] | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(401, message, errors, body)


class ForbiddenException(Forbidden):
    """Determined's name for a 403; what the session raises."""

    def __init__(self, message: str = "", errors: list[str] | None = None, body: Any = None):
        super().__init__(403, message, errors, body)


class NotFoundException(NotFound):
    """Determined's name for a 404; what the session raises. The message names the object
    (`experiment 7 not found`, `checkpoint <uuid> not found`)."""

    def __init__(
        self, error_message: str, errors: list[str] | None = None, body: Any = None
    ) -> None:
        super().__init__(404, error_message, errors, body)


class MasterUnreachable(APIError, MasterNotFoundException):
    """The master's address is known but nothing answers there (status 0); the message says
    where the address came from and what to do."""


class MasterNotFound(MasterNotFoundException, RuntimeError):
    """No master address could be found (no -m, DET_MASTER or master.json)."""


class TokenStoreError(RuntimeError):
    """The token store of `det user login` (auth.json) cannot be read or changed; the message
    names the file and what to do."""


def error_for_status(
    status: int, message: str, errors: list[str] | None = None, body: Any = None
) -> APIError:
    """The error the session raises for an HTTP error answer: Determined's class for 401, 403
    and 404, `APIError` (an `APIException`) otherwise."""
    if status == 401:
        return UnauthenticatedException(message, errors, body)
    if status == 403:
        return ForbiddenException(message, errors, body)
    if status == 404:
        return NotFoundException(message, errors, body)
    return APIError(status, message, errors, body)
