"""The two kinds of kernel a kernel trial runs in, behind one small interface the runner drives:
`LocalKernel` (a kernelspec on this machine, through jupyter_client over ZMQ) and
`GatewayKernel` (a Jupyter Kernel Gateway, through its REST API and kernel websocket).

The gateway is talked to directly: jupyter_server's gateway client drops per-request
environment variables, and a trial needs its own.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import quote

import requests
import websocket
from jupyter_client.jsonutil import json_default
from jupyter_client.manager import KernelManager
from jupyter_client.session import Session

from master_lite.runners.kernel._sandbox import preset, start_sandboxed

_READY_TIMEOUT = 60.0
_PENDING: set[Any] = set()  # shutdown tasks on the server's loop, kept until done
_HTTP_TIMEOUT = 10.0
# A dropped websocket is reconnected this often before the kernel counts as lost.
_RECONNECTS = 5


class KernelHandle(Protocol):
    """What the kernel runner needs of a started kernel."""

    pid: int | None

    def execute(self, code: str, *, silent: bool, user_expressions: dict) -> str: ...
    def iopub(self, timeout: float) -> dict | None: ...
    def shell(self) -> dict | None: ...
    def alive(self) -> bool: ...
    def returncode(self) -> int | None: ...
    def signal(self, sig: int) -> bool: ...
    def shutdown(self, now: bool) -> None: ...
    def close(self) -> None: ...
    def connection(self) -> dict[str, Any]: ...


def _queued(channel: Any, timeout: float) -> dict | None:
    try:
        return dict(channel(timeout=timeout))
    except queue.Empty:
        return None


class LocalKernel:
    """A kernel of a local kernelspec, in its own session (process group); under `sandbox`
    (the trial sandbox's trampoline argv, `_sandbox`) when one is given."""

    def __init__(
        self, spec: str, env: dict[str, str], cwd: str, sandbox: Sequence[str] = ()
    ) -> None:
        self.manager = KernelManager(kernel_name=spec)
        preset(self.manager, sandbox)
        self.manager.start_kernel(env=env, cwd=cwd)
        process = getattr(self.manager.provisioner, "process", None)
        self.pid: int | None = process.pid if process is not None else None
        self.client = self.manager.blocking_client()
        self.client.start_channels()
        try:
            self.client.wait_for_ready(timeout=_READY_TIMEOUT)
        except BaseException:
            self.shutdown(now=True)  # started but never answered: it must not outlive the run
            raise

    def execute(self, code: str, *, silent: bool, user_expressions: dict) -> str:
        return str(
            self.client.execute(
                code,
                silent=silent,
                store_history=False,
                allow_stdin=False,
                user_expressions=user_expressions,
            )
        )

    def iopub(self, timeout: float) -> dict | None:
        return _queued(self.client.get_iopub_msg, timeout)

    def shell(self) -> dict | None:
        return _queued(self.client.get_shell_msg, 0)

    def alive(self) -> bool:
        return bool(self.manager.is_alive())

    def returncode(self) -> int | None:
        process = getattr(self.manager.provisioner, "process", None)
        return process.poll() if process is not None else None

    def signal(self, sig: int) -> bool:
        if self.pid is None:
            return False
        try:
            os.killpg(self.pid, sig)  # the kernel leads its own session
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def shutdown(self, now: bool) -> None:
        self.close()
        self.manager.shutdown_kernel(now=now)

    def close(self) -> None:
        self.client.stop_channels()

    def connection(self) -> dict[str, Any]:
        info = dict(self.manager.get_connection_info(session=False))
        key = info.get("key", b"")
        info["key"] = key.decode() if isinstance(key, bytes) else key
        return {"kernel": info}


class ServerKernel(LocalKernel):
    """A local kernel started by the hosting Jupyter server's kernel manager (so JupyterLab
    lists it among its running kernels and can open a console on it), with a session named
    after the trial. The managers live on the server's event loop: calls go through it."""

    def __init__(  # noqa: PLR0913 (all needed at start)
        self,
        host: Any,
        loop: Any,
        spec: str,
        env: dict[str, str],
        cwd: str,
        name: str,
        sandbox: Sequence[str] = (),
    ) -> None:
        self._loop = loop
        self._kernels = host.kernel_manager
        self._sessions = host.session_manager
        start = start_sandboxed(self._kernels, sandbox, kernel_name=spec, env=env, cwd=cwd)
        self.kernel_id = str(self._call(start))
        self.manager = self._kernels.get_kernel(self.kernel_id)
        self.session_id: str | None = None
        try:
            model = self._call(
                self._sessions.create_session(
                    path=f"determined/{name}", name=name, type="console", kernel_id=self.kernel_id
                )
            )
            self.session_id = model["id"]
        except Exception:  # noqa: BLE001 (a name for people; the trial runs without it)
            pass
        process = getattr(self.manager.provisioner, "process", None)
        self.pid = process.pid if process is not None else None
        self.client = self.manager.blocking_client()
        self.client.start_channels()
        try:
            self.client.wait_for_ready(timeout=_READY_TIMEOUT)
        except BaseException:
            self.shutdown(now=True)
            raise

    def _call(self, coroutine: Any) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_READY_TIMEOUT)

    def _on_loop_thread(self) -> bool:
        import asyncio

        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:  # no loop runs in this thread: a runner thread
            return False

    def alive(self) -> bool:
        return self.returncode() is None

    def shutdown(self, now: bool) -> None:
        self.close()
        if self._on_loop_thread():
            # Called from the server's loop itself (an experiment's delete, the master's stop
            # when the server shuts down): waiting for a coroutine that this very loop must run
            # would hang it until the timeout, so the shutdown runs as a task of its own.
            task = self._loop.create_task(self._shut_down(now))
            _PENDING.add(task)
            task.add_done_callback(_PENDING.discard)
            return
        self._call(self._shut_down(now))

    async def _shut_down(self, now: bool) -> None:
        if self.session_id is not None:
            try:
                await self._sessions.delete_session(self.session_id)  # ends the kernel
                return
            except Exception:  # noqa: BLE001 (gone already: shut the kernel down directly)
                pass
        if self.kernel_id in self._kernels:
            await self._kernels.shutdown_kernel(self.kernel_id, now=now)

    def connection(self) -> dict[str, Any]:
        return {**super().connection(), "jupyter_kernel_id": self.kernel_id}


