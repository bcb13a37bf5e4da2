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
from determined.common.api._master import (
    HUB_TOKEN_ENV,
    MasterAddress,
    canonical_url,
    discover_master,
    read_master_file,
)
from determined.common.api._nonfinite import decode_non_finite, encode_non_finite
from determined.common.api._session import Session, connect

__all__ = [
    "APIError",
    "APIException",
    "BadRequestException",
    "Forbidden",
    "ForbiddenException",
    "HUB_TOKEN_ENV",
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
    "canonical_url",
    "connect",
    "decode_non_finite",
    "discover_master",
    "encode_non_finite",
    "errors",
    "read_master_file",
]
