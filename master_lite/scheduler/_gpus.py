"""GPU inventory through NVML (nvidia-ml-py).

No driver or no library means no GPUs, silently: the master then schedules CPU slots.
Tests fake GPUs with `MASTER_LITE_FAKE_GPUS=N` or `discover_gpus(fake=N)`.
"""
from __future__ import annotations

import dataclasses
import os

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
        return dataclasses.asdict(self)


def fake_gpus(count: int) -> list[GPU]:
    return [GPU(index=i, uuid=f"GPU-fake-{i}", name="Fake GPU", memory_total=16 * 2**30)
            for i in range(count)]


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
            gpus.append(GPU(index=index,
                            uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                            name=name.decode() if isinstance(name, bytes) else str(name),
                            memory_total=int(memory.total), memory_used=int(memory.used),
                            utilization=utilization))
        return gpus
    except pynvml.NVMLError:
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
