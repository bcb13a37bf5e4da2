"""Talking to a master: an authenticated HTTP session and master discovery."""

from determined.common.api._errors import (
    APIError,
    Forbidden,
    MasterNotFound,
    MasterUnreachable,
    NotFound,
    TokenStoreError,
    Unauthorized,
)
from determined.common.api._master import MasterAddress, discover_master, read_master_file
from determined.common.api._session import Session, connect

__all__ = [
    "APIError",
    "Forbidden",
    "MasterAddress",
    "MasterNotFound",
    "MasterUnreachable",
    "NotFound",
    "Session",
    "TokenStoreError",
    "Unauthorized",
    "connect",
    "discover_master",
    "read_master_file",
]
