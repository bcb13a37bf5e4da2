"""`determined.common.check`: Determined's assertion helpers, which its own harness tests and
fixtures import (`check.CheckFailedError`, `check.true(...)`, `check.is_instance(...)`, ...).

Each check raises `CheckFailedError` (a `ValueError`, so code that catches the usual error of a
bad value catches it too) with the caller's `reason` first, then what was found. Every check
has both of Determined's names: the short one (`eq`) and the `check_` one (`check_eq`).
"""

from __future__ import annotations

from collections.abc import Container, Sized
from typing import Any


class CheckFailedError(ValueError):
    """A `determined.common.check` check failed."""


def _fail(reason: str | None, found: str) -> None:
    raise CheckFailedError(f"{reason}: {found}" if reason else found)


def true(val: bool, reason: str | None = None) -> None:
    """`val` is truthy."""
    if not val:
        _fail(reason, f"expected a true value, got {val!r}")


def false(val: bool, reason: str | None = None) -> None:
    """`val` is falsy."""
    if val:
        _fail(reason, f"expected a false value, got {val!r}")


def is_none(val: Any, reason: str | None = None) -> None:
    """`val` is None."""
    if val is not None:
        _fail(reason, f"expected None, got {val!r}")


def is_not_none(val: Any, reason: str | None = None) -> None:
    """`val` is not None."""
    if val is None:
        _fail(reason, "expected a value, got None")


def eq(val: Any, expected: Any, reason: str | None = None) -> None:
    """`val == expected`."""
    if not val == expected:
        _fail(reason, f"{val!r} != {expected!r}")


def not_eq(x: Any, y: Any, reason: str | None = None) -> None:
    """`x != y`."""
    if x == y:
        _fail(reason, f"{x!r} == {y!r}")


def gt(x: Any, y: Any, reason: str | None = None) -> None:
    """`x > y`."""
    if not x > y:
        _fail(reason, f"{x!r} <= {y!r}")


def gt_eq(x: Any, y: Any, reason: str | None = None) -> None:
    """`x >= y`."""
    if not x >= y:
        _fail(reason, f"{x!r} < {y!r}")


def lt(x: Any, y: Any, reason: str | None = None) -> None:
    """`x < y`."""
    if not x < y:
        _fail(reason, f"{x!r} >= {y!r}")


def lt_eq(x: Any, y: Any, reason: str | None = None) -> None:
    """`x <= y`."""
    if not x <= y:
        _fail(reason, f"{x!r} > {y!r}")


def equal_lengths(x: Sized, y: Sized, reason: str | None = None) -> None:
    """`len(x) == len(y)`."""
    if len(x) != len(y):
        _fail(reason, f"lengths differ: {len(x)} != {len(y)}")


def len_eq(val: Sized, expected_len: int, reason: str | None = None) -> None:
    """`len(val) == expected_len`."""
    if len(val) != expected_len:
        _fail(reason, f"expected length {expected_len}, got {len(val)}")


def is_in(val: Any, expected: Container[Any], reason: str | None = None) -> None:
    """`val in expected`."""
    if val not in expected:
        _fail(reason, f"{val!r} is not in {expected!r}")


def not_in(val: Any, expected: Container[Any], reason: str | None = None) -> None:
    """`val not in expected`."""
    if val in expected:
        _fail(reason, f"{val!r} is in {expected!r}")


def is_type(val: Any, expected: type, reason: str | None = None) -> None:
    """`type(val) is expected` (exactly, not a subclass)."""
    if type(val) is not expected:
        _fail(reason, f"expected type {expected.__name__}, got {type(val).__name__}")


def is_instance(val: Any, expected: type | tuple[type, ...], reason: str | None = None) -> None:
    """`isinstance(val, expected)`."""
    if not isinstance(val, expected):
        _fail(reason, f"expected an instance of {expected!r}, got {type(val).__name__}")


def is_not_instance(val: Any, expected: type | tuple[type, ...], reason: str | None = None) -> None:
    """`not isinstance(val, expected)`."""
    if isinstance(val, expected):
        _fail(reason, f"{type(val).__name__} must not be an instance of {expected!r}")


def is_subclass(val: Any, expected: type, reason: str | None = None) -> None:
    """`val` is a class and a subclass of `expected`."""
    if not (isinstance(val, type) and issubclass(val, expected)):
        _fail(reason, f"expected a subclass of {expected.__name__}, got {val!r}")


# Determined's longer names of the same checks.
check_true = true
check_false = false
check_none = is_none
check_not_none = is_not_none
check_eq = eq
check_not_eq = not_eq
check_gt = gt
check_gt_eq = gt_eq
check_lt = lt
check_lt_eq = lt_eq
check_eq_len = equal_lengths
check_len = len_eq
check_in = is_in
check_not_in = not_in
check_type = is_type
check_isinstance = is_instance
check_not_isinstance = is_not_instance
check_issubclass = is_subclass
