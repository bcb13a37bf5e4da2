"""What core_v2 needs of the process and of the master beyond the run itself: how the
interpreter is ending (a failed script's run ends ERROR), and where the master shows an
experiment (`url_reverse_webui_exp_view`)."""

from __future__ import annotations

import sys
from typing import Any


class ExitWatch:
    """How the interpreter is ending, as Determined's core_v2 watches it: a script whose
    uncaught exception (`sys.excepthook`) or `sys.exit(non-zero)` ends it, with its run still
    open, ends the trial as ERROR (CANCELED for Ctrl-C), not COMPLETED. A Jupyter kernel shows
    a cell's error without `sys.excepthook`: a failed cell does not end the run."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        self._installed = True
        original_hook, original_exit = sys.excepthook, sys.exit

        def excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
            self.error = exc
            original_hook(exc_type, exc, tb)

        def exit(code: Any = 0) -> None:  # noqa: A001 (sys.exit's own name)
            if code not in (None, 0):
                self.error = RuntimeError(f"the script exited with code {code}")
            original_exit(code)

        sys.excepthook = excepthook
        sys.exit = exit  # type: ignore[assignment]


def experiment_view_url(master_url: str, token: str, experiment_id: int) -> str:
    """The experiment's view in JupyterLab when a Jupyter server hosts the master
    (`<server><base_url>lab?det-experiment=ID`: the sidebar's experiment view opens), else the
    experiment in the master's API (`<master>/api/v1/experiments/ID`)."""
    master_url = master_url.rstrip("/")
    if hosted_in_jupyter(master_url, token):
        # A hosted master is served at `<server><base_url>determined`.
        lab = master_url.removesuffix("determined").rstrip("/")
        return f"{lab}/lab?det-experiment={experiment_id}"
    return f"{master_url}/api/v1/experiments/{experiment_id}"


def hosted_in_jupyter(master_url: str, token: str) -> bool:
    """Whether the master says a Jupyter server hosts it (False when it cannot be asked)."""
    from determined.common.api import Session

    session = Session(master_url, token, timeout=10.0, connect_retries=0)
    try:
        return bool(session.get("/master").get("jupyterlab"))
    except Exception:
        return False
    finally:
        session.close()


__all__ = ["ExitWatch", "experiment_view_url", "hosted_in_jupyter"]
