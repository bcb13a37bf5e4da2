"""Password hashes: argon2id (argon2-cffi, a dependency of jupyter_server), over Determined's
client-side salted hash.

Determined's clients send `salt_and_hash(password)` with `isHashed: true` (a sha512 of a fixed
salt and the password: a fact of its protocol, in determined.common.api.authentication); ours
send the plain password. The stored hash is argon2id of the salted form, so both log in. The
argon2 string carries its own random salt and parameters, so they can change later without a
migration (`needs_rehash`).
"""

from __future__ import annotations

import functools
import hashlib

import argon2

# Determined's fixed client salt (its protocol, not a secret).
DETERMINED_CLIENT_SALT = "GubPEmmotfiK9TMD6Zdw"

_hasher = argon2.PasswordHasher()


def client_hash(password: str) -> str:
    """What a Determined client sends for `password` with isHashed (empty stays empty)."""
    if not password:
        return password
    return hashlib.sha512((DETERMINED_CLIENT_SALT + password).encode("utf-8")).hexdigest()


def hash_password(password: str, *, is_hashed: bool = False) -> str:
    """The stored form of a password (plain, or already `client_hash`ed when `is_hashed`)."""
    return _hasher.hash(password if is_hashed else client_hash(password))


@functools.cache
def _no_hash() -> str:
    """Verified against when there is no hash (no such user, no password), so that a refusal
    takes as long either way and its timing does not tell which usernames exist. Made on first
    use: hashing costs tens of milliseconds, which importing the master should not."""
    return _hasher.hash("no such password")


def verify_password(stored: str | None, password: str, *, is_hashed: bool = False) -> bool:
    """Whether `password` matches the stored hash (never for a user without a password)."""
    if not stored:
        verify_password(_no_hash(), password + "\x00", is_hashed=True)  # the same work, refused
        return False
    try:
        return _hasher.verify(stored, password if is_hashed else client_hash(password))
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
        return False


__all__ = ["client_hash", "hash_password", "verify_password"]
