"""`MasterLite`: the configurable app that runs the master standalone (or hands its parts to
jupyter_server).

Its settings (traits) are declared in `_settings.py`. Standalone it builds the `Master`
facade, serves `master_lite.api` on tornado, and publishes `<root_dir>/master.json`
({url, pid, token_file}, mode 0600; the token itself in `<root_dir>/private/user_token`) so
that `det` and notebooks find it. The root dir is held by an OS lock and kept private
(`_rootdir.py`).
"""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import logging
import os
import signal
import socket
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web

from master_lite._app._address import derived_host, local_host, ray_head_host
from master_lite._app._hub import HubService, hub_handlers
from master_lite._app._rootdir import (
    RootDirInUse,
    RootDirLock,
    make_private,
    user_token_path,
    write_user_token,
)
from master_lite._app._scheduling import SchedulingSettings
from master_lite._app._settings import MasterLiteSettings
from master_lite.api import make_handlers, max_body_bytes

log = logging.getLogger("master_lite")

MASTER_JSON = "master.json"


class MasterLiteStartError(RuntimeError):
    """The master cannot start; the message says why and what to do (CLI: one line, exit 1)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# Collections of the youngest generation are cheap; a full one walks every tracked object
# (seconds' worth of imports: tornado, traitlets, the searchers) and stalls every request for
# tens of ms. Larger thresholds make full collections rarer under a stream of reports.
GC_THRESHOLDS = (10_000, 50, 50)


def quiet_garbage_collector() -> None:
    """Keep Python's cyclic GC from stalling the event loop: once the master has started, the
    objects it has made so far (modules, classes, the API's routes) live as long as the process,
    so `gc.freeze` moves them out of the collector's sight, and later collections walk only what
    requests made since. Garbage cycles are still collected (`gc.collect` first, then
    thresholds that only make collections rarer)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class MasterLite(MasterLiteSettings, SchedulingSettings):
    """The master: experiments in SQLite, searchers, a scheduler, and the REST API."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # The advertised URL (trials' DET_MASTER, master.json's url) and the one a client on
        # this machine connects to (master.json's local_url); the same unless bound to a
        # wildcard address or given --advertised-url (_address.py).
        self.url: str | None = None
        self.local_url: str | None = None
        self._server: tornado.httpserver.HTTPServer | None = None
        self._started_master = False
        self._root_lock: RootDirLock | None = None
        # Set by `master-lite --jupyterhub`: run as a JupyterHub-managed service.
        self.hub_service: HubService | None = None

    # --- the parts (also used when mounting inside jupyter_server) ---------------------------

    @property
    def master_json_path(self) -> Path:
        return Path(self.root_dir) / MASTER_JSON

    @property
    def user_token_path(self) -> Path:
        """`<root_dir>/private/user_token`: the user token, readable by this Unix user only."""
        return user_token_path(self.root_dir)

    def build_master(self, **overrides: Any) -> Any:
        """The facade configured by these traits (`overrides`: e.g. the host's user_token)."""
        from master_lite._master import Master  # the facade pulls in the store and scheduler
        from master_lite.runners import GatewayDefault, RunnerClasses

        if self.runner_class is not None:
            log.warning(
                "MasterLite.runner_class is deprecated: it now replaces only the process runner "
                "(containers and kernels keep theirs); set process_runner_class instead"
            )
        return Master(
            self.root_dir,
            cpu_slots=self.cpu_slots,
            context_size_limit=self.context_size_limit,
            checkpoint_storage_roots=list(self.checkpoint_storage_roots),
            resource_manager=self.resource_manager,
            ray_address=self.ray_address,
            runner_classes=RunnerClasses(
                # runner_class: the deprecated name of process_runner_class.
                process=self.process_runner_class or self.runner_class,
                container=self.container_runner_class,
                kernel=self.kernel_runner_class,
                ray=self.ray_runner_class,
            ),
            container_runtime=self.container_runtime,
            determined_images_fallback=self.determined_images_fallback,
            kernel_gateway=GatewayDefault(
                url=self.kernel_gateway_url or None,
                token=self.kernel_gateway_token or None,
                master_url=self.kernel_gateway_master_url or None,
                files_limit=self.kernel_gateway_files_limit,
            ),
            preemption_grace_seconds=self.preemption_grace_seconds,
            tensorboard_refresh_seconds=self.tensorboard_refresh_seconds,
            run_trials_as=self.run_trials_as,
            read_access=self.read_access,
            session_lifetime_hours=self.session_lifetime_hours,
            fallback_unix_user=self.fallback_unix_user,
            trial_python=self.trial_python,
            scheduling=self.scheduling_policy(),
            resource_pools=list(self.resource_pools) or None,
            default_resource_pool=self.default_resource_pool or None,
            **overrides,
        )

    def handlers(
        self, master: Any, prefix: str = "", **kwargs: Any
    ) -> list[tuple[str, type, dict]]:
        """The API's tornado routes under `prefix` (kwargs: base_handler, user_auth)."""
        return make_handlers(master, prefix, context_size_limit=self.context_size_limit, **kwargs)

    def make_application(self, master: Any) -> tornado.web.Application:
        service = self.hub_service
        if service is None:
            return tornado.web.Application(self.handlers(master))
        # A JupyterHub service: the API under the service's prefix, callers identified
        # through the Hub, and the sign-in page (its OAuth cookie is signed with a secret of
        # this process: after a restart a browser signs in again, without a prompt).
        auth = service.make_auth()
        master.users.use_hub(auth)
        routes = self.handlers(master, service.prefix) + hub_handlers(master, auth)
        return tornado.web.Application(routes, cookie_secret=os.urandom(32))

    # --- standalone lifecycle ------------------------------------------------------------------

    def claim_root_dir(self) -> None:
        """Take the root dir's lock before anything else is written there (MasterLiteStartError
        names the master holding it), then make the root dir private (0700, an existing looser
        one tightened with a log line).
        Idempotent; `release_root_dir` (or the process's end) gives it up."""
        if self._root_lock is not None and self._root_lock.held:
            return
        # The root dir itself (0700) is the one thing made before the lock: the lock file
        # lives in it. Existing entries are tightened only by the master that holds the lock.
        Path(self.root_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = RootDirLock(self.root_dir)
        try:
            lock.acquire()
        except RootDirInUse as exc:
            raise MasterLiteStartError(str(exc)) from None
        try:
            make_private(self.root_dir)
        except BaseException:
            lock.release()
            raise
        self._root_lock = lock

    def release_root_dir(self) -> None:
        """Give up the root dir's lock (taken by `claim_root_dir`)."""
        if self._root_lock is not None:
            self._root_lock.release()
            self._root_lock = None

    def check_not_running(self) -> None:
        """Raise MasterLiteStartError if a live master already serves this root dir: two
        masters on one root dir would share (and corrupt) one store."""
        try:
            info = json.loads(self.master_json_path.read_text())
            pid, url = int(info["pid"]), str(info["url"])
            if info.get("hostname") == socket.gethostname() and info.get("local_url"):
                url = str(info["local_url"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if pid == os.getpid() or not _pid_alive(pid):
            return
        # A hosted master's URL has a path (`http://127.0.0.1:8888/<base_url>determined`):
        # only its host and port matter here.
        try:
            address = urllib.parse.urlsplit(url)
            host, port = address.hostname, address.port
            if not host or not port:
                return  # no address to probe (e.g. an old master.json of a `--port 0` server)
            with socket.create_connection((host, port), timeout=1):
                pass
        except (OSError, ValueError):
            return  # stale file: that master is gone
        raise MasterLiteStartError(
            f"root dir {self.root_dir} is in use by another master-lite (pid {pid}, {url}); "
            "stop it, or choose another root dir with --root-dir"
        )

    def _bind(self) -> list[socket.socket]:
        try:
            return tornado.netutil.bind_sockets(self.port, address=self.host)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise MasterLiteStartError(
                    f"port {self.port} on {self.host} is already in use; choose another with "
                    "--port N (or --port 0 for any free port)"
                ) from None
            raise MasterLiteStartError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None

    def _derived_url(self, port: int) -> str:
        """The advertised URL when none is set (rule in _address.py)."""
        toward = None
        if self.resource_manager == "ray":
            toward = ray_head_host(self.ray_address or os.environ.get("RAY_ADDRESS"))
        return f"http://{derived_host(self.host, toward)}:{port}"

    def write_master_json(self, token: str) -> None:
        """Publish `{url, local_url, hostname, pid, token_file}` as <root_dir>/master.json:
        `url` the advertised URL (for a client on another machine reading a shared root dir),
        `local_url` the one a client on `hostname` (this machine) uses; mode 0600, and
        the user token in `token_file` (0600 in a 0700 directory): master.json holds no secret,
        so that a later opening of the root dir to trials of another Unix user never opens
        the token (docs/reliability.md)."""
        token_file = write_user_token(self.root_dir, token)
        if self._root_lock is not None:
            self._root_lock.publish(self.url)
        path = self.master_json_path
        temporary = path.with_name(f".{MASTER_JSON}.{os.getpid()}.tmp")
        temporary.unlink(missing_ok=True)
        # Created 0600 from the start: the token must never be readable by others, not even
        # for the moment between creating and chmod-ing the file.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            info = {"url": self.url, "pid": os.getpid(), "token_file": str(token_file)}
            if self.local_url and self.local_url != self.url:
                info.update(local_url=self.local_url, hostname=socket.gethostname())
            json.dump(info, file)
            file.write("\n")
        os.replace(temporary, path)

    async def start(self) -> str:
        """Listen, start the master, publish master.json; returns the URL."""
        self.claim_root_dir()
        try:
            self.check_not_running()  # a master of an earlier version, which took no lock
            sockets = self._bind()
        except BaseException:
            self.release_root_dir()
            raise
        port = sockets[0].getsockname()[1]
        self.local_url = f"http://{local_host(self.host)}:{port}"
        self.url = self.advertised_url or self._derived_url(port)
        if self.hub_service is not None:
            # The API lives under the service's prefix; trials and master.json use it.
            # (also under an advertised URL: the proxy's and the service's paths are the same)
            self.local_url += self.hub_service.prefix.rstrip("/")
            self.url += self.hub_service.prefix.rstrip("/")
        if self.url != self.local_url:
            log.info("trials reach the master at %s (listening on %s)", self.url, self.local_url)
        try:
            try:
                master = self.master if self.master is not None else self.build_master()
            except ValueError as exc:  # a setting the facade refuses, e.g. resource_manager
                raise MasterLiteStartError(str(exc)) from None
            self.master = master
            # Bodies up to twice the API's limit are read, so that the API can answer 413 with
            # a message; tornado's own default buffer (100 MB) would cut a 96 MiB context.
            ceiling = 2 * max_body_bytes(self.context_size_limit)
            self._server = tornado.httpserver.HTTPServer(
                self.make_application(master), max_body_size=ceiling, max_buffer_size=ceiling
            )
            self._server.add_sockets(sockets)
            await master.start(self.url)
            self._started_master = True
            self.write_master_json(master.user_token)
        except BaseException:
            if self._server is not None:
                self._server.stop()
            for sock in sockets:
                sock.close()
            self.release_root_dir()
            raise
        log.info("master-lite serving %s from %s", self.url, self.root_dir)
        return self.url

    async def stop(self) -> None:
        """Pause running trials (they checkpoint through the API, so it keeps serving until
        they are done), then stop listening and remove master.json."""
        try:
            if self._started_master:
                self._started_master = False
                await self.master.stop(pause_running=True)
        finally:
            if self._server is not None:
                self._server.stop()
                try:
                    await asyncio.wait_for(self._server.close_all_connections(), 5)
                except asyncio.TimeoutError:
                    log.warning("some API connections did not close within 5 s")
                self._server = None
            self.remove_master_json()
            self.release_root_dir()

    def remove_master_json(self) -> None:
        """Remove master.json if this process wrote it."""
        try:
            info = json.loads(self.master_json_path.read_text())
        except (OSError, ValueError):
            return
        if info.get("pid") == os.getpid():  # never remove another master's file
            self.master_json_path.unlink(missing_ok=True)
            user_token_path(self.root_dir).unlink(missing_ok=True)

    # Earlier names, still used by jupyter_determined's server extension.
    _check_not_running = check_not_running
    _write_master_json = write_master_json

    async def serve(self, on_listening: Callable[[str], None] | None = None) -> None:
        """Start, run until SIGINT/SIGTERM, then shut down cleanly."""
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        # Diagnostics (soak/soak_load.py --profile): profile the event loop thread, where all
        # request handling runs, and write pstats to this path on a clean stop. It counts the
        # thread's CPU time, not wall time: on a busy machine wall time mostly measures when the
        # process was not scheduled.
        profile_path = os.environ.get("MASTER_LITE_PROFILE")
        profiler = None
        if profile_path:
            import cProfile
            import time

            profiler = cProfile.Profile(time.thread_time)
            profiler.enable()
        try:
            url = await self.start()
            # The process is the master's alone here (not a host's like jupyter_server's, nor
            # a test's), so its collector is the master's to tune.
            quiet_garbage_collector()
            if on_listening is not None:
                on_listening(url)
            await stopping.wait()
            log.info("master-lite shutting down: pausing running trials")
        finally:
            await self.stop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
            if profiler is not None and profile_path:
                profiler.disable()
                profiler.dump_stats(profile_path)


__all__ = ["MasterLite", "MasterLiteStartError"]
