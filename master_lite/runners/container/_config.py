"""What an experiment config asks of its trials' containers: the image per slot type, bind
mounts, devices, /dev/shm and capabilities (Determined's `environment` and `resources` keys)."""

from __future__ import annotations

import dataclasses

# Determined's default /dev/shm for trial containers (its task_container_defaults.shm_size_bytes):
# the runtimes' 64 MiB is too small for PyTorch DataLoader workers.
DEFAULT_SHM_SIZE = 4 * 1024**3


def container_image(config: dict, *, gpu: bool) -> str | None:
    """The image a trial of `config` runs in, None when it runs as a local process.

    `environment.image` is a string, or per slot type `{cpu, cuda (or gpu), rocm}`: a GPU trial
    takes `cuda` (then `gpu`, then `cpu`), a CPU trial `cpu` (then `cuda`, then `gpu`)."""
    image = (config.get("environment") or {}).get("image")
    if not image:
        return None
    if isinstance(image, str):
        return image
    order = ("cuda", "gpu", "cpu") if gpu else ("cpu", "cuda", "gpu")
    for key in order:
        if image.get(key):
            return str(image[key])
    return None


def configured_images(config: dict) -> list[tuple[str, str]]:
    """(config path, image) of every image `config` names."""
    image = (config.get("environment") or {}).get("image")
    if not image:
        return []
    if isinstance(image, str):
        return [("environment.image", image)]
    return [(f"environment.image.{key}", str(value)) for key, value in image.items() if value]


@dataclasses.dataclass(frozen=True)
class Mount:
    """One bind mount: a host path at `target` inside the container."""

    source: str
    target: str
    read_only: bool = False

    def argument(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


def config_mounts(config: dict) -> list[tuple[str, Mount]]:
    """(config path, mount) of the config's `bind_mounts`. `shared_fs` checkpoint storage is not
    mounted whole: each trial gets its own view of it (`_storage.storage_mounts`)."""
    mounts = []
    for index, entry in enumerate(config.get("bind_mounts") or []):
        mounts.append(
            (
                f"bind_mounts[{index}].host_path",
                Mount(
                    str(entry["host_path"]),
                    str(entry["container_path"]),
                    bool(entry.get("read_only", False)),
                ),
            )
        )
    return mounts


def config_devices(config: dict) -> list[tuple[str, str]]:
    """(config path, `--device` value) of `resources.devices` (`host:container[:mode]` strings
    or `{host_path, container_path, mode}`)."""
    devices = []
    for index, entry in enumerate((config.get("resources") or {}).get("devices") or []):
        if isinstance(entry, dict):
            value = f"{entry['host_path']}:{entry.get('container_path') or entry['host_path']}"
            if entry.get("mode"):
                value += f":{entry['mode']}"
        else:
            value = str(entry)
        devices.append((f"resources.devices[{index}]", value))
    return devices


def config_options(config: dict) -> list[str]:
    """`run` options for `resources.devices`, `resources.shm_size` and the environment's
    `add_capabilities` / `drop_capabilities`."""
    options = [arg for _, device in config_devices(config) for arg in ("--device", device)]
    shm = (config.get("resources") or {}).get("shm_size") or DEFAULT_SHM_SIZE
    # An integer is bytes (Determined's unit); a string keeps its own unit ("4G").
    options += ["--shm-size", f"{shm}b" if isinstance(shm, int) else str(shm)]
    environment = config.get("environment") or {}
    options += [
        arg for cap in environment.get("add_capabilities") or [] for arg in ("--cap-add", cap)
    ]
    options += [
        arg for cap in environment.get("drop_capabilities") or [] for arg in ("--cap-drop", cap)
    ]
    return options


__all__ = [
    "DEFAULT_SHM_SIZE",
    "Mount",
    "config_devices",
    "config_mounts",
    "config_options",
    "configured_images",
    "container_image",
]
