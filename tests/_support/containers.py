"""Tiny container images for tests, and the containers a master left.

No registry is reachable from CI, so test images are built here: a tarball of empty top-level
directories (plus marker files) imported with `podman import`. Trials in them see the host's
`/usr` through a read-only bind mount (`HOST_USR`), which brings python3 and a shell: the image
builds in well under a second and a container starts in about as long.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path

RUNTIME = "podman"
# Every image and container tests make starts with this, so teardown finds them all.
TEST_PREFIX = f"jd-test-{os.getpid()}"

# For `bind_mounts:` of an experiment config: the host's /usr inside a tiny image.
HOST_USR = {"host_path": "/usr", "container_path": "/usr", "read_only": True}

_DIRECTORIES = ("usr", "etc", "tmp", "proc", "sys", "dev", "root", "run", "var", "home")
# Debian's merged /usr: /bin, /lib... are links into the host's /usr once it is mounted.
_LINKS = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}


def _run(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([RUNTIME, *args], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{RUNTIME} {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def build_tiny_image(name: str, files: Mapping[str, str] | None = None) -> str:
    """Import an image of empty directories and `files` (path -> text) as `localhost/<name>`;
    returns its reference."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory in _DIRECTORIES:
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        for link, target in _LINKS.items():
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
        for path, text in (files or {}).items():
            data = text.encode()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    reference = f"localhost/{name}:latest"
    subprocess.run(
        [RUNTIME, "import", "-", reference],
        input=buffer.getvalue(),
        capture_output=True,
        check=True,
        timeout=120,
    )
    return reference


def remove_images(references: Iterable[str]) -> None:
    references = list(references)
    if references:
        subprocess.run([RUNTIME, "rmi", "--force", *references], capture_output=True, timeout=120)


def containers_of(root_dir: Path | str) -> list[str]:
    """Names of the containers (running or not) of the master on `root_dir`."""
    label = f"ai.determined.root={Path(root_dir).absolute()}"
    result = _run("ps", "--all", "--filter", f"label={label}", "--format", "{{.Names}}")
    return [line for line in result.stdout.split() if line]


def remove_containers_of(root_dir: Path | str) -> None:
    names = containers_of(root_dir)
    if names:
        subprocess.run([RUNTIME, "rm", "--force", *names], capture_output=True, timeout=120)


def container_pid(name: str) -> int:
    """The host pid of a running container's first process (its init)."""
    return int(_run("inspect", "--format", "{{.State.Pid}}", name).stdout.strip())


def processes_with_env(marker: str, argv: list[str]) -> list[int]:
    """Host pids of the processes whose command line is `argv` (e.g. ["python3", "train.py"])
    and whose environment holds `marker` (e.g. "DET_ALLOCATION_ID=trial-1.1")."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        if marker.encode() in environ and command == [arg.encode() for arg in argv]:
            found.append(int(entry.name))
    return found


__all__ = [
    "HOST_USR",
    "RUNTIME",
    "TEST_PREFIX",
    "build_tiny_image",
    "container_pid",
    "containers_of",
    "processes_with_env",
    "remove_containers_of",
    "remove_images",
]
