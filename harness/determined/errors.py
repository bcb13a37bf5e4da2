"""Exceptions user code and the harness raise to tell the platform what went wrong."""

from __future__ import annotations


class InvalidHP(Exception):
    """Raise inside `det.core.init()`'s block (or a Trial) when the hyperparameters cannot train.

    The trial reports an early exit with reason INVALID_HP and ends cleanly; the searcher treats
    the hyperparameter point as invalid instead of as a failure.
    """


class InvalidExperimentException(Exception):
    """The experiment definition (config or model code) cannot work; the message says why."""


class InvalidConfigurationException(InvalidExperimentException):
    """An experiment config value is invalid; `errors` lists each problem as "path: message"."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        self.errors = list(errors or [])
        super().__init__(message if not self.errors else message + "\n" + "\n".join(self.errors))


class InvalidDataTypeException(InvalidExperimentException):
    """Training or validation data of a kind the API cannot take (Determined's name and message
    form: "Invalid data type (TYPE): MESSAGE.").

    Args:
        typ: the type of what was given.
        message: what was expected instead.
    """

    def __init__(self, typ: type, message: str) -> None:
        self.type = typ
        super().__init__(f"Invalid data type ({typ.__name__}): {message}.")


class InvalidModelException(InvalidExperimentException):
    """The user's model code does not satisfy the API it claims to implement."""


class InternalException(Exception):
    """A bug in the harness itself; the message names what invariant broke."""


class CheckpointNotFound(FileNotFoundError):
    """A checkpoint uuid has no directory in the checkpoint storage."""


class CheckpointStateException(Exception):
    """A checkpoint's state does not allow what was asked (e.g. downloading a DELETED one)."""


class NoDirectStorageAccess(Exception):
    """A checkpoint's storage is not readable on this machine; download it through the master."""
