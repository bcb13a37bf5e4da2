"""Pulling a trial's image in the trial's own run.

An image whose reference names a registry (`registry.example.com/team/x:1`) is pulled by the
run's client process before `<runtime> run`: a shell that pulls when the image is not in the
local store (always with `force_pull_image`), then execs the run. So the pull's output lands in
the trial's logs line by line, a slow registry delays only that trial (never the master's event
loop), and a failed pull ends the trial in ERROR with a line saying what to do.

Credentials (`environment.registry_auth`) go into an auth file (mode 0600) in a private
directory made for the run (`PullState`, under `<root_dir>/pulls`, mode 0700), read by the
runtime through `--authfile` (Podman) or `--config` (Docker), never on a command line `ps`
shows. The shell removes the file right after the pull and the directory before it execs the
run, so the directory's existence also tells the runner that the run is still pulling (signals
then go to the client, as there is no container).
A master that crashed mid-pull may leave directories there: the next one on the root dir removes
them with the containers it left (`remove_leftover_pulls`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from determined.common.containers import auth_config, is_loopback, registry_of
from master_lite.runners.container._runtime import ContainerRuntime

# The exit status of a run whose pull failed (as `<runtime> run` exits when it cannot start).
PULL_FAILED = 125
_AUTH_FILE = "config.json"


@dataclasses.dataclass
class PullState:
    """The private directory of one run's pull (and its auth file, when it has credentials)."""

    directory: Path

    @classmethod
    def create(cls, base: Path, registry_auth: dict | None, registry: str) -> PullState:
        """A new directory under `base` (made 0700), with the auth file when there are
        credentials."""
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(base, 0o700)
        directory = Path(tempfile.mkdtemp(prefix="run-", dir=base))  # mode 0700
        if registry_auth:
            path = directory / _AUTH_FILE
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(auth_config(registry_auth, registry), out)
        return cls(directory)

    @property
    def auth_file(self) -> Path | None:
        path = self.directory / _AUTH_FILE
        return path if path.exists() else None

    def pulling(self) -> bool:
        """Whether the run has not finished its pull yet (the shell removes the directory just
        before it starts the container)."""
        return self.directory.exists()

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def pulls_dir(runtime: ContainerRuntime) -> Path:
    """Where the runs of this runtime's master keep their pull directories."""
    return Path(runtime.root_label) / "pulls"


def remove_leftover_pulls(runtime: ContainerRuntime) -> None:
    """Remove the pull directories (and credentials) a crashed master left."""
    shutil.rmtree(pulls_dir(runtime), ignore_errors=True)


def pull_command(runtime: ContainerRuntime, image: str, auth_file: Path | None) -> list[str]:
    """`<runtime> pull` of `image`, with the run's auth file and, for a registry on this
    machine (plain http as a rule), without TLS verification."""
    registry = registry_of(image) or ""
    if runtime.name == "docker":
        # Docker reads credentials from a config directory; it allows http on 127.0.0.0/8.
        config = ["--config", str(auth_file.parent)] if auth_file else []
        return [runtime.binary, *config, "pull", image]
    command = [runtime.binary, "pull"]
    if auth_file:
        command += ["--authfile", str(auth_file)]
    if is_loopback(registry):
        command.append("--tls-verify=false")
    return [*command, image]


def pull_wrapper(
    runtime: ContainerRuntime, image: str, state: PullState, *, force: bool, run: list[str]
) -> list[str]:
    """`run` behind a shell that pulls `image` first (when absent, or always when `force`)."""
    registry = registry_of(image)
    q = shlex.quote
    exists = " ".join(q(arg) for arg in runtime.exists_command(image))
    pull = " ".join(q(arg) for arg in pull_command(runtime, image, state.auth_file))
    auth = q(str(state.directory / _AUTH_FILE))
    failed = (
        f"master-lite: could not pull image {image} from the registry {registry} (the "
        f"runtime's message is above: check that {registry} is reachable from this machine, "
        "that the image's name and tag are right, and environment.registry_auth's username "
        "and password; or build the image here, without a registry: `make image`, or "
        f"`det image build -t NAME DIR` and environment.image: NAME)"
    )
    condition = "true" if force else f"! {exists} >/dev/null 2>&1"
    script = (
        f"if {condition}; then\n"
        f"  echo {q(f'master-lite: pulling image {image} from {registry}')}\n"
        f"  if {pull} 2>&1; then rm -f {auth}; else\n"
        f"    rm -f {auth}; echo {q(failed)} >&2; exit {PULL_FAILED}\n"
        "  fi\n"
        "fi\n"
        f"rm -rf {q(str(state.directory))}\n"
        'exec "$@"\n'
    )
    return ["sh", "-c", script, "det-pull", *run]


__all__ = [
    "PULL_FAILED",
    "PullState",
    "pull_command",
    "pull_wrapper",
    "pulls_dir",
    "remove_leftover_pulls",
]
