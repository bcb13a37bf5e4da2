"""`core_context.profiler`: system metrics sampled in a background thread.

Samples come from /proc (cpu, memory, disk, network) and from pynvml when it finds GPUs; every
`samples_per_report` samples the averages are reported through the metrics shipper in the groups
`cpu`, `memory`, `disk`, `network`, `gpu`, each nested under the agent id, in Determined's shapes:
`gpu` is `{uuid: {gpu_util, gpu_free_memory}}` and `disk` carries `{path: {disk_util}}` for `/`
(and `/determined_shared_fs` where it exists); `memory_free` is in GB. Inside a trial only its own
GPUs (`DET_GPU_UUIDS`) are sampled, as a Determined container sees only those.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("determined.core")


def _validate(sampling_interval: Any, samples_per_report: Any) -> None:
    if (
        not isinstance(sampling_interval, (int, float))
        or isinstance(sampling_interval, bool)
        or sampling_interval < 0.1
    ):
        raise ValueError(
            f"profiler.on(sampling_interval=...): must be a number of seconds >= 0.1, got {sampling_interval!r}"
        )
    if (
        not isinstance(samples_per_report, int)
        or isinstance(samples_per_report, bool)
        or samples_per_report < 1
    ):
        raise ValueError(
            f"profiler.on(samples_per_report=...): must be an int >= 1, got {samples_per_report!r}"
        )


def _read_cpu_times() -> tuple[int, int] | None:
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields), idle


def _read_meminfo() -> dict[str, int]:
    values = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                values[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return values


def _read_net_bytes() -> tuple[int, int]:
    sent = recv = 0
    try:
        with open("/proc/net/dev") as f:
            for line in f.readlines()[2:]:
                name, _, rest = line.partition(":")
                if name.strip() == "lo":
                    continue
                cols = rest.split()
                recv += int(cols[0])
                sent += int(cols[8])
    except (OSError, ValueError, IndexError):
        pass
    return sent, recv


def _read_disk_stats() -> tuple[int, int, int]:
    """(ios, bytes read, bytes written) over whole disks in /proc/diskstats."""
    ios = read = written = 0
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                cols = line.split()
                if (
                    len(cols) < 10
                    or cols[2].startswith(("loop", "ram"))
                    or cols[2][-1].isdigit()
                    and not cols[2].startswith("nvme")
                ):
                    continue
                ios += int(cols[3]) + int(cols[7])
                read += int(cols[5]) * 512
                written += int(cols[9]) * 512
    except (OSError, ValueError, IndexError):
        pass
    return ios, read, written


# Determined reports disk use for the root and for its shared file system mount.
_DISK_PATHS = ("/", "/determined_shared_fs")


def _disk_util(path: str) -> float | None:
    """Percent of the file system at `path` in use (as `df` and psutil count it); None if absent."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    total = used + st.f_bavail * st.f_frsize
    return 100.0 * used / total if total else 0.0


def _trial_gpu_uuids() -> set[str] | None:
    """The GPUs of this trial (DET_GPU_UUIDS), or None outside a trial (then: every GPU)."""
    raw = os.environ.get("DET_GPU_UUIDS")
    if raw is None:
        return None
    try:
        return {str(u) for u in json.loads(raw)}
    except (ValueError, TypeError):
        return None


def _accumulate(bucket: dict[str, Any], values: dict[str, Any]) -> None:
    """Add one sample into running sums; values may be nested one level (per GPU, per path)."""
    for key, value in values.items():
        if isinstance(value, dict):
            _accumulate(bucket.setdefault(key, {}), value)
        else:
            bucket[key] = bucket.get(key, 0.0) + float(value)


def _divide(bucket: dict[str, Any], count: int) -> dict[str, Any]:
    return {
        key: _divide(value, count) if isinstance(value, dict) else value / count
        for key, value in bucket.items()
    }


