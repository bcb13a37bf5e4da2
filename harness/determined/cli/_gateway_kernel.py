"""A client of a kernel on a Jupyter (Kernel) Gateway, for `det trial attach`: the part of
jupyter_client's `BlockingKernelClient` that `TrialKernel` uses, over the kernel's websocket
(`/api/kernels/{id}/channels`). The server's websocket carries all four channels (shell,
iopub, stdin and control), so a subshell is created and used as with a local kernel.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any
from urllib.parse import quote

from determined.cli._base import CliError

_TIMEOUT = 10.0
_CHECK_EVERY = 1.0  # seconds between asking the gateway whether the kernel still exists
CHANNELS = ("shell", "iopub", "stdin", "control")


class _Channel:
    """`client.<name>_channel`: only `send` is used."""

    def __init__(self, client: GatewayKernelClient, name: str) -> None:
        self._client = client
        self._name = name

    def send(self, message: dict) -> None:
        self._client.send(self._name, message)


class GatewayKernelClient:
    """Talks to kernel `kernel_id` on the gateway at `url` (token: `Authorization: token`)."""

    def __init__(self, url: str, kernel_id: str, token: str | None) -> None:
        import websocket
        from jupyter_client.session import Session

        self.url = url.rstrip("/")
        self.kernel_id = kernel_id
        # The server signs what it passes to the kernel: messages on the websocket are unsigned.
        self.session = Session(key=b"")
        ws_url = (
            "ws"
            + self.url[len("http") :]
            + f"/api/kernels/{quote(kernel_id)}/channels?session_id={self.session.session}"
        )
        self._headers = {"Authorization": f"token {token}"} if token else {}
        self._checked = time.monotonic()
        try:
            self._socket = websocket.create_connection(
                ws_url, header=self._headers, timeout=_TIMEOUT
            )
        except (OSError, websocket.WebSocketException) as exc:
            raise CliError(
                f"cannot reach kernel {kernel_id} on the Jupyter Gateway at {self.url} ({exc}); "
                "is the gateway reachable from here, and is $JUPYTER_GATEWAY_AUTH_TOKEN its "
                "token when the master has none?"
            ) from None
        self._queues: dict[str, queue.Queue] = {name: queue.Queue() for name in CHANNELS}
        self._lock = threading.Lock()
        self._open = True
        self.shell_channel = _Channel(self, "shell")
        self.control_channel = _Channel(self, "control")
        self.stdin_channel = _Channel(self, "stdin")
        threading.Thread(target=self._receive, name="gateway-attach", daemon=True).start()

    def _receive(self) -> None:
        import websocket

        while self._open:
            try:
                self._socket.settimeout(None)
                text = self._socket.recv()
            except (OSError, websocket.WebSocketException):
                self._open = False  # closed by us, or the kernel (or gateway) went away
                return
            if not text:
                continue
            message = json.loads(text)
            content = message.get("content") or {}
            if message.get("msg_type") == "status" and content.get("execution_state") == "dead":
                self._open = False
            channel = self._queues.get(message.get("channel", ""))
            if channel is not None:
                channel.put(message)

    def send(self, channel: str, message: dict) -> None:
        """Send a message made by `self.session.msg` on `channel`."""
        from jupyter_client.jsonutil import json_default

        text = json.dumps({**message, "channel": channel, "buffers": []}, default=json_default)
        try:
            with self._lock:
                self._socket.send(text)
        except Exception as exc:  # noqa: BLE001 (any send failure: the kernel is out of reach)
            self._open = False
            raise CliError(
                f"kernel {self.kernel_id} on the Jupyter Gateway at {self.url} is gone ({exc})"
            ) from None

    def _get(self, channel: str, timeout: float | None) -> dict:
        # queue.Empty when nothing came, as jupyter_client's clients do.
        if timeout is not None and timeout <= 0:
            return dict(self._queues[channel].get_nowait())
        return dict(self._queues[channel].get(timeout=timeout))

    def get_shell_msg(self, timeout: float | None = None) -> dict:
        return self._get("shell", timeout)

    def get_iopub_msg(self, timeout: float | None = None) -> dict:
        return self._get("iopub", timeout)

    def get_stdin_msg(self, timeout: float | None = None) -> dict:
        return self._get("stdin", timeout)

    def get_control_msg(self, timeout: float | None = None) -> dict:
        return self._get("control", timeout)

    def input(self, text: str) -> None:
        """Answer the kernel's input request (the debugger's prompt) with `text`."""
        self.send("stdin", self.session.msg("input_reply", {"value": text}))

    def is_alive(self) -> bool:
        """False once the websocket closed or the gateway no longer has the kernel (a kernel
        shut down does not always close its websockets); the gateway is asked once a second."""
        if not self._open:
            return False
        now = time.monotonic()
        if now - self._checked >= _CHECK_EVERY:
            self._checked = now
            self._open = self._exists()
        return self._open

    def _exists(self) -> bool:
        import requests

        try:
            response = requests.get(
                f"{self.url}/api/kernels/{quote(self.kernel_id)}",
                headers=self._headers,
                timeout=_TIMEOUT,
            )
        except requests.RequestException:
            return False
        return response.ok and response.json().get("execution_state") != "dead"

    def stop_channels(self) -> None:
        self._open = False
        try:
            self._socket.close()
        except Exception:  # noqa: BLE001, S110 (closing what may be closed already)
            pass


def gateway_client(info: dict[str, Any]) -> GatewayKernelClient:
    """A client of the gateway kernel the master's `GET /trials/{id}/kernel` answer names (its
    `gateway_token`, else $JUPYTER_GATEWAY_AUTH_TOKEN here)."""
    import os

    token = info.get("gateway_token") or os.environ.get("JUPYTER_GATEWAY_AUTH_TOKEN")
    return GatewayKernelClient(str(info["gateway"]), str(info["kernel_id"]), token)


__all__ = ["GatewayKernelClient", "gateway_client"]
