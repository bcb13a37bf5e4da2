"""What a username may be (accounts made here, and Hub users taken over as accounts)."""

from __future__ import annotations

import re
from typing import Any

from master_lite import errors

_USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


def check_username(value: Any) -> str:
    """A valid new username, or InvalidRequest naming the rule."""
    if not isinstance(value, str) or not _USERNAME.match(value):
        raise errors.InvalidRequest(
            f"username {value!r}: use 1 to 128 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit"
        )
    return value


__all__ = ["check_username"]
