"""Keep the master's own SIGTERM/SIGINT handling across `ray.init`.

`ray.init` in a driver's main thread installs a SIGTERM handler of its own that calls
`sys.exit` (ray/_private/worker.py): a `kill -TERM` of the master would then end it at once,
without the clean stop that preempts trials with a checkpoint (issue 31 row 3). Whatever
handled the signals before `ray.init` (the master's event loop, or jupyter_server's handler
when hosted) handles them again after it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

KEPT_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def keep_signal_handlers() -> Iterator[None]:
    """Restore the handlers of SIGTERM and SIGINT that were in place on entry (in the main
    thread only: elsewhere Ray installs none and Python allows no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before: dict[int, Any] = {int(sig): signal.getsignal(sig) for sig in KEPT_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)


__all__ = ["KEPT_SIGNALS", "keep_signal_handlers"]
