"""What both the master (its trial containers) and the CLI (`det image build`) need to know about
the container runtime on this machine: which runtime, the options this host needs, and how an
image reference names the registry it is pulled from.

It lives in `determined.common` because the master may import it and the harness must not import
the master: one place generates the settings, so a built image and a trial container run under
the same ones.
"""

from __future__ import annotations

import base64
import ipaddress
import resource
import shutil
from typing import Any

# Podman's default container process limit is far above what a sandbox may allow.
MAX_NPROC = 32768
# The name `make image` builds (and `podman import` gives images without a registry).
DEFAULT_IMAGE = "localhost/jupyter-determined-trial:latest"


def default_runtime() -> str:
    """Podman when installed, else Docker when installed, else "podman" (checks say it is
    missing when something needs it)."""
    for name in ("podman", "docker"):
        if shutil.which(name):
            return name
    return "podman"


def runtime_name(binary: str) -> str:
    """`podman` or `docker` (or whatever else) for a binary name or path."""
    return binary.rstrip("/").rsplit("/", 1)[-1]


def host_settings(binary: str) -> list[str]:
    """The options `run` and `build` need on this machine.

    Podman runs with `runc` when it is installed (Debian's default `crun` refuses hosts with a
    mixed cgroup setup), and every container gets explicit ulimits equal to this process's hard
    limits (a sandbox that caps open files or processes makes the runtime's own defaults fail
    with `setrlimit ... Operation not permitted`)."""
    args = []
    if runtime_name(binary) == "podman":
        runc = shutil.which("runc")
        if runc:
            args += ["--runtime", runc]
    _, nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    if nofile != resource.RLIM_INFINITY:
        args += ["--ulimit", f"nofile={nofile}:{nofile}"]
    _, nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    nproc = MAX_NPROC if nproc == resource.RLIM_INFINITY else min(nproc, MAX_NPROC)
    args += ["--ulimit", f"nproc={nproc}:{nproc}"]
    return args


def registry_of(image: str) -> str | None:
    """The registry host (with its port) an image reference is pulled from, None for a name
    that only the local store can have.

    As in Docker's references, the first path component is a registry when it has a dot or a
    port (`registry.example.com/x`, `127.0.0.1:5000/x`). Bare names (`python:3.11`,
    `me/trainer`) and `localhost/...` without a port (Podman's name for imported and locally
    built images) are never pulled: which registry a short name means differs between
    runtimes and machines."""
    first, slash, _ = image.partition("/")
    if not slash:
        return None
    if "." in first or ":" in first or first.startswith("["):
        return first
    return None


def is_loopback(registry: str) -> bool:
    """Whether a registry (`host[:port]`) is on this machine: such a registry usually speaks
    plain http, and only it is pulled from without TLS verification."""
    host = registry
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_config(registry_auth: dict[str, Any], registry: str) -> dict[str, Any]:
    """The runtime's auth file (`config.json`: Docker's format, which Podman's `--authfile`
    reads too) for Determined's `environment.registry_auth`.

    `serveraddress` names the registry (default: the image's); `auth` is the base64 of
    `username:password`, made from those when absent."""
    server = str(registry_auth.get("serveraddress") or registry)
    # Docker writes "https://host/v1/" style addresses; the runtimes match on the host.
    for scheme in ("https://", "http://"):
        if server.startswith(scheme):
            server = server[len(scheme) :]
    server = server.split("/", 1)[0]
    entry: dict[str, Any] = {}
    auth = registry_auth.get("auth")
    if not auth and registry_auth.get("username") is not None:
        pair = f"{registry_auth.get('username')}:{registry_auth.get('password') or ''}"
        auth = base64.b64encode(pair.encode()).decode()
    if auth:
        entry["auth"] = auth
    for key in ("identitytoken", "registrytoken", "email"):
        if registry_auth.get(key):
            entry[key] = registry_auth[key]
    return {"auths": {server: entry}}


__all__ = [
    "DEFAULT_IMAGE",
    "MAX_NPROC",
    "auth_config",
    "default_runtime",
    "host_settings",
    "is_loopback",
    "registry_of",
    "runtime_name",
]