class GatewayError(OSError):
    """The gateway could not be reached, or refused the request (the message says which)."""


def gateway_settings(gateway: Any, token: str | None = None) -> tuple[str, str | None]:
    """(base URL, token) of `environment.kernel.gateway`: a URL, or `{url, token}`; the token
    defaults to `token` (the master's, MasterLite.kernel_gateway_token), then to
    $JUPYTER_GATEWAY_AUTH_TOKEN (keep it out of the config, which is stored)."""
    default_token = token
    if isinstance(gateway, dict):
        url, token = gateway.get("url"), gateway.get("token")
    else:
        url, token = gateway, None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(
            f"environment.kernel.gateway: {gateway!r} is not a gateway URL (give "
            "http(s)://host:port, or {url: ..., token: ...}; `local` runs a local kernel)"
        )
    token = token or default_token or os.environ.get("JUPYTER_GATEWAY_AUTH_TOKEN")
    return url.rstrip("/"), token or None


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"token {token}"} if token else {}


def gateway_request(url: str, token: str | None, method: str, path: str, **kwargs: Any) -> Any:
    """One REST call to the gateway; GatewayError naming the gateway and what went wrong."""
    try:
        response = requests.request(
            method, url + path, headers=_headers(token), timeout=_HTTP_TIMEOUT, **kwargs
        )
    except requests.RequestException as exc:
        raise GatewayError(
            f"the Jupyter Gateway at {url} is unreachable ({type(exc).__name__}: {exc}); check "
            "that it runs and environment.kernel.gateway names it"
        ) from None
    if response.status_code >= 400:
        try:
            reason = response.json().get("message") or response.text
        except ValueError:
            reason = response.text
        raise GatewayError(
            f"the Jupyter Gateway at {url} refused {method} {path}: HTTP "
            f"{response.status_code} {str(reason).strip()[:300]}"
        )
    return response.json() if response.content else None