class _Sampler:
    """Turns successive /proc readings into rates."""

    def __init__(self) -> None:
        self._last_time = time.monotonic()
        self._last_cpu = _read_cpu_times()
        self._last_net = _read_net_bytes()
        self._last_disk = _read_disk_stats()
        self._visible = _trial_gpu_uuids()
        self._nvml = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception:  # noqa: BLE001 - no pynvml or no driver: no GPU samples
            self._nvml = None

    def sample(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        elapsed = max(now - self._last_time, 1e-6)
        self._last_time = now
        out: dict[str, dict[str, Any]] = {}
        cpu = _read_cpu_times()
        if cpu and self._last_cpu:
            total, idle = cpu[0] - self._last_cpu[0], cpu[1] - self._last_cpu[1]
            out["cpu"] = {"cpu_util_simple": 100.0 * (total - idle) / total if total else 0.0}
        self._last_cpu = cpu
        mem = _read_meminfo()
        if "MemAvailable" in mem:
            out["memory"] = {"memory_free": mem["MemAvailable"] / 1e9}  # GB, like Determined
        sent, recv = _read_net_bytes()
        out["network"] = {
            "net_throughput_sent": (sent - self._last_net[0]) / elapsed,
            "net_throughput_recv": (recv - self._last_net[1]) / elapsed,
        }
        self._last_net = (sent, recv)
        disk = _read_disk_stats()
        disk_metrics: dict[str, Any] = {
            "disk_iops": (disk[0] - self._last_disk[0]) / elapsed,
            "disk_throughput_read": (disk[1] - self._last_disk[1]) / elapsed,
            "disk_throughput_write": (disk[2] - self._last_disk[2]) / elapsed,
        }
        for path in _DISK_PATHS:
            util = _disk_util(path)
            if util is not None:
                disk_metrics[path] = {"disk_util": util}
        out["disk"] = disk_metrics
        self._last_disk = disk
        if self._nvml is not None:
            gpu: dict[str, Any] = {}
            try:
                for i in range(self._nvml.nvmlDeviceGetCount()):
                    handle = self._nvml.nvmlDeviceGetHandleByIndex(i)
                    uuid = self._nvml.nvmlDeviceGetUUID(handle)
                    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
                    if self._visible is not None and uuid not in self._visible:
                        continue  # another trial's GPU: a container would not see it at all
                    gpu[uuid] = {
                        "gpu_util": float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                        "gpu_free_memory": float(self._nvml.nvmlDeviceGetMemoryInfo(handle).free),
                    }
            except Exception as e:  # noqa: BLE001
                logger.debug("GPU sampling failed: %s", e)
            if gpu:
                out["gpu"] = gpu
        return out


class ProfilerContext:
    """`core_context.profiler`: system metrics (CPU, memory, disk, network, GPU) of the trial's
    machine, sampled by a background thread while on.

    Built by `det.core.init()`; users do not construct it. Only local rank 0 collects (one
    collector per machine); on other ranks `on()` only checks its arguments.
    """

    def __init__(
        self, report: Callable[[str, dict], None], agent_id: str, local_rank: int = 0
    ) -> None:
        self._report = report  # report(group, metrics) -> None, e.g. through the metrics shipper
        self._agent_id = agent_id or "agent"
        self._local_rank = local_rank
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def _collects(self) -> bool:
        return self._local_rank == 0

    def on(self, sampling_interval: float = 1, samples_per_report: int = 10) -> None:
        """Start sampling system metrics; does nothing if already on.

        Args:
            sampling_interval: seconds between samples, at least 0.1.
            samples_per_report: how many samples are averaged into one report (an int >= 1).

        Raises:
            ValueError: `sampling_interval` is below 0.1 or `samples_per_report` is not an
                int >= 1.
        """
        _validate(sampling_interval, samples_per_report)
        if not self._collects() or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run,
            args=(sampling_interval, samples_per_report),
            name="ProfilerThread",
            daemon=True,
        )
        self._thread.start()

    def off(self) -> None:
        """Stop sampling (samples not yet reported are dropped); does nothing if already off.

        Also done when the core context closes.
        """
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None

    def _close(self) -> None:
        self.off()

    def _run(self, interval: float, per_report: int) -> None:
        sampler = _Sampler()
        sums: dict[str, dict[str, Any]] = {}
        count = 0
        while not self._stop.wait(interval):
            for group, values in sampler.sample().items():
                _accumulate(sums.setdefault(group, {}), values)
            count += 1
            if count == per_report:
                for group, bucket in sums.items():
                    averages = _divide(bucket, count)
                    try:
                        self._report(group, {self._agent_id: averages})
                    except Exception as e:  # noqa: BLE001 - profiling must never kill training
                        logger.warning("profiler report failed: %s", e)
                sums, count = {}, 0


class DummyProfilerContext(ProfilerContext):
    """Off the master: `on()` checks its arguments, nothing is sampled."""

    def __init__(self) -> None:
        super().__init__(report=lambda group, metrics: None, agent_id="")

    def _collects(self) -> bool:
        return False  # there is no master to report to
