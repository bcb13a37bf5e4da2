"""The Ray resource manager on a local two-node Ray cluster (`ray.cluster_utils.Cluster`), each
node with one fake GPU, driven by a real master-lite subprocess (resource_manager = ray).

One module-scoped cluster and master: Ray takes seconds and ~500 MB to start.
"""

from __future__ import annotations

import os
import re
import signal

import pytest

from tests._support import (
    MasterProcess,
    all_logs,
    marked_values,
    submit,
    trial_logs,
    trials,
    wait_for_experiment,
    wait_until,
)

pytestmark = pytest.mark.slow

SHOW_NODE = """
    import json, os, pathlib, sys, time
    import determined as det

    info = det.get_cluster_info()
    print("NODE " + json.dumps({
        "agent": info.agent_id, "cuda": os.environ["CUDA_VISIBLE_DEVICES"],
        "slot_ids": info.slot_ids, "addrs": info.container_addrs}), flush=True)
    gate = pathlib.Path(info.user_data["gate"])
    (gate / str(info.trial.trial_id)).touch()
    deadline = time.monotonic() + 120
    while len(list(gate.iterdir())) < info.user_data["wait_for"]:
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.1)
"""

TWO_NODES = """
    import json, os
    import torch
    torch.set_num_threads(1)
    import torch.distributed as dist
    import determined as det
    from determined.core import DistributedContext

    distributed = DistributedContext.from_torch_distributed()
    dist.init_process_group("gloo")
    tensor = torch.tensor([distributed.rank + 1.0])
    dist.all_reduce(tensor)
    info = det.get_cluster_info()
    print("RANK " + json.dumps({
        "rank": distributed.rank, "size": distributed.size, "cross_rank": distributed.cross_rank,
        "cross_size": distributed.cross_size, "agent": info.agent_id, "sum": tensor.item(),
        "gathered": distributed.allgather(info.agent_id)}), flush=True)
    dist.destroy_process_group()
"""

# Checkpoints every step; says where it resumed from. A slow loop so the test can kill it.
CHECKPOINTING = """
    import json, pathlib, time
    import determined as det

    info = det.get_cluster_info()
    with det.core.init() as core_context:
        start = 0
        if info.latest_checkpoint:
            with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
                start = json.loads((path / "state.json").read_text())["step"]
        print("RESUMED " + json.dumps({"step": start, "run": info.trial._trial_run_id}),
              flush=True)
        steps = info.trial.hparams["steps"]
        for step in range(start + 1, steps + 1):
            time.sleep(0.2)
            core_context.train.report_training_metrics(step, {"loss": 1.0 / step})
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step}))
            if core_context.preempt.should_preempt():
                print("PREEMPTED " + json.dumps({"step": step}), flush=True)
                raise SystemExit(0)
        core_context.train.report_validation_metrics(steps, {"loss": 1.0 / steps})
"""


def config(
    name: str,
    entrypoint: str,
    *,
    slots: int = 1,
    trials_count: int = 1,
    data: dict | None = None,
    hparams: dict | None = None,
    max_restarts: int = 0,
) -> dict:
    return {
        "name": name,
        "entrypoint": entrypoint,
        "resources": {"slots_per_trial": slots},
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": trials_count,
            "max_concurrent_trials": trials_count,
            "max_length": 1,
        },
        "hyperparameters": hparams or {"h": {"type": "int", "minval": 0, "maxval": 100}},
        "max_restarts": max_restarts,
        "data": data or {},
    }


def start_cluster():
    from ray.cluster_utils import Cluster

    # Only what the tests need: no dashboard, log monitors or autoscaler monitor (fewer Python
    # processes competing with the dashboard agents while the nodes start).
    lean = {"include_log_monitor": False}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "num_gpus": 1,
            "include_dashboard": False,
            "no_monitor": True,
            **lean,
        },
    )
    try:
        cluster.add_node(num_cpus=2, num_gpus=1, **lean)
        cluster.wait_for_nodes()
    except BaseException:
        cluster.shutdown()
        raise
    return cluster


