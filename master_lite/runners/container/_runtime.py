"""The container runtime (Podman or Docker): the settings this machine needs, image checks,
and the command line of one trial's container.

The settings are generated, not written by hand, by `determined.common.containers` (shared with
`det image build`, so images are built under the settings their trials run with).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from determined.common.containers import default_runtime, host_settings, registry_of
from master_lite.runners.container._config import (
    Mount,
    config_devices,
    config_mounts,
    configured_images,
)
from master_lite.runners.container._stock import (
    docker_hub_reference,
    fallback_note,
    is_determined_image,
)

# Where the harness (`determined`) is bind-mounted read-only inside every trial container (put
# on PYTHONPATH), and its dependencies (appended to sys.path by `determined` itself, so that the
# image's own versions win).
HARNESS_MOUNT = "/opt/determined-harness"
HARNESS_DEPENDENCIES_MOUNT = "/opt/determined-harness-deps"
HARNESS_FALLBACK_ENV = "DET_HARNESS_FALLBACK_PATH"
# What the harness imports beyond the standard library (its HTTP session), all pure Python.
# requests runs without a charset detector; charset_normalizer's compiled parts would tie the
# image to this master's Python.
HARNESS_DEPENDENCIES = ("requests", "urllib3", "idna", "certifi")
# Where CDI specs live (the NVIDIA Container Toolkit writes nvidia.yaml there).
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
_NVIDIA_SHARED_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
_CHECK_TIMEOUT = 30


def harness_mounts() -> list[Mount]:
    """The `determined` package this master runs and its dependencies, read-only, for
    `import determined` inside images that do not have it."""
    mounts = []
    for name in ("determined", *HARNESS_DEPENDENCIES):
        # Located, not imported: the master uses only determined.common (test_import_rules).
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            if name == "determined":
                raise OSError("the determined package (the harness) is not importable here")
            continue  # a dependency the image must then bring itself
        package = Path(list(spec.submodule_search_locations)[0]).resolve()
        target = HARNESS_MOUNT if name == "determined" else HARNESS_DEPENDENCIES_MOUNT
        mounts.append(Mount(str(package), f"{target}/{name}", read_only=True))
    return mounts


def gpu_device_args(
    indices: Sequence[int],
    *,
    cdi_dirs: Iterable[str | Path] = CDI_SPEC_DIRS,
    dev_dir: str | Path = "/dev",
) -> tuple[list[str], str]:
    """Runtime arguments that give a container the GPUs `indices`, and the container's
    CUDA_VISIBLE_DEVICES.

    With a CDI spec for NVIDIA GPUs (Podman >= 4.1 reads it) each GPU is `--device
    nvidia.com/gpu=N` and the container sees them as 0..n-1; without one the device nodes are
    passed as they are and CUDA_VISIBLE_DEVICES keeps the host's numbers."""
    if not indices:
        return [], ""
    if _has_nvidia_cdi_spec(cdi_dirs):
        args = [arg for index in indices for arg in ("--device", f"nvidia.com/gpu={index}")]
        return args, ",".join(str(i) for i in range(len(indices)))
    dev = Path(dev_dir)
    nodes = [dev / f"nvidia{index}" for index in indices]
    nodes += [dev / name for name in _NVIDIA_SHARED_DEVICES if (dev / name).exists()]
    args = [arg for node in nodes for arg in ("--device", str(node))]
    return args, ",".join(str(i) for i in indices)


def _has_nvidia_cdi_spec(cdi_dirs: Iterable[str | Path]) -> bool:
    for directory in cdi_dirs:
        path = Path(directory)
        if not path.is_dir():
            continue
        for spec in sorted(path.iterdir()):
            if spec.suffix in (".yaml", ".yml", ".json"):
                try:
                    if "nvidia.com/gpu" in spec.read_text(errors="replace"):
                        return True
                except OSError:
                    continue
    return False


