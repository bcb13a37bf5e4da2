"""GPU inventory through NVML (nvidia-ml-py).

No driver or no library means no GPUs, silently: the master then schedules CPU slots.
Tests fake GPUs with `MASTER_LITE_FAKE_GPUS=N` or `discover_gpus(fake=N)`.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

FAKE_GPUS_ENV = "MASTER_LITE_FAKE_GPUS"


@dataclasses.dataclass(frozen=True)
class GPU:
    index: int
    uuid: str
    name: str
    memory_total: int = 0
    memory_used: int = 0
    utilization: int = 0

    def to_json(self) -> dict:
        """The inventory entry with *current* memory use and utilization when NVML can tell
        (the dataclass holds the values seen at discovery; fake GPUs keep those)."""
        data = dataclasses.asdict(self)
        live = _live_usage().get(self.uuid)
        if live is not None:
            data["memory_used"], data["utilization"] = live
        return data


def fake_gpus(count: int) -> list[GPU]:
    return [
        GPU(index=i, uuid=f"GPU-fake-{i}", name="Fake GPU", memory_total=16 * 2**30)
        for i in range(count)
    ]


def discover_gpus(fake: int | None = None) -> list[GPU]:
    if fake is None and os.environ.get(FAKE_GPUS_ENV):
        fake = int(os.environ[FAKE_GPUS_ENV])
    if fake is not None:
        return fake_gpus(fake)
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                utilization = int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except pynvml.NVMLError:  # not supported on some devices (MIG)
                utilization = 0
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(
                GPU(
                    index=index,
                    uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    memory_total=int(memory.total),
                    memory_used=int(memory.used),
                    utilization=utilization,
                )
            )
        return gpus
    except pynvml.NVMLError:
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


# NVML stays initialized once it worked: a query is then ~0.1 ms, and GET /resources may be
# polled by every open sidebar. Results are reused for a second.
_LIVE_TTL_SECONDS = 1.0
_live_lock = threading.Lock()
_live_cache: tuple[float, dict[str, tuple[int, int]]] = (0.0, {})
_nvml: object = None


def _live_usage() -> dict[str, tuple[int, int]]:
    """uuid -> (memory_used bytes, utilization %) of every real GPU; {} without NVML."""
    global _live_cache, _nvml
    with _live_lock:
        stamp, cached = _live_cache
        if time.monotonic() - stamp < _LIVE_TTL_SECONDS:
            return cached
        usage: dict[str, tuple[int, int]] = {}
        try:
            if _nvml is None:
                import pynvml

                pynvml.nvmlInit()
                _nvml = pynvml
            nvml = _nvml
            for index in range(nvml.nvmlDeviceGetCount()):  # type: ignore[attr-defined]
                handle = nvml.nvmlDeviceGetHandleByIndex(index)  # type: ignore[attr-defined]
                uuid = nvml.nvmlDeviceGetUUID(handle)  # type: ignore[attr-defined]
                uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
                used = int(nvml.nvmlDeviceGetMemoryInfo(handle).used)  # type: ignore[attr-defined]
                try:
                    util = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)  # type: ignore
                except Exception:  # not supported on some devices (MIG)
                    util = 0
                usage[uuid] = (used, util)
        except Exception:  # no library, no driver, or a device error: keep discovery values
            usage = {}
        _live_cache = (time.monotonic(), usage)
        return usage
