"""`MasterLite`: the configurable app that runs the master standalone (or hands its parts to
jupyter_server).

Standalone it builds the `Master` facade, serves `master_lite.api` on tornado, and publishes
`<root_dir>/master.json` ({url, token, pid}, mode 0600) so that `det` and notebooks find it.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web
from jupyter_core.paths import jupyter_data_dir
from traitlets import Any as AnyTrait
from traitlets import Enum, Float, Integer, TraitError, Type, Unicode, default, validate
from traitlets.config import Configurable

from determined.common import context as context_mod
from master_lite.api import make_handlers, max_body_bytes

log = logging.getLogger("master_lite")

MASTER_JSON = "master.json"


class MasterLiteStartError(RuntimeError):
    """The master cannot start; the message says why and what to do (CLI: one line, exit 1)."""


def _from_env(name: str, convert: Callable[[str], Any], fallback: Any) -> Any:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return fallback
    try:
        return convert(raw)
    except ValueError:
        raise TraitError(
            f"environment variable {name}={raw!r} is not a valid "
            f"{getattr(convert, '__name__', 'value')}"
        ) from None


def _connect_host(host: str) -> str:
    """The address clients use to reach a server bound to `host`."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


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


class MasterLite(Configurable):
    """The master: experiments in SQLite, searchers, a scheduler, and the REST API."""

    root_dir = Unicode(
        help="Where the master keeps its state: master.db, stored contexts, trial work dirs and "
        "logs, default checkpoint storage, master.json. Env: MASTER_LITE_ROOT_DIR. "
        "Default: <jupyter data dir>/determined."
    ).tag(config=True)
    cpu_slots = Integer(
        help="How many CPU slots to offer when the machine has no GPU (each trial holds "
        "resources.slots_per_trial of them). Env: MASTER_LITE_CPU_SLOTS."
    ).tag(config=True)
    resource_manager = Enum(
        ["local", "ray"],
        help="What runs trials: 'local' subprocesses (default) or 'ray'. "
        "Env: MASTER_LITE_RESOURCE_MANAGER.",
    ).tag(config=True)
    runner_class = Type(
        None,
        klass="master_lite.runners.Runner",
        allow_none=True,
        help="Deprecated: the older name of process_runner_class (it replaces the process runner "
        "only; containers and kernels keep their runners). Env: MASTER_LITE_RUNNER_CLASS.",
    ).tag(config=True)
    process_runner_class = Type(
        None,
        klass="master_lite.runners.Runner",
        allow_none=True,
        help="A Runner subclass (dotted name) that runs the trials of experiments with neither "
        "environment.image nor environment.kernel, instead of local processes "
        "(master_lite.runners.LocalRunner). Constructed with log_sink= and on_exit= (see "
        "master_lite/runners/_base.py). Env: MASTER_LITE_PROCESS_RUNNER_CLASS.",
    ).tag(config=True)
    container_runner_class = Type(
        None,
        klass="master_lite.runners.Runner",
        allow_none=True,
        help="A Runner subclass (dotted name) that runs the trials of experiments with "
        "environment.image, instead of master_lite.runners.ContainerRunner. Constructed with "
        "log_sink=, on_exit= and runtime= (a ContainerRuntime). "
        "Env: MASTER_LITE_CONTAINER_RUNNER_CLASS.",
    ).tag(config=True)
    kernel_runner_class = Type(
        None,
        klass="master_lite.runners.Runner",
        allow_none=True,
        help="A Runner subclass (dotted name) that runs the trials of experiments with "
        "environment.kernel, instead of master_lite.runners.KernelRunner. Constructed with "
        "log_sink=, on_exit=, jupyter_host=, loop= and gateway_default=. "
        "Env: MASTER_LITE_KERNEL_RUNNER_CLASS.",
    ).tag(config=True)
    ray_runner_class = Type(
        None,
        klass="master_lite.runners.Runner",
        allow_none=True,
        help="A Runner subclass (dotted name) that runs every trial under resource_manager "
        "'ray', instead of master_lite.runners.RayRunner. Constructed with the RayCluster, "
        "then log_sink=, on_exit= and use_gpus=. Env: MASTER_LITE_RAY_RUNNER_CLASS.",
    ).tag(config=True)
    container_runtime = Unicode(
        help="The container runtime that runs trials of experiments with environment.image: "
        "'podman', 'docker', or a path to either. The options this machine needs (runc, "
        "ulimits) are generated. Env: MASTER_LITE_CONTAINER_RUNTIME. Default: podman if "
        "installed, else docker."
    ).tag(config=True)
    kernel_gateway_url = Unicode(
        help="A Jupyter (Kernel) Gateway, http(s)://host:port, on which every kernel "
        "experiment (environment.kernel) whose config names no gateway runs its trials' "
        "kernels; `environment.kernel.gateway: local` opts an experiment back into local "
        "kernels. Empty: local kernels. Env: MASTER_LITE_KERNEL_GATEWAY_URL."
    ).tag(config=True)
    kernel_gateway_token = Unicode(
        help="The token for a Jupyter Gateway whose config gives none (sent as "
        "`Authorization: token ...`). Env: MASTER_LITE_KERNEL_GATEWAY_TOKEN, then "
        "JUPYTER_GATEWAY_AUTH_TOKEN."
    ).tag(config=True)
    kernel_gateway_master_url = Unicode(
        help="The master URL (DET_MASTER) given to trials in gateway kernels: one the "
        "gateway's machine reaches, e.g. http://this-host:8080 with --host 0.0.0.0. Empty: "
        "the master's own URL (loopback unless --host says otherwise). "
        "Env: MASTER_LITE_KERNEL_GATEWAY_MASTER_URL."
    ).tag(config=True)
    kernel_gateway_files_limit = Integer(
        help="The most a kernel on a Jupyter Gateway is sent of its trial's files (the "
        "context, gzipped tar bytes); a larger run fails with a message naming this. "
        "Env: MASTER_LITE_KERNEL_GATEWAY_FILES_LIMIT."
    ).tag(config=True)
    ray_address = Unicode(
        None,
        allow_none=True,
        help="Ray cluster for resource_manager 'ray' ('auto', 'host:port', 'ray://...'); unset: "
        "$RAY_ADDRESS, else a local Ray. Env: MASTER_LITE_RAY_ADDRESS.",
    ).tag(config=True)
    context_size_limit = Integer(
        help="Largest accepted experiment context (tar.gz bytes); bigger uploads get 413. "
        "Env: MASTER_LITE_CONTEXT_SIZE_LIMIT."
    ).tag(config=True)
    preemption_grace_seconds = Float(
        help="How long a preempted (paused, killed, shut down) trial may take to checkpoint "
        "and exit before it is terminated. Env: MASTER_LITE_PREEMPTION_GRACE_SECONDS."
    ).tag(config=True)
    tensorboard_refresh_seconds = Float(
        help="How often a TensorBoard's log directory is rewritten from the metrics of its "
        "trials that still run (and how often TensorBoard reloads it). "
        "Env: MASTER_LITE_TENSORBOARD_REFRESH_SECONDS."
    ).tag(config=True)
    host = Unicode(
        help="Address to listen on (standalone). Loopback by default: the API is guarded by a "
        "token, but there is no TLS. Env: MASTER_LITE_HOST."
    ).tag(config=True)
    port = Integer(
        help="Port to listen on (standalone); 0 picks any free port. Env: MASTER_LITE_PORT."
    ).tag(config=True)

    master = AnyTrait(
        None,
        allow_none=True,
        help="A ready Master facade to serve instead of building one (tests).",
    )

    @default("root_dir")
    def _default_root_dir(self) -> str:
        return _from_env(
            "MASTER_LITE_ROOT_DIR", str, os.path.join(jupyter_data_dir(), "determined")
        )

    @default("cpu_slots")
    def _default_cpu_slots(self) -> int:
        return _from_env("MASTER_LITE_CPU_SLOTS", int, 2)

    @default("runner_class")
    def _default_runner_class(self) -> str | None:
        return os.environ.get("MASTER_LITE_RUNNER_CLASS") or None

    @default("process_runner_class")
    def _default_process_runner_class(self) -> str | None:
        return os.environ.get("MASTER_LITE_PROCESS_RUNNER_CLASS") or None

    @default("container_runner_class")
    def _default_container_runner_class(self) -> str | None:
        return os.environ.get("MASTER_LITE_CONTAINER_RUNNER_CLASS") or None

    @default("kernel_runner_class")
    def _default_kernel_runner_class(self) -> str | None:
        return os.environ.get("MASTER_LITE_KERNEL_RUNNER_CLASS") or None

    @default("ray_runner_class")
    def _default_ray_runner_class(self) -> str | None:
        return os.environ.get("MASTER_LITE_RAY_RUNNER_CLASS") or None

    @default("container_runtime")
    def _default_container_runtime(self) -> str:
        from master_lite.runners import default_runtime

        return _from_env("MASTER_LITE_CONTAINER_RUNTIME", str, None) or default_runtime()

    @default("kernel_gateway_url")
    def _default_kernel_gateway_url(self) -> str:
        return _from_env("MASTER_LITE_KERNEL_GATEWAY_URL", str, "")

    @default("kernel_gateway_token")
    def _default_kernel_gateway_token(self) -> str:
        return _from_env(
            "MASTER_LITE_KERNEL_GATEWAY_TOKEN",
            str,
            os.environ.get("JUPYTER_GATEWAY_AUTH_TOKEN", ""),
        )

    @default("kernel_gateway_master_url")
    def _default_kernel_gateway_master_url(self) -> str:
        return _from_env("MASTER_LITE_KERNEL_GATEWAY_MASTER_URL", str, "")

    @default("kernel_gateway_files_limit")
    def _default_kernel_gateway_files_limit(self) -> int:
        from master_lite.runners import DEFAULT_FILES_LIMIT

        return _from_env("MASTER_LITE_KERNEL_GATEWAY_FILES_LIMIT", int, DEFAULT_FILES_LIMIT)

    @validate("kernel_gateway_url", "kernel_gateway_master_url")
    def _check_http_url(self, proposal: Any) -> str:
        value = str(proposal["value"]).strip().rstrip("/")
        if value and not value.startswith(("http://", "https://")):
            raise TraitError(
                f"{proposal['trait'].name} must be an http(s)://host:port URL, got {value!r}"
            )
        return value

    @default("resource_manager")
    def _default_resource_manager(self) -> str:
        return _from_env("MASTER_LITE_RESOURCE_MANAGER", str, "local")

    @default("ray_address")
    def _default_ray_address(self) -> str | None:
        return _from_env("MASTER_LITE_RAY_ADDRESS", str, None)

    @default("context_size_limit")
    def _default_context_size_limit(self) -> int:
        return _from_env("MASTER_LITE_CONTEXT_SIZE_LIMIT", int, context_mod.DEFAULT_LIMIT_BYTES)

    @default("preemption_grace_seconds")
    def _default_preemption_grace_seconds(self) -> float:
        return _from_env("MASTER_LITE_PREEMPTION_GRACE_SECONDS", float, 30.0)

    @default("tensorboard_refresh_seconds")
    def _default_tensorboard_refresh_seconds(self) -> float:
        return _from_env("MASTER_LITE_TENSORBOARD_REFRESH_SECONDS", float, 5.0)

    @validate("tensorboard_refresh_seconds")
    def _check_tensorboard_refresh_seconds(self, proposal: Any) -> float:
        if not proposal["value"] > 0:
            raise TraitError(f"tensorboard_refresh_seconds must be > 0, got {proposal['value']}")
        return proposal["value"]

    @default("host")
    def _default_host(self) -> str:
        return _from_env("MASTER_LITE_HOST", str, "127.0.0.1")

    @default("port")
    def _default_port(self) -> int:
        return _from_env("MASTER_LITE_PORT", int, 8080)

    @validate("cpu_slots")
    def _check_cpu_slots(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise TraitError(f"cpu_slots must be >= 0, got {proposal['value']}")
        return proposal["value"]

    @validate("port")
    def _check_port(self, proposal: Any) -> int:
        if not 0 <= proposal["value"] <= 65535:
            raise TraitError(f"port must be 0..65535, got {proposal['value']}")
        return proposal["value"]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url: str | None = None
        self._server: tornado.httpserver.HTTPServer | None = None
        self._started_master = False

    # --- the parts (also used when mounting inside jupyter_server) ---------------------------

    @property
    def master_json_path(self) -> Path:
        return Path(self.root_dir) / MASTER_JSON

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
            kernel_gateway=GatewayDefault(
                url=self.kernel_gateway_url or None,
                token=self.kernel_gateway_token or None,
                master_url=self.kernel_gateway_master_url or None,
                files_limit=self.kernel_gateway_files_limit,
            ),
            preemption_grace_seconds=self.preemption_grace_seconds,
            tensorboard_refresh_seconds=self.tensorboard_refresh_seconds,
            **overrides,
        )

    def handlers(
        self, master: Any, prefix: str = "", **kwargs: Any
    ) -> list[tuple[str, type, dict]]:
        """The API's tornado routes under `prefix` (kwargs: base_handler, user_auth)."""
        return make_handlers(master, prefix, context_size_limit=self.context_size_limit, **kwargs)

    def make_application(self, master: Any) -> tornado.web.Application:
        return tornado.web.Application(self.handlers(master))

    # --- standalone lifecycle ------------------------------------------------------------------

    def check_not_running(self) -> None:
        """Raise MasterLiteStartError if a live master already serves this root dir: two
        masters on one root dir would share (and corrupt) one store."""
        try:
            info = json.loads(self.master_json_path.read_text())
            pid, url = int(info["pid"]), str(info["url"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if pid == os.getpid() or not _pid_alive(pid):
            return
        host_port = url.split("://", 1)[-1].rstrip("/")
        host, _, port = host_port.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1):
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

    def write_master_json(self, token: str) -> None:
        """Publish `{url: self.url, token, pid}` as <root_dir>/master.json, mode 0600."""
        path = self.master_json_path
        temporary = path.with_name(f".{MASTER_JSON}.{os.getpid()}.tmp")
        temporary.unlink(missing_ok=True)
        # Created 0600 from the start: the token must never be readable by others, not even
        # for the moment between creating and chmod-ing the file.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            json.dump({"url": self.url, "token": token, "pid": os.getpid()}, file)
            file.write("\n")
        os.replace(temporary, path)

    async def start(self) -> str:
        """Listen, start the master, publish master.json; returns the URL."""
        Path(self.root_dir).mkdir(parents=True, exist_ok=True)
        self.check_not_running()
        sockets = self._bind()
        port = sockets[0].getsockname()[1]
        self.url = f"http://{_connect_host(self.host)}:{port}"
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

    def remove_master_json(self) -> None:
        """Remove master.json if this process wrote it."""
        try:
            info = json.loads(self.master_json_path.read_text())
        except (OSError, ValueError):
            return
        if info.get("pid") == os.getpid():  # never remove another master's file
            self.master_json_path.unlink(missing_ok=True)

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
