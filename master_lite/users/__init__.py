"""Users of a standalone shared master: accounts, sign-ins (session tokens), passwords
(argon2id), and the owner-or-admin rule every acting operation is checked against
(docs/team.md); and, for a master run as a JupyterHub service, Hub identity (`HubIdentity`).
"""

from ._hub import ADMIN_GROUP, HubIdentity, make_hub_auth
from ._passwords import client_hash, hash_password, verify_password
from ._reading import (
    READ_ACCESS,
    check_may_read,
    check_read_access,
    may_read,
    restricted_reader,
)
from ._signin import SESSION_LIFETIME_HOURS, SignInGuard
from ._usernames import check_username
from ._users import Users, login_name, user_json

__all__ = [
    "ADMIN_GROUP",
    "READ_ACCESS",
    "SESSION_LIFETIME_HOURS",
    "SignInGuard",
    "check_may_read",
    "check_read_access",
    "may_read",
    "restricted_reader",
    "HubIdentity",
    "Users",
    "check_username",
    "client_hash",
    "hash_password",
    "login_name",
    "make_hub_auth",
    "user_json",
    "verify_password",
]
