"""`core_context.profiler`: system metric groups (docs/gpus-and-distributed.md, "Profiler"), sampled
for real, and stored by a real master so that `GET /trials/{id}/metrics?group=cpu` returns them."""

from __future__ import annotations

import threading
import time

import pytest

from determined.core import DummyProfilerContext, ProfilerContext
from tests._support import MasterProcess, all_logs, submit, trials, wait_for_experiment, wait_until

SYSTEM_GROUPS = {
    "cpu": {"cpu_util_simple"},
    "memory": {"memory_free"},
    "disk": {"disk_iops", "disk_throughput_read", "disk_throughput_write"},
    "network": {"net_throughput_sent", "net_throughput_recv"},
}


class Collector:
    def __init__(self) -> None:
        self.reports: list[tuple[str, dict]] = []
        self.lock = threading.Lock()

    def __call__(self, group: str, metrics: dict) -> None:
        with self.lock:
            self.reports.append((group, metrics))

    def groups(self) -> set[str]:
        with self.lock:
            return {group for group, _ in self.reports}


def wait_for_groups(collector: Collector, groups: set[str], timeout: float = 30) -> None:
    wait_until(
        lambda: groups <= collector.groups(),
        timeout,
        f"the groups {sorted(groups)}",
        0.05,
        details=lambda: f"only got {collector.groups()}",
    )


def test_profiler_reports_every_system_group_under_the_agent_id():
    collector = Collector()
    profiler = ProfilerContext(collector, "agent-7", local_rank=0)
    profiler.on(sampling_interval=0.1, samples_per_report=2)
    profiler.on(sampling_interval=0.1, samples_per_report=2)  # idempotent
    try:
        wait_for_groups(collector, set(SYSTEM_GROUPS))
    finally:
        profiler.off()
    for group, metrics in collector.reports:
        assert list(metrics) == ["agent-7"]
        values = metrics["agent-7"]
        if group in SYSTEM_GROUPS:
            assert SYSTEM_GROUPS[group] <= set(values), (group, values)
        leaves = [
            v
            for value in values.values()
            for v in (value.values() if isinstance(value, dict) else [value])
        ]
        assert all(isinstance(v, float) for v in leaves), values
    # disk use per path, nested as Determined reports it
    disk = [m["agent-7"] for g, m in collector.reports if g == "disk"][0]
    assert set(disk["/"]) == {"disk_util"} and 0.0 <= disk["/"]["disk_util"] <= 100.0
    cpu = [m["agent-7"]["cpu_util_simple"] for g, m in collector.reports if g == "cpu"]
    assert all(0.0 <= value <= 100.0 for value in cpu)
    assert any(m["agent-7"]["memory_free"] > 0 for g, m in collector.reports if g == "memory")
    # off() stops the thread: nothing more arrives
    count = len(collector.reports)
    time.sleep(0.5)
    assert len(collector.reports) == count
    profiler.off()  # idempotent


def test_only_local_rank_zero_collects():
    collector = Collector()
    profiler = ProfilerContext(collector, "agent", local_rank=1)
    profiler.on(sampling_interval=0.1, samples_per_report=1)
    time.sleep(0.5)
    profiler.off()
    assert collector.reports == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sampling_interval": 0.05},
        {"samples_per_report": 0},
        {"samples_per_report": 1.5},
        {"sampling_interval": "1"},
    ],
)
def test_bad_arguments_are_refused(kwargs):
    for profiler in (ProfilerContext(Collector(), "agent"), DummyProfilerContext()):
        with pytest.raises(ValueError):
            profiler.on(**kwargs)


def test_gpu_group_per_gpu_uuid_when_nvml_finds_gpus():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        uuids = [
            pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)
        ]
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        pytest.skip("no NVIDIA driver on this machine")
    if not count:
        pytest.skip("NVML finds no GPU")
    collector = Collector()
    profiler = ProfilerContext(collector, "agent", local_rank=0)
    profiler.on(sampling_interval=0.1, samples_per_report=2)
    try:
        wait_for_groups(collector, {"gpu"})
    finally:
        profiler.off()
    (values,) = [m["agent"] for g, m in collector.reports if g == "gpu"][:1]
    for uuid in uuids:
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        assert set(values[uuid]) == {"gpu_util", "gpu_free_memory"}


PROFILED = """
    import time
    import determined as det

    with det.core.init() as core_context:
        core_context.profiler.on(sampling_interval=0.1, samples_per_report=3)
        for step in range(1, 11):
            time.sleep(0.15)
            core_context.train.report_training_metrics(step, {"loss": 1.0 / step})
        core_context.profiler.off()
        core_context.train.report_validation_metrics(10, {"loss": 0.1})
"""


@pytest.mark.slow
def test_profiler_metrics_are_stored_by_group_on_the_master(tmp_path):
    with MasterProcess(tmp_path / "master", cpu_slots=None) as master:
        session = master.session
        exp_id = submit(
            session,
            {
                "name": "profiled",
                "entrypoint": "python3 profiled.py",
                "searcher": {"name": "single", "metric": "loss", "max_length": 1},
                "hyperparameters": {},
                "max_restarts": 0,
            },
            {"profiled.py": PROFILED},
        )
        experiment = wait_for_experiment(session, exp_id, timeout=120)
        assert experiment["state"] == "COMPLETED", all_logs(session, exp_id)
        (trial,) = trials(session, exp_id)
        for group, names in SYSTEM_GROUPS.items():
            reports = session.get(f"/trials/{trial['id']}/metrics", {"group": group})["metrics"]
            assert reports, f"no {group} reports"
            for report in reports:
                assert report["group"] == group
                (per_agent,) = report["metrics"].values()
                assert names <= set(per_agent)
                if group == "disk":
                    assert "disk_util" in per_agent["/"]
        # the training series is untouched by the profiler's reports
        training = session.get(f"/trials/{trial['id']}/metrics", {"group": "training"})["metrics"]
        assert [r["steps_completed"] for r in training] == list(range(1, 11))