@pytest.fixture(scope="module")
def cluster():
    # A raylet gives its dashboard agent a fixed 15 s to start (ray-project/ray#65983); on a
    # machine busy with other work that can run out, so starting is tried a few times.
    failures = []
    for _ in range(3):
        try:
            cluster = start_cluster()
            break
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{type(exc).__name__}: {exc}")
    else:
        pytest.fail(
            "could not start a local Ray cluster (is the machine overloaded?): "
            + " | ".join(failures)
        )
    yield cluster
    cluster.shutdown()


@pytest.fixture(scope="module")
def master(cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("ray-master")
    with MasterProcess(
        root,
        cpu_slots=None,
        env={"MASTER_LITE_RESOURCE_MANAGER": "ray", "MASTER_LITE_RAY_ADDRESS": cluster.address},
    ) as process:
        session = process.session
        # The master connects to Ray in the background (it listens at once): wait for the
        # cluster's slots.
        wait_until(
            lambda: len(session.get("/resources")["slots"]) == 2,
            timeout=120,
            what="the Ray cluster's two GPU slots",
        )
        yield session


def node_ids(cluster) -> set[str]:
    return {node.node_id for node in cluster.list_all_nodes()}


def test_slots_are_the_clusters_gpus(master, cluster):
    answer = master.get("/resources")
    slots = answer["slots"]
    assert len(slots) == 2 and all(slot["trial_id"] is None for slot in slots)
    assert all(slot["type"] == "gpu" for slot in slots)  # GPU nodes: GPU slots
    status = master.get("/master")["cluster"]
    assert status["state"] == "connected" and answer["cluster"]["state"] == "connected"
    alive = {n["node_id"] for n in status["nodes"] if n["alive"]}
    assert alive == node_ids(cluster)
    assert all(n["gpus"] == 1 and n["pool"] == "default" for n in status["nodes"])


def test_a_search_spreads_its_trials_over_both_nodes(master, cluster, tmp_path):
    exp_id = submit(
        master,
        config(
            "spread",
            "python3 show_node.py",
            trials_count=2,
            data={"gate": str(tmp_path), "wait_for": 2},
        ),
        {"show_node.py": SHOW_NODE},
    )
    assert wait_for_experiment(master, exp_id, timeout=120)["state"] == "COMPLETED", all_logs(
        master, exp_id
    )
    shown = marked_values(all_logs(master, exp_id), "NODE")
    assert len(shown) == 2
    assert {s["agent"] for s in shown} == node_ids(cluster)  # one trial on each node
    assert all(s["cuda"] == "0" and s["slot_ids"] == [0] for s in shown)  # Ray's GPU per node


@pytest.mark.rendezvous_ports
def test_a_two_slot_trial_runs_one_rank_per_node(master, cluster):
    exp_id = submit(
        master,
        config(
            "two-nodes",
            "python3 -m determined.launch.torch_distributed python3 two_nodes.py",
            slots=2,
        ),
        {"two_nodes.py": TWO_NODES},
    )
    assert wait_for_experiment(master, exp_id, timeout=180)["state"] == "COMPLETED", all_logs(
        master, exp_id
    )
    shown = marked_values(all_logs(master, exp_id), "RANK")
    assert sorted(s["rank"] for s in shown) == [0, 1]
    assert all(s["size"] == 2 and s["cross_size"] == 2 and s["sum"] == 3.0 for s in shown)
    assert {s["agent"] for s in shown} == node_ids(cluster)
    assert {s["cross_rank"] for s in shown} == {0, 1}
    gathered = shown[0]["gathered"]
    assert len(set(gathered)) == 2 and all(s["gathered"] == gathered for s in shown)


def test_killing_a_nodes_worker_restarts_the_trial_from_its_checkpoint(master):
    exp_id = submit(
        master,
        config("lost-worker", "python3 checkpointing.py", hparams={"steps": 25}, max_restarts=1),
        {"checkpointing.py": CHECKPOINTING},
    )
    (trial,) = wait_until(lambda: trials(master, exp_id), what="the trial")
    wait_until(
        lambda: master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
        what="a first checkpoint",
    )
    placed = [
        e["line"]
        for e in trial_logs(master, trial["id"], stream="master")
        if "worker pid" in e["line"]
    ]
    worker_pid = int(re.search(r"worker pid (\d+)", placed[0]).group(1))
    os.kill(worker_pid, signal.SIGKILL)  # the Ray worker running the trial dies

    experiment = wait_for_experiment(master, exp_id, timeout=180)
    text = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", text
    assert trials(master, exp_id)[0]["restarts"] == 1, text
    assert "was lost" in text
    resumed = marked_values(text, "RESUMED")
    assert [r["run"] for r in resumed] == [1, 2]
    assert resumed[0]["step"] == 0 and resumed[1]["step"] >= 1  # from its checkpoint


def test_a_silent_container_is_lost_and_its_trial_resumes_on_another_node(master):
    """A partition, as the driver sees it: the actor's worker stops answering (SIGSTOP). Within
    the heartbeat (10 s) the run is lost, named so, requeued without counting a failure, and the
    next attempt avoids that node."""
    exp_id = submit(
        master,
        config("silent", "python3 checkpointing.py", hparams={"steps": 40}),
        {"checkpointing.py": CHECKPOINTING},
    )
    (trial,) = wait_until(lambda: trials(master, exp_id), what="the trial")
    wait_until(
        lambda: master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
        what="a first checkpoint",
    )
    (placed,) = [
        e["line"]
        for e in trial_logs(master, trial["id"], stream="master")
        if "worker pid" in e["line"]
    ]
    worker_pid = int(re.search(r"worker pid (\d+)", placed).group(1))
    first_node = re.search(r"on Ray node (\w+)", placed).group(1)
    os.kill(worker_pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: "did not answer for 10 s" in all_logs(master, exp_id),
            timeout=60,
            what="the silent container to be declared lost",
        )
    finally:
        try:
            os.kill(worker_pid, signal.SIGCONT)  # Ray kills it; let it die
        except ProcessLookupError:
            pass
    experiment = wait_for_experiment(master, exp_id, timeout=180)
    text = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", text
    assert trials(master, exp_id)[0]["restarts"] == 0, text  # max_restarts 0: not counted
    nodes = re.findall(r"container 0 on Ray node (\w+)", text)
    assert nodes[0] == first_node and nodes[-1] != first_node, text  # the next attempt avoids it
    resumed = marked_values(text, "RESUMED")
    assert resumed[-1]["step"] >= 1


def test_pause_and_activate_resume_from_the_checkpoint_and_kill_cancels(master):
    exp_id = submit(
        master,
        config("pause", "python3 checkpointing.py", hparams={"steps": 40}),
        {"checkpointing.py": CHECKPOINTING},
    )
    wait_until(
        lambda: master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
        what="a first checkpoint",
    )
    master.post(f"/experiments/{exp_id}/pause")
    wait_until(lambda: trials(master, exp_id)[0]["state"] == "PAUSED", what="the trial to pause")
    assert marked_values(all_logs(master, exp_id), "PREEMPTED")
    master.post(f"/experiments/{exp_id}/activate")
    wait_until(
        lambda: len(marked_values(all_logs(master, exp_id), "RESUMED")) == 2, what="the resumed run"
    )
    resumed = marked_values(all_logs(master, exp_id), "RESUMED")
    assert resumed[1]["step"] >= 1
    master.post(f"/experiments/{exp_id}/kill")
    assert wait_for_experiment(master, exp_id, timeout=60)["state"] == "CANCELED"
    assert trials(master, exp_id)[0]["state"] == "CANCELED"


def test_container_environment_points_every_rank_at_the_chief():
    from master_lite.runners.ray._actor import container_environment

    placements = [
        {
            "node_id": "n0",
            "ip": "10.0.0.1",
            "gpu_ids": [3],
            "gpu_uuids": ["GPU-a"],
            "cuda_visible_devices": "3",
            "ports": [30001, 30002, 30003],
        },
        {
            "node_id": "n1",
            "ip": "10.0.0.2",
            "gpu_ids": [0],
            "gpu_uuids": [],
            "cuda_visible_devices": "0",
            "ports": [31001, 31002, 31003],
        },
    ]
    base = {"DET_TRIAL_ID": "7", "C10D_PORT": "29500"}
    env = container_environment(base, rank=1, placements=placements, use_gpus=True)
    assert env["DET_TRIAL_ID"] == "7"
    assert env["DET_CONTAINER_RANK"] == "1" and env["DET_AGENT_ID"] == "n1"
    assert env["DET_CONTAINER_ADDRS"] == '["10.0.0.1", "10.0.0.2"]'
    assert env["DET_CHIEF_IP"] == "10.0.0.1"
    assert (
        env["C10D_PORT"],
        env["INTER_TRAIN_PROCESS_COMM_PORT_1"],
        env["INTER_TRAIN_PROCESS_COMM_PORT_2"],
    ) == ("30001", "30002", "30003")
    assert env["DET_SLOT_IDS"] == "[0]" and env["CUDA_VISIBLE_DEVICES"] == "0"
    cpu = container_environment(base, rank=0, placements=placements, use_gpus=False)
    assert cpu["CUDA_VISIBLE_DEVICES"] == "" and cpu["DET_GPU_UUIDS"] == "[]"


def test_an_experiment_with_an_image_is_refused_at_submit(master):
    from determined.common.api import errors as api_errors

    bad = {
        "name": "image-on-ray",
        "entrypoint": "python3 -c pass",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "environment": {"image": "python:3.11"},
    }
    with pytest.raises(api_errors.APIError) as info:
        submit(master, bad, {"x.py": ""})
    assert "environment.image: RayRunner does not run trials in containers" in str(info.value)


def add_node(cluster, **node_args):
    """`cluster.add_node`, tried a few times (see `cluster()`: a busy machine can time out)."""
    failures = []
    for _ in range(3):
        try:
            return cluster.add_node(**node_args)
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{type(exc).__name__}: {exc}")
    pytest.fail("could not add a Ray node (is the machine overloaded?): " + " | ".join(failures))


def test_a_lost_node_is_named_its_trial_requeued_and_the_slots_follow_the_nodes(master, cluster):
    """Live cluster shape and node loss (issue 31, rows 5 and the pools of issue 30): a node that
    joins labelled det-pool=extra adds the pool `extra` with its GPU; a trial there whose node
    is lost says so in its log (not "possibly out of memory"), is not counted as a failure
    (max_restarts 0), waits while the pool has no slots, and resumes from its checkpoint on the
    node that joins next. GET /resources follows each change."""

    def extra_slots() -> list[dict]:
        return [s for s in master.get("/resources")["slots"] if s["pool"] == "extra"]

    lean = {"include_log_monitor": False, "num_cpus": 1, "num_gpus": 1}
    node = add_node(cluster, labels={"det-pool": "extra"}, **lean)
    wait_until(lambda: len(extra_slots()) == 1, what="the joined node's slot")
    assert extra_slots()[0]["type"] == "gpu"
    pools = {p["name"]: p for p in master.get("/resource-pools")["resourcePools"]}
    assert pools["extra"]["slotsAvailable"] == 1 and pools["default"]["slotsAvailable"] == 2

    lost_config = config("lost-node", "python3 checkpointing.py", hparams={"steps": 60})
    lost_config["resources"]["resource_pool"] = "extra"
    exp_id = submit(master, lost_config, {"checkpointing.py": CHECKPOINTING})
    (trial,) = wait_until(lambda: trials(master, exp_id), what="the trial")
    wait_until(
        lambda: master.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
        what="a first checkpoint",
    )
    text = all_logs(master, exp_id)
    assert node.node_id in text  # it runs on the extra node
    cluster.remove_node(node, allow_graceful=False)
    named = f"node {node.node_ip_address} (node id {node.node_id})"
    wait_until(
        lambda: named in all_logs(master, exp_id), timeout=60, what="the lost node in the log"
    )
    wait_until(lambda: not extra_slots(), timeout=60, what="the lost node's slot to go")
    assert "extra" in {p["name"] for p in master.get("/resource-pools")["resourcePools"]}
    wait_until(
        lambda: (
            trials(master, exp_id)[0]["state"] == "ACTIVE"
            and "not counted as a failure" in all_logs(master, exp_id)
        ),
        what="the trial back in the queue",
    )
    assert trials(master, exp_id)[0]["restarts"] == 0

    add_node(cluster, labels={"det-pool": "extra"}, **lean)
    experiment = wait_for_experiment(master, exp_id, timeout=180)
    text = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", text
    assert "possibly out of memory" not in text
    assert trials(master, exp_id)[0]["restarts"] == 0, text
    resumed = marked_values(text, "RESUMED")
    assert [r["run"] for r in resumed] == [1, 2]
    assert resumed[1]["step"] >= 1  # from its checkpoint