class GatewayKernel:
    """A kernel started on a Jupyter Kernel Gateway; messages go over its websocket, which is
    reconnected when it drops while the kernel lives."""

    pid: int | None = None

    def __init__(
        self, gateway: Any, spec: str, env: dict[str, str], token: str | None = None
    ) -> None:
        """Start a kernel of `spec` on `gateway` (a URL or `{url, token}`; `token` is used when
        it gives none), with `env` sent along."""
        self.url, self.token = gateway_settings(gateway, token)
        # The gateway passes on the variables it whitelists (KG_ENV_WHITELIST) and KERNEL_*.
        model = gateway_request(
            self.url, self.token, "POST", "/api/kernels", json={"name": spec, "env": env}
        )
        self.kernel_id = str(model["id"])
        self.session = Session(key=b"")
        self._queues: dict[str, queue.Queue] = {"iopub": queue.Queue(), "shell": queue.Queue()}
        self._lock = threading.Lock()
        self._closed = False
        self._lost = False
        try:
            self._socket = self._connect()
        except GatewayError:
            self._delete()
            raise
        threading.Thread(
            target=self._receive, name=f"gateway-{self.kernel_id}", daemon=True
        ).start()
        try:
            self._wait_for_ready()
        except GatewayError:
            self.shutdown(now=True)
            raise

    def _connect(self) -> websocket.WebSocket:
        # The same session id on every connection: the server buffers the kernel's messages
        # while the socket is down and replays them on reconnect.
        ws_url = (
            "ws"
            + self.url[len("http") :]
            + f"/api/kernels/{quote(self.kernel_id)}/channels?session_id={self.session.session}"
        )
        try:
            return websocket.create_connection(
                ws_url, header=_headers(self.token), timeout=_HTTP_TIMEOUT
            )
        except (OSError, websocket.WebSocketException) as exc:
            raise GatewayError(
                f"could not open kernel {self.kernel_id}'s websocket at {ws_url}: {exc}"
            ) from None

    def _receive(self) -> None:
        failures = 0
        while not self._closed:
            try:
                self._socket.settimeout(None)
                text = self._socket.recv()
                failures = 0
            except (OSError, websocket.WebSocketException):
                if self._closed:
                    return
                failures += 1
                if failures > _RECONNECTS or not self._exists():
                    self._lost = True
                    return
                time.sleep(0.2 * failures)
                try:
                    with self._lock:
                        self._socket = self._connect()
                except GatewayError:
                    continue
                continue
            if not text:
                continue
            message = json.loads(text)
            channel = self._queues.get(message.get("channel", ""))
            if channel is not None:
                channel.put(message)

    def _send(self, msg_type: str, content: dict) -> str:
        message = self.session.msg(msg_type, content)
        message["channel"] = "shell"
        message["buffers"] = []
        text = json.dumps(message, default=json_default)
        deadline = time.monotonic() + _HTTP_TIMEOUT
        while True:
            with self._lock:
                socket = self._socket
            try:
                socket.send(text)
                return str(message["header"]["msg_id"])
            except (OSError, websocket.WebSocketException) as exc:
                # Dropped: the receiver reconnects; send again on the new connection.
                while self._socket is socket and not self._lost:
                    if time.monotonic() > deadline:
                        raise GatewayError(
                            f"kernel {self.kernel_id}'s websocket on {self.url} dropped and did "
                            f"not reconnect ({exc})"
                        ) from None
                    time.sleep(0.05)
                if self._lost:
                    raise GatewayError(f"kernel {self.kernel_id} on {self.url} is gone") from None

    def _wait_for_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT
        msg_id = self._send("kernel_info_request", {})
        while time.monotonic() < deadline:
            reply = _queued(self._queues["shell"].get, 0.2)
            if reply is not None and reply["parent_header"].get("msg_id") == msg_id:
                return
            if self._lost:
                break
        raise GatewayError(f"kernel {self.kernel_id} on {self.url} did not answer within 60 s")

    def execute(self, code: str, *, silent: bool, user_expressions: dict) -> str:
        content = {
            "code": code,
            "silent": silent,
            "store_history": False,
            "user_expressions": user_expressions,
            "allow_stdin": False,
            "stop_on_error": False,
        }
        return self._send("execute_request", content)

    def iopub(self, timeout: float) -> dict | None:
        return _queued(self._queues["iopub"].get, timeout)

    def shell(self) -> dict | None:
        return _queued(self._queues["shell"].get, 0)

    def _exists(self) -> bool:
        try:
            model = gateway_request(
                self.url, self.token, "GET", f"/api/kernels/{quote(self.kernel_id)}"
            )
        except GatewayError:
            return False
        return bool(model) and model.get("execution_state") != "dead"

    def alive(self) -> bool:
        return not self._lost

    def returncode(self) -> int | None:
        return None

    def signal(self, sig: int) -> bool:
        try:
            if sig == signal.SIGINT:
                path = f"/api/kernels/{quote(self.kernel_id)}/interrupt"
                gateway_request(self.url, self.token, "POST", path)
            elif sig == signal.SIGKILL:
                self.shutdown(now=True)
            else:
                return False
        except GatewayError:
            return False
        return True

    def _delete(self) -> None:
        try:
            gateway_request(self.url, self.token, "DELETE", f"/api/kernels/{quote(self.kernel_id)}")
        except GatewayError:
            pass  # already gone

    def shutdown(self, now: bool) -> None:
        self.close()
        self._delete()
        self._lost = True

    def close(self) -> None:
        self._closed = True
        try:
            self._socket.close()
        except (OSError, websocket.WebSocketException):
            pass

    def connection(self) -> dict[str, Any]:
        return {"gateway": self.url, "kernel_id": self.kernel_id}


__all__ = [
    "GatewayError",
    "GatewayKernel",
    "KernelHandle",
    "LocalKernel",
    "ServerKernel",
    "gateway_request",
    "gateway_settings",
]
