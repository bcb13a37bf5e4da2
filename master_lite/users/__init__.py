"""Users of a standalone shared master: accounts, sign-ins (session tokens), passwords
(argon2id), and the owner-or-admin rule every acting operation is checked against
(docs/team.md)."""

from ._passwords import client_hash, hash_password, verify_password
from ._users import Users, check_username, login_name, user_json

__all__ = [
    "Users",
    "check_username",
    "client_hash",
    "hash_password",
    "login_name",
    "user_json",
    "verify_password",
]
