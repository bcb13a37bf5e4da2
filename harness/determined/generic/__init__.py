"""Determined's Generic API (seed 003), implemented as a thin alias over the Core API."""

from determined.generic._context import (
    GenericCheckpoint,
    GenericContext,
    GenericTraining,
    SearchOperation,
    init,
)

__all__ = ["GenericCheckpoint", "GenericContext", "GenericTraining", "SearchOperation", "init"]
