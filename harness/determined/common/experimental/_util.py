"""What the SDK's classes share: sort order, enum conversion, the master version in messages."""

from __future__ import annotations

import enum
from typing import Any


class OrderBy(enum.Enum):
    """Whether a sorted list is in ascending or descending order (Determined's values)."""

    ASCENDING = "ORDER_BY_ASC"
    ASC = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"
    DESC = "ORDER_BY_DESC"


def state_value(state: str | None) -> str | None:
    """Determined's enum value (`STATE_COMPLETED`) of a state as the master writes it
    (`COMPLETED`)."""
    if state is None:
        return None
    return state if state.startswith("STATE_") else f"STATE_{state}"


def determined_state(experiment: dict) -> str | None:
    """An experiment's state as Determined (0.2x+) reports it: the master's ACTIVE becomes its
    `run_state` (QUEUED or RUNNING); a master without `run_state` keeps ACTIVE."""
    state = experiment.get("state")
    if state == "ACTIVE" and experiment.get("run_state") in ("QUEUED", "RUNNING"):
        return str(experiment["run_state"])
    return state


def master_state(state: Any) -> str:
    """The master's spelling (`COMPLETED`) of an SDK state enum, a common state or a string."""
    text = str(getattr(state, "value", state))
    return text[len("STATE_") :] if text.startswith("STATE_") else text


def missing_endpoint(what: str) -> NotImplementedError:
    """The error of an SDK method whose master endpoint this master does not have."""
    from determined.common.harness import VERSION

    return NotImplementedError(
        f"{what} is not available: master_lite {VERSION} has no endpoint for it "
        "(see docs/sdk.md, 'Not implemented')"
    )


def sort_key_nulls_last(value: Any, descending: bool) -> tuple[bool, Any]:
    """A sort key that puts missing values last whichever the direction.

    Use with `sorted(..., reverse=descending)`: (is-missing, value), flipped for descending.
    """
    if descending:
        return (value is not None, value if value is not None else 0)
    return (value is None, value if value is not None else 0)
