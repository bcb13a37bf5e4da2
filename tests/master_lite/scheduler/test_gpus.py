"""GPU inventory, slot assignment through CUDA_VISIBLE_DEVICES, and gang allocation, with a faked
4-GPU inventory (MASTER_LITE_FAKE_GPUS=4) and a real master running real trial processes."""

from __future__ import annotations

import socket
import warnings

import pytest

from master_lite.scheduler import PortAllocator, discover_gpus, fake_gpus
from tests._support import (
    MasterProcess,
    all_logs,
    marked_values,
    submit,
    trials,
    wait_for_experiment,
    wait_until,
)

# Prints what the trial was given, then waits until every trial named in the gate has started
# (proof that they ran at the same time) or, with a release file, until the test says go.
SHOW_SLOTS = """
    import json, os, pathlib, sys, time
    import determined as det

    info = det.get_cluster_info()
    print("SLOTS " + json.dumps({
        "trial_id": info.trial.trial_id,
        "cuda": os.environ["CUDA_VISIBLE_DEVICES"],
        "slot_ids": info.slot_ids,
        "gpu_uuids": info.gpu_uuids,
        "c10d_port": os.environ.get("C10D_PORT"),
    }), flush=True)
    gate = pathlib.Path(info.user_data["gate"])
    (gate / str(info.trial.trial_id)).touch()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        started = len([p for p in gate.iterdir() if p.name.isdigit()])
        release = info.user_data.get("release")
        if release is None and started >= info.user_data["wait_for"]:
            sys.exit(0)
        if release is not None and pathlib.Path(release).exists():
            sys.exit(0)
        time.sleep(0.1)
    print("gave up waiting", flush=True)
    sys.exit(3)
"""


def config(name: str, *, slots: int, trials_count: int, data: dict) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 show_slots.py",
        "resources": {"slots_per_trial": slots},
        "searcher": {
            "name": "random",
            "metric": "x",
            "max_trials": trials_count,
            "max_concurrent_trials": trials_count,
            "max_length": 1,
        },
        "hyperparameters": {"h": {"type": "int", "minval": 0, "maxval": 1000}},
        "max_restarts": 0,
        "data": data,
    }


# -- inventory (no master) ---------------------------------------------------------------------


def test_fake_inventory_has_distinct_indices_and_uuids():
    gpus = discover_gpus(fake=4)
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert len({g.uuid for g in gpus}) == 4
    entry = gpus[2].to_json()
    assert set(entry) >= {"index", "uuid", "name", "memory_total", "memory_used", "utilization"}


def test_fake_inventory_from_the_environment(monkeypatch):
    monkeypatch.setenv("MASTER_LITE_FAKE_GPUS", "3")
    assert [g.uuid for g in discover_gpus()] == [g.uuid for g in fake_gpus(3)]


def test_no_gpu_means_cpu_slots_and_no_warnings(monkeypatch):
    monkeypatch.delenv("MASTER_LITE_FAKE_GPUS", raising=False)
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver: the no-GPU path cannot be shown here")
    except pynvml.NVMLError:
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert discover_gpus() == []
    assert caught == []


# -- ports (no master) -------------------------------------------------------------------------


def test_ports_are_distinct_while_allocations_live_and_skip_busy_ports():
    allocator = PortAllocator(first=31000, last=31099, start=31000)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 31001))
        busy.listen()
        a = allocator.assign("trial-1.1", 3)
        b = allocator.assign("trial-2.1", 3, live=["trial-1.1"])
    assert 31001 not in a + b
    assert len(set(a) | set(b)) == 6
    assert allocator.assign("trial-1.1", 3, live=["trial-2.1"]) == a  # stable while it lives
    allocator.assign("trial-3.1", 3, live=["trial-3.1"])  # 1 and 2 are gone: forgotten
    assert set(allocator.held()) == {"trial-3.1"}
    env = PortAllocator(first=31100, last=31199).trial_ports("trial-9.1")
    assert set(env) == {
        "C10D_PORT",
        "INTER_TRAIN_PROCESS_COMM_PORT_1",
        "INTER_TRAIN_PROCESS_COMM_PORT_2",
    }


def test_masters_on_one_host_start_at_different_ports():
    """Two masters on one host (one JupyterLab per user) must not both hand out the range's
    first port to their first multi-slot trial: each starts at a random place in the range
    (twenty allocators all starting alike would happen once in 10^66 runs)."""
    firsts = {PortAllocator(first=31200, last=31299).assign("trial-1.1", 1)[0] for _ in range(20)}
    assert len(firsts) > 1
    assert PortAllocator(first=31200, last=31299, start=31250).assign("trial-1.1", 1) == [31250]
    with pytest.raises(ValueError, match="outside the port range"):
        PortAllocator(first=31200, last=31299, start=31300)


