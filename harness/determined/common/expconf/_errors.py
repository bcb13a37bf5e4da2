"""The one error type the config module raises."""

from __future__ import annotations

from collections.abc import Iterable


class InvalidConfig(ValueError):
    """An experiment config that cannot be used.

    ``errors`` holds every problem found, each ``"dotted.path: message"``; ``str()`` lists them
    one per line so a CLI can print it as is.
    """

    def __init__(self, errors: Iterable[str] | str) -> None:
        self.errors: list[str] = [errors] if isinstance(errors, str) else list(errors)
        # args holds the list itself so the exception pickles back to the same errors.
        super().__init__(self.errors)

    def _render(self) -> str:
        if not self.errors:
            return "invalid experiment config"
        if len(self.errors) == 1:
            return f"invalid experiment config: {self.errors[0]}"
        lines = [f"invalid experiment config ({len(self.errors)} errors):"]
        lines += [f"  {error}" for error in self.errors]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._render()

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for it (a notebook cell, e.g. `det.experimental.keras.init()`):
        the problems, not a traceback through the config code."""
        return self._render().splitlines()
