"""What every command handler gets: the parsed arguments' master address and a lazy session."""

from __future__ import annotations

from determined.common import api


class CliError(Exception):
    """A user mistake the CLI reports as one line (exit code 1)."""


class Context:
    """Handlers call `ctx.session`; the master is discovered only when a command needs it, so
    commands such as `preview-search` work without one."""

    def __init__(self, master: str | None = None) -> None:
        self._master = master
        self._session: api.Session | None = None

    @property
    def session(self) -> api.Session:
        if self._session is None:
            # Someone waits at the terminal: an unreachable master is reported within a second.
            self._session = api.connect(self._master, interactive=True)
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
