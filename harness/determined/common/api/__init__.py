"""Talking to a master: an authenticated HTTP session and master discovery.

`errors` is Determined's module of the same name (`from determined.common.api import errors`).
"""

from determined.common.api import errors
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
    TokenStoreError,
    UnauthenticatedException,
    Unauthorized,
)
from determined.common.api._master import MasterAddress, discover_master, read_master_file
from determined.common.api._session import Session, connect

__all__ = [
    "APIError",
    "APIException",
    "BadRequestException",
    "Forbidden",
    "ForbiddenException",
    "MasterAddress",
    "MasterNotFound",
    "MasterNotFoundException",
    "MasterUnreachable",
    "NotFound",
    "NotFoundException",
    "Session",
    "TokenStoreError",
    "UnauthenticatedException",
    "Unauthorized",
    "connect",
    "discover_master",
    "errors",
    "read_master_file",
]