class ContainerRuntime:
    """One runtime binary (`podman`, `docker`, or a path) with the settings this host needs."""

    def __init__(
        self,
        binary: str,
        *,
        root_dir: str | Path,
        cdi_dirs: Sequence[str | Path] = CDI_SPEC_DIRS,
        dev_dir: str | Path = "/dev",
        determined_images_fallback: bool = True,
    ) -> None:
        """`cdi_dirs`, `dev_dir`: where GPUs are looked for (tests point them at fakes).
        `determined_images_fallback`: Determined's published environment images that this
        machine cannot have run their trials as host processes (`stand_in`); False refuses
        them at submit like any other missing image."""
        self.binary = binary
        self.determined_images_fallback = determined_images_fallback
        self.cdi_dirs = list(cdi_dirs)
        self.dev_dir = Path(dev_dir)
        self.name = Path(binary).name
        # Containers of this master carry this label and a name prefix unique to its root dir,
        # so two masters on one machine never touch each other's containers.
        self.root_label = str(Path(root_dir).absolute())
        digest = hashlib.sha256(self.root_label.encode()).hexdigest()[:8]
        self.name_prefix = f"det-{digest}"

    def path(self) -> str | None:
        """The binary's full path, None when it is not installed."""
        if os.sep in self.binary:
            return self.binary if os.access(self.binary, os.X_OK) else None
        return shutil.which(self.binary)

    def gpu_args(self, indices: Sequence[int]) -> tuple[list[str], str]:
        """`gpu_device_args` on this runtime's device directories."""
        return gpu_device_args(indices, cdi_dirs=self.cdi_dirs, dev_dir=self.dev_dir)

    def host_settings(self) -> list[str]:
        """The `run` options this machine needs: runtime and ulimits (see the module doc)."""
        return host_settings(self.binary)

    def container_name(self, allocation_id: str) -> str:
        """The container of one trial run, e.g. `det-1a2b3c4d-trial-7.2`."""
        return f"{self.name_prefix}-{allocation_id}"

    def config_problems(self, config: dict) -> list[str]:
        """What keeps `config`'s trials from running in containers here (empty: nothing)."""
        # Determined's own images that cannot be had here run as host processes (stand_in).
        images = [
            (where, image)
            for where, image in configured_images(config)
            if not self._stands_in(image)
        ]
        if not images:
            return []
        if self.path() is None:
            return [
                f"{images[0][0]}: the container runtime {self.binary!r} is not installed "
                "(install it, e.g. `apt-get install podman runc`, or point "
                "MasterLite.container_runtime at it)"
            ]
        problems = []
        force = bool((config.get("environment") or {}).get("force_pull_image"))
        for where, image in images:
            if registry_of(image) is not None:
                continue  # pulled by the trial's run when it is not here (or always, forced)
            if force:
                problems.append(
                    f"environment.force_pull_image: {where} {image!r} names no registry to pull "
                    f"it from (write it with its registry, e.g. {docker_hub_reference(image)!r} "
                    "for Docker Hub, or set force_pull_image: false to use the local image)"
                )
            elif not self.image_exists(image):
                problems.append(
                    f"{where}: image {image!r} is not in {self.name}'s local image store and "
                    "names no registry to pull it from (build it here: `make image`, or "
                    f"`det image build -t {image} DIR` from a Containerfile; or write it with "
                    f"its registry, e.g. {docker_hub_reference(image)!r} for Docker Hub, to have "
                    f"trials pull it; `{self.name} images` lists the local store)"
                )
        for where, mount in config_mounts(config):
            if where.startswith("bind_mounts") and not os.path.exists(mount.source):
                problems.append(
                    f"{where}: {mount.source!r} does not exist on this machine (create it, or "
                    "fix the path)"
                )
        for where, device in config_devices(config):
            host = device.split(":", 1)[0]
            if not os.path.exists(host):
                problems.append(f"{where}: device {host!r} does not exist on this machine")
        return problems

    def stand_in(self, image: str) -> str | None:
        """The trial log's line when a run of `image` runs as a host process in its stead
        (Determined's published environment image that this machine cannot have: no runtime,
        or a bare name not in the local store, which is never pulled); None: it runs in
        `image`. Off with `determined_images_fallback`."""
        if not self._stands_in(image):
            return None
        if self.path() is None:
            return fallback_note(image, f"the container runtime {self.binary!r} is not installed")
        return fallback_note(image, f"is not in {self.name}'s local image store")

    def _stands_in(self, image: str) -> bool:
        if not self.determined_images_fallback or not is_determined_image(image):
            return False
        if self.path() is None:
            return True
        # A name with a registry is pulled by the trial's run, as written.
        return registry_of(image) is None and not self.image_exists(image)

    def exists_command(self, image: str) -> list[str]:
        """The command that succeeds when `image` is in the local store."""
        if self.name == "podman":
            return [self.binary, "image", "exists", image]
        return [self.binary, "image", "inspect", image]

    def image_exists(self, image: str) -> bool:
        """Whether `image` is in the runtime's local store."""
        command = self.exists_command(image)
        result = subprocess.run(command, capture_output=True, timeout=_CHECK_TIMEOUT)
        return result.returncode == 0

    def run_command(
        self,
        *,
        name: str,
        image: str,
        argv: list[str],
        env_names: Iterable[str],
        work_dir: str,
        mounts: Iterable[Mount],
        device_args: list[str],
    ) -> list[str]:
        """`<runtime> run ...` of one trial's container, in the foreground (its exit status is
        the trial's). Environment values are passed by name only (`--env NAME`: the value comes
        from the runtime client's own environment), so tokens never appear in `ps`."""
        command = [
            self.binary,
            "run",
            "--rm",
            "--name",
            name,
            "--label",
            f"ai.determined.root={self.root_label}",
            "--init",  # signals reach the trial, and `stop` takes ~1 s instead of its timeout
            "--network",
            "host",  # the master listens on 127.0.0.1
            # Pulls happen before, with the config's credentials (`pull_wrapper`): a missing
            # image is then an error, not a second pull without them.
            "--pull",
            "never",
            *self.host_settings(),
            "--workdir",
            work_dir,
        ]
        for mount in mounts:
            command += ["--volume", mount.argument()]
        command += device_args
        for key in env_names:
            command += ["--env", key]
        return [*command, image, *argv]

    def leftover_containers(self) -> list[str]:
        """Names of this master's containers that exist now (a crashed master's runs)."""
        result = subprocess.run(
            [
                self.binary,
                "ps",
                "--all",
                "--filter",
                f"label=ai.determined.root={self.root_label}",
                "--format",
                "{{.Names}}",
            ],
            capture_output=True,
            text=True,
            timeout=_CHECK_TIMEOUT,
        )
        return [line.strip() for line in result.stdout.splitlines() if line.strip()]

    def remove(self, names: Iterable[str]) -> None:
        """Force-remove containers (stopping them first); absent ones are fine."""
        names = list(names)
        if names:
            subprocess.run(
                [self.binary, "rm", "--force", *names],
                capture_output=True,
                timeout=_CHECK_TIMEOUT,
            )

    def signal_command(self, name: str, sig: int) -> list[str]:
        return [self.binary, "kill", "--signal", str(int(sig)), name]

    def stop_command(self, name: str, grace: float) -> list[str]:
        return [self.binary, "stop", "--time", str(max(int(grace + 0.999), 0)), name]


