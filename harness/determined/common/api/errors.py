"""Determined's `determined.common.api.errors`: the exceptions of requests to the master.

Code written for Determined catches these names (`except errors.NotFoundException`); they are
the classes the session raises (see `determined.common.api._errors`).
"""

from determined.common.api._errors import (
    APIError,
    APIException,
    BadRequestException,
    Forbidden,
    ForbiddenException,
    MasterNotFound,
    MasterNotFoundException,
    MasterUnreachable,
    NotFound,
    NotFoundException,
    UnauthenticatedException,
    Unauthorized,
)

__all__ = [
    "APIError",
    "APIException",
    "BadRequestException",
    "Forbidden",
    "ForbiddenException",
    "MasterNotFound",
    "MasterNotFoundException",
    "MasterUnreachable",
    "NotFound",
    "NotFoundException",
    "UnauthenticatedException",
    "Unauthorized",
]
