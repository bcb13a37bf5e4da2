"""What every command handler gets: the parsed arguments' master address and a lazy session."""

from __future__ import annotations

from determined.common import api


class CliError(Exception):
    """A user mistake the CLI reports as one line (exit code 1)."""


class NotSupported(CliError):
    """A Determined command master-lite has no endpoint for yet; reported as
    `not supported by master-lite yet: ...` (exit code 1)."""

    def __init__(self, command: str, detail: str) -> None:
        super().__init__(f"not supported by master-lite yet: {command} ({detail})")


class Context:
    """Handlers call `ctx.session`; the master is discovered only when a command needs it, so
    commands such as `preview-search` work without one."""

    def __init__(self, master: str | None = None, user: str | None = None) -> None:
        self._master = master
        self.user = user
        self._session: api.Session | None = None

    @property
    def master(self) -> str | None:
        """The `-m` address, if one was given."""
        return self._master

    @property
    def session(self) -> api.Session:
        if self._session is None:
            # Someone waits at the terminal: an unreachable master is reported within a second.
            self._session = api.connect(self._master, interactive=True, user=self.user)
        return self._session

    @property
    def address(self) -> api.MasterAddress | None:
        """Where the session's master and token came from (None before `session` is used)."""
        return self._session.address if self._session is not None else None

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