def in_container_argv(argv: list[str], image: str) -> list[str]:
    """`argv` behind a check that the image has python3 (the harness needs one): without it the
    trial fails with a line naming the image, not with a bare `not found`."""
    message = (
        f"master-lite: the container image {image} has no python3 on its PATH; trials need "
        "Python 3 in the image (build one with python3, e.g. `make image`)"
    )
    script = (
        "command -v python3 >/dev/null 2>&1 || "
        f"{{ echo {shlex.quote(message)} >&2; exit 127; }}\n"
        # A startup hook may use bash syntax (Determined's images run it with bash).
        'if [ "$1" = "@shell" ]; then shift; '
        'if command -v bash >/dev/null 2>&1; then set -- bash "$@"; '
        'else set -- sh "$@"; fi; fi\n'
        'exec "$@"\n'
    )
    return ["sh", "-c", script, "det-trial", *argv]


# with_startup_hook(argv, shell=CONTAINER_SHELL): the container picks bash, else sh.
CONTAINER_SHELL = "@shell"


__all__ = [
    "CONTAINER_SHELL",
    "ContainerRuntime",
    "HARNESS_DEPENDENCIES_MOUNT",
    "HARNESS_FALLBACK_ENV",
    "HARNESS_MOUNT",
    "default_runtime",
    "gpu_device_args",
    "harness_mounts",
    "in_container_argv",
]
