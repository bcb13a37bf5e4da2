"""Password hashes: argon2id with a random salt, over Determined's client-side salted form."""

from __future__ import annotations

from master_lite.users import client_hash, hash_password, verify_password


def test_a_password_verifies_plain_and_as_determineds_client_sends_it() -> None:
    stored = hash_password("s3cret")
    assert stored.startswith("$argon2id$")  # parameters and salt live in the string
    assert "s3cret" not in stored and client_hash("s3cret") not in stored
    assert verify_password(stored, "s3cret")
    assert verify_password(stored, client_hash("s3cret"), is_hashed=True)
    assert not verify_password(stored, "S3cret")
    assert not verify_password(stored, "s3cret", is_hashed=True)  # not the salted form


def test_each_hash_has_its_own_salt() -> None:
    assert hash_password("same") != hash_password("same")
    assert hash_password(client_hash("same"), is_hashed=True) != hash_password("same")


def test_no_stored_hash_never_verifies() -> None:
    for stored in (None, "", "not-a-hash"):
        assert not verify_password(stored, "")
        assert not verify_password(stored, "anything")