# -- a real master with four fake GPUs -----------------------------------------------------------


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu-master")
    with MasterProcess(root, cpu_slots=None, env={"MASTER_LITE_FAKE_GPUS": "4"}) as process:
        session = process.session
        yield session


@pytest.mark.slow
def test_four_one_slot_trials_run_at_once_each_on_its_own_gpu(master, tmp_path):
    exp_id = submit(
        master,
        config("four", slots=1, trials_count=4, data={"gate": str(tmp_path), "wait_for": 4}),
        {"show_slots.py": SHOW_SLOTS},
    )
    experiment = wait_for_experiment(master, exp_id, timeout=180)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs
    shown = marked_values(logs, "SLOTS")
    assert len(shown) == 4
    assert sorted(s["cuda"] for s in shown) == ["0", "1", "2", "3"]
    for s in shown:
        index = int(s["cuda"])
        assert s["slot_ids"] == [index]
        assert s["gpu_uuids"] == [f"GPU-fake-{index}"]
    assert len({s["c10d_port"] for s in shown}) == 4


@pytest.mark.slow
def test_kernel_trials_get_their_own_gpu_as_process_trials_do(master, tmp_path):
    # Two trials in Jupyter kernels at once: each kernel starts with its trial's one GPU in
    # CUDA_VISIBLE_DEVICES (and the slot ids and uuids to match), never the other's.
    cfg = config("kernels", slots=1, trials_count=2, data={"gate": str(tmp_path), "wait_for": 2})
    cfg["environment"] = {"kernel": {"keep_alive": 0}}
    exp_id = submit(master, cfg, {"show_slots.py": SHOW_SLOTS})
    experiment = wait_for_experiment(master, exp_id, timeout=180)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs
    assert logs.count("(in a Jupyter kernel)") == 2, logs
    shown = marked_values(logs, "SLOTS")
    assert len(shown) == 2 and len({s["cuda"] for s in shown}) == 2, shown
    for s in shown:
        index = int(s["cuda"])
        assert s["slot_ids"] == [index]
        assert s["gpu_uuids"] == [f"GPU-fake-{index}"]


@pytest.mark.slow
def test_two_slot_trial_waits_for_two_free_slots_without_deadlock(master, tmp_path):
    release = tmp_path / "release"
    ones_gate, two_gate, late_gate = (tmp_path / n for n in ("ones", "two", "late"))
    for gate in (ones_gate, two_gate, late_gate):
        gate.mkdir()
    three = submit(
        master,
        config(
            "three-ones",
            slots=1,
            trials_count=3,
            data={"gate": str(ones_gate), "release": str(release)},
        ),
        {"show_slots.py": SHOW_SLOTS},
    )
    wait_until(lambda: len(list(ones_gate.iterdir())) == 3, what="three 1-slot trials to start")
    two = submit(
        master,
        config("two", slots=2, trials_count=1, data={"gate": str(two_gate), "wait_for": 1}),
        {"show_slots.py": SHOW_SLOTS},
    )
    late = submit(
        master,
        config("late-ones", slots=1, trials_count=2, data={"gate": str(late_gate), "wait_for": 2}),
        {"show_slots.py": SHOW_SLOTS},
    )

    # One GPU is free, but it is held for the 2-slot trial at the head of the line: a late
    # 1-slot trial must not take it (or the 2-slot trial could starve).
    resources = master.get("/resources")
    holders = {slot["id"]: slot["trial_id"] for slot in resources["slots"]}
    three_ids = {t["id"] for t in trials(master, three)}
    assert sorted(t for t in holders.values() if t is not None) == sorted(three_ids)
    assert list(holders.values()).count(None) == 1
    assert all(
        slot["type"] == "gpu" and "utilization" in slot["gpu"] for slot in resources["slots"]
    )
    assert [t["state"] for t in trials(master, two)] == ["ACTIVE"]
    assert not list(two_gate.iterdir()) and not list(late_gate.iterdir())

    release.touch()
    for exp_id in (three, two, late):
        assert wait_for_experiment(master, exp_id, timeout=180)["state"] == "COMPLETED", all_logs(
            master, exp_id
        )
    (shown,) = marked_values(all_logs(master, two), "SLOTS")
    cuda = shown["cuda"].split(",")
    assert len(cuda) == 2 and len(set(cuda)) == 2
    assert shown["slot_ids"] == [int(c) for c in cuda]
    assert shown["gpu_uuids"] == [f"GPU-fake-{c}" for c in cuda]
    assert len(marked_values(all_logs(master, late), "SLOTS")) == 2
