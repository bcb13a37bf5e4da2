"""`MasterLiteSettings`: every setting of the master, as traitlets traits.

Each trait has its default, its `MASTER_LITE_*` environment variable and its check here;
`MasterLite` (_app.py) inherits them and builds and runs the master from them. Configuration
names the app's class as before (`c.MasterLite.cpu_slots`, `--MasterLite.port`): traitlets
applies a class's section to the traits it inherits.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Any as AnyTrait
from traitlets import Bool, Enum, Float, Integer, List, TraitError, Type, Unicode, default, validate
from traitlets.config import Configurable

from determined.common import context as context_mod
from master_lite._app._address import check_advertised_url


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


def _boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


_boolean.__name__ = "boolean (true or false)"  # for _from_env's message


class MasterLiteSettings(Configurable):
    """The master's settings (what `MasterLite` is configured with)."""

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
        "'ray', instead of master_lite.runners.RayRunner. Constructed with the RayConnection, "
        "then log_sink=, on_exit= and use_gpus=. Env: MASTER_LITE_RAY_RUNNER_CLASS.",
    ).tag(config=True)
    container_runtime = Unicode(
        help="The container runtime that runs trials of experiments with environment.image: "
        "'podman', 'docker', or a path to either. The options this machine needs (runc, "
        "ulimits) are generated. Env: MASTER_LITE_CONTAINER_RUNTIME. Default: podman if "
        "installed, else docker."
    ).tag(config=True)
    determined_images_fallback = Bool(
        help="Run the trials of experiments whose environment.image is one of Determined's "
        "published environment images (determinedai/environments*, determinedai/*-ngc*, "
        "determinedai/pytorch-*, determinedai/tensorflow-*, also per slot type) that this "
        "machine cannot have (not in the local image store, or no container runtime) as host "
        "processes in the master's own environment, with a line in the trial's log saying so. "
        "False: such experiments are refused at submit like any other missing image. "
        "Env: MASTER_LITE_DETERMINED_IMAGES_FALLBACK (true/false)."
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
        "the master's advertised URL (advertised_url). "
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
    checkpoint_storage_roots = List(
        Unicode(),
        help="Directories (absolute) under which an experiment's or unmanaged run's "
        "checkpoint_storage (shared_fs host_path/storage_path, directory container_path) may "
        "lie, besides <root_dir>/checkpoints, which is always allowed; a config naming storage "
        "elsewhere is refused (400). The master serves and deletes checkpoint directories, so "
        "this is what it may read and delete. Env: MASTER_LITE_CHECKPOINT_STORAGE_ROOTS "
        "(separated by the OS path separator, ':').",
    ).tag(config=True)
    run_trials_as = Enum(
        ["master", "owner"],
        help="Which Unix account runs trials: 'master' (default: the master's own) or 'owner' "
        "(the account named like the experiment's owner; the owner account runs as the master; "
        "needs a master that runs as root). Trials run as another account get their own 0700 "
        "work dirs and checkpoints (docs/team.md, 'What runs as whom'). "
        "Env: MASTER_LITE_RUN_TRIALS_AS.",
    ).tag(config=True)
    read_access = Enum(
        ["all", "own"],
        help="Who reads what: 'all' (default: every signed-in user reads everything) or 'own' "
        "(a user who is not an admin reads only their own experiments, models, TensorBoards, "
        "workspaces and projects, and the default workspace and project; another's answer "
        "404 and lists leave them out). Admins and the owner account read everything "
        "(docs/team.md, 'Who may read'). Env: MASTER_LITE_READ_ACCESS.",
    ).tag(config=True)
    session_lifetime_hours = Float(
        help="How long a user's session (det user login) lasts, in hours (default 168: 7 "
        "days); after that its token answers 401 saying it expired and to sign in again. "
        "Env: MASTER_LITE_SESSION_LIFETIME_HOURS.",
    ).tag(config=True)
    fallback_unix_user = Unicode(
        help="With run_trials_as 'owner': the Unix account that runs the trials of users who "
        "have none of their own (e.g. Hub-only users). Empty (default): their trials fail to "
        "start, with a message naming the user and this setting. "
        "Env: MASTER_LITE_FALLBACK_UNIX_USER."
    ).tag(config=True)
    trial_python = Unicode(
        help="The interpreter that `python3` means in trials run as another Unix account "
        "(run_trials_as 'owner'): one that account can execute. Default: the .venv-trials "
        "that `make install` makes beside .venv, else the master's own interpreter. "
        "Env: MASTER_LITE_TRIAL_PYTHON."
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
    advertised_url = Unicode(
        help="The URL trials (DET_MASTER) and clients on other machines (master.json's url) "
        "use to reach the master, e.g. http://10.0.0.5:8080 when it listens on 0.0.0.0 "
        "behind that address. Empty (default): the address it listens on; for 0.0.0.0 or :: "
        "the address of the interface that routes to the Ray head (resource_manager 'ray'), "
        "else to the default route, else the host's FQDN, else loopback "
        "(docs/distributed.md). Env: MASTER_LITE_ADVERTISED_URL."
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

    @default("determined_images_fallback")
    def _default_determined_images_fallback(self) -> bool:
        return _from_env("MASTER_LITE_DETERMINED_IMAGES_FALLBACK", _boolean, True)

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

    @default("checkpoint_storage_roots")
    def _default_checkpoint_storage_roots(self) -> list[str]:
        raw = os.environ.get("MASTER_LITE_CHECKPOINT_STORAGE_ROOTS") or ""
        return [part for part in raw.split(os.pathsep) if part]

    @validate("checkpoint_storage_roots")
    def _check_checkpoint_storage_roots(self, proposal: Any) -> list[str]:
        for path in proposal["value"]:
            if not os.path.isabs(os.path.expanduser(path)):
                raise TraitError(f"checkpoint_storage_roots: {path!r} is not an absolute path")
        return list(proposal["value"])

    @default("run_trials_as")
    def _default_run_trials_as(self) -> str:
        value = _from_env("MASTER_LITE_RUN_TRIALS_AS", str, "master")
        if value not in ("master", "owner"):
            raise TraitError(
                f"environment variable MASTER_LITE_RUN_TRIALS_AS={value!r}: expected "
                "'master' or 'owner'"
            )
        return value

    @default("read_access")
    def _default_read_access(self) -> str:
        value = _from_env("MASTER_LITE_READ_ACCESS", str, "all")
        if value not in ("all", "own"):
            raise TraitError(
                f"environment variable MASTER_LITE_READ_ACCESS={value!r}: expected 'all' or 'own'"
            )
        return value

    @default("fallback_unix_user")
    def _default_fallback_unix_user(self) -> str:
        return _from_env("MASTER_LITE_FALLBACK_UNIX_USER", str, "")

    @default("trial_python")
    def _default_trial_python(self) -> str:
        from master_lite.runs import default_trial_python

        return _from_env("MASTER_LITE_TRIAL_PYTHON", str, "") or default_trial_python()

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

    @default("session_lifetime_hours")
    def _default_session_lifetime_hours(self) -> float:
        value = _from_env("MASTER_LITE_SESSION_LIFETIME_HOURS", float, 7 * 24.0)
        if not value > 0:
            raise TraitError(
                f"environment variable MASTER_LITE_SESSION_LIFETIME_HOURS={value!r}: "
                "session_lifetime_hours must be > 0"
            )
        return value

    @validate("session_lifetime_hours")
    def _check_session_lifetime_hours(self, proposal: Any) -> float:
        if not proposal["value"] > 0:
            raise TraitError(f"session_lifetime_hours must be > 0, got {proposal['value']}")
        return proposal["value"]

    @default("host")
    def _default_host(self) -> str:
        return _from_env("MASTER_LITE_HOST", str, "127.0.0.1")

    @default("port")
    def _default_port(self) -> int:
        return _from_env("MASTER_LITE_PORT", int, 8080)

    @default("advertised_url")
    def _default_advertised_url(self) -> str:
        value = _from_env("MASTER_LITE_ADVERTISED_URL", str, "")
        try:
            return check_advertised_url(value, "environment variable MASTER_LITE_ADVERTISED_URL")
        except ValueError as exc:
            raise TraitError(str(exc)) from None

    @validate("advertised_url")
    def _check_advertised_url(self, proposal: Any) -> str:
        try:
            return check_advertised_url(str(proposal["value"]))
        except ValueError as exc:
            raise TraitError(str(exc)) from None

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


__all__ = ["MasterLiteSettings"]
