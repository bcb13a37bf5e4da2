"""`det.experimental.Mode` (Determined 0.12.3-0.12.4) and its mapping onto the `local`/`test` flags."""

from __future__ import annotations

import enum
from typing import Any


class Mode(str, enum.Enum):
    """CLUSTER submits to the master; LOCAL runs the minimal in-process test loop (0.12.3 meaning)."""

    CLUSTER = "cluster"
    LOCAL = "local"

    def __str__(self) -> str:
        return self.value


def resolve_mode(local: Any, test: bool, mode: Any) -> tuple[bool, bool]:
    """`(local, test)` from the 0.12.5 flags or a 0.12.3 `Mode` (given as `mode=` or in place of `local`)."""
    if isinstance(local, (Mode, str)) and not isinstance(local, bool):
        if mode is not None:
            raise ValueError("pass either mode= or a Mode as the second argument, not both")
        mode, local = local, False
    if mode is not None:
        try:
            mode = Mode(mode)
        except ValueError:
            raise ValueError(f"mode={mode!r}: expected Mode.CLUSTER or Mode.LOCAL") from None
        return (True, True) if mode is Mode.LOCAL else (False, bool(test))
    if not isinstance(local, bool):
        raise TypeError(
            f"local= takes a bool (or a det.experimental.Mode), got {type(local).__name__}"
        )
    return local, bool(test)
