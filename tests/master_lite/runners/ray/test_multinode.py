"""master-lite on a Ray cluster of three "machines": a head and two workers, each in a network
namespace of its own with its own address and its own directories (tests/_support/ray_cluster.py),
checkpoints in S3 (moto's server on the bridge's address): no disk is shared by the nodes.

The master runs on the head's namespace as `master-lite --host 0.0.0.0 --resource-manager ray
--advertised-url http://<head>:8080`, the way docs/distributed.md's recipe runs it. Every test runs
the same grid search (three trials, one per node: each node has one CPU slot) whose trials
checkpoint every step to S3 and whose validation metric depends only on the hparams and the
steps trained. A fault hits mid-search (a node killed, a node cut off, the Ray head stopped and
restarted, the master stopped with SIGTERM and started again); the search must still complete
with exactly the clean run's validation metrics, the restarted trials must resume from a
checkpoint (restored from S3 on whichever node Ray chose), and no trial process may be left.

One module-scoped cluster, S3 server and master: a Ray node takes seconds to start.
"""

from __future__ import annotations

import datetime
import pathlib
import shutil
import signal
import tempfile
import time

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
from tests._support.ray_cluster import NetnsCluster, NodeMaster, netns_available

# Starting three Ray nodes on a busy machine takes minutes (the first test pays for it).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BUCKET = "multinode"
STEPS = 8
LEARNING_RATES = [0.5, 1.5, 2.5]

# Deterministic: the state after step s depends only on lr and s, so a run resumed from any
# checkpoint ends with the clean run's value. A checkpoint (to S3) after every step.
TRAIN = """
    import json, time
    import determined as det

    info = det.get_cluster_info()
    hparams = info.trial.hparams
    with det.core.init() as core_context:
        start, x = 0, 0.0
        if info.latest_checkpoint:
            with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
                state = json.loads((path / "state.json").read_text())
                start, x = state["step"], state["x"]
        print("RESUMED " + json.dumps({"step": start, "run": info.trial._trial_run_id,
                                       "node": info.container_addrs[info.container_rank]}),
              flush=True)
        for step in range(start + 1, hparams["steps"] + 1):
            time.sleep(0.5)
            x = x * 0.5 + hparams["lr"] * step
            core_context.train.report_training_metrics(step, {"loss": 1.0 / (1.0 + x)})
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (path / "state.json").write_text(json.dumps({"step": step, "x": x}))
            if core_context.preempt.should_preempt():
                print("PREEMPTED " + json.dumps({"step": step}), flush=True)
                raise SystemExit(0)
        core_context.train.report_validation_metrics(
            hparams["steps"], {"x": x, "loss": 1.0 / (1.0 + x)})
"""


def clean_x(lr: float, steps: int = STEPS) -> float:
    """The validation `x` of a clean run (the script's arithmetic, in the same order)."""
    x = 0.0
    for step in range(1, steps + 1):
        x = x * 0.5 + lr * step
    return x


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why_not = netns_available()
    if why_not:
        pytest.fail(f"the multi-node suite needs network namespaces: {why_not}")
    # A short path: Ray's sockets live under each node's dir (107 bytes at most).
    base = pathlib.Path(tempfile.mkdtemp(prefix="ntns-", dir="/tmp"))
    cluster = NetnsCluster(base, workers=2)
    try:
        with cluster:
            yield cluster
    finally:
        shutil.rmtree(base, ignore_errors=True)
    left = cluster.leftovers()
    assert not left, f"processes left behind by the cluster: {left}"


@pytest.fixture(scope="module")
def s3(cluster, tmp_path_factory):
    from tests._support.s3_server import start_s3_server  # moto[server]: the test extra

    # On the bridge: the one address every node (and the master) reaches.
    with start_s3_server(host=cluster.gateway, log_dir=str(tmp_path_factory.mktemp("moto"))) as s:
        s.create_bucket(BUCKET)
        yield s


@pytest.fixture(scope="module")
def master(cluster, s3, tmp_path_factory):
    with NodeMaster(cluster, tmp_path_factory.mktemp("ntns-master")) as process:
        yield process
    assert not cluster.trial_processes(), "trial processes outlived the master"


@pytest.fixture(autouse=True)
def every_node_up(cluster, master):
    """Each test starts on the whole cluster and a running master (a test before may have
    killed a node, or failed with the master down)."""
    cluster.restore()
    if not master.alive():
        master.restart()


@pytest.fixture(scope="module")
def clean_metrics() -> dict[float, float]:
    """lr -> validation x of the clean run (filled by the first test)."""
    return {}


def search(master: MasterProcess, s3, name: str) -> int:
    config = {
        "name": name,
        "entrypoint": "python3 train.py",
        "searcher": {"name": "grid", "metric": "loss", "max_length": STEPS},
        "hyperparameters": {
            "lr": {"type": "categorical", "vals": LEARNING_RATES},
            "steps": STEPS,
        },
        "resources": {"slots_per_trial": 1},
        "max_restarts": 3,
        "checkpoint_storage": s3.storage_config(BUCKET, prefix=name),
    }
    return submit(master, config, {"train.py": TRAIN})


def runs_of(master: MasterProcess, trial_id: int) -> list[dict]:
    """The trial's RESUMED lines: one per run (step resumed from, run id, node address, and
    `at`, when the line was logged, in seconds since the epoch)."""
    found = []
    for entry in trial_logs(master, trial_id):
        for value in marked_values(entry["line"], "RESUMED"):
            value["at"] = datetime.datetime.fromisoformat(entry["time"]).timestamp()
            found.append(value)
    return found


def assert_named_lost(master: MasterProcess, trial_id: int, node_ip: str) -> None:
    """The trial's log says which node was lost (not "possibly out of memory")."""
    lines = [e["line"] for e in trial_logs(master, trial_id)]
    assert any(f"node {node_ip}" in line and "lost" in line for line in lines), lines[-30:]


def measured(what: str, fault_at: float, runs: list[dict]) -> None:
    """Print how long the trial took to run again after the fault (docs/distributed.md's fault
    table quotes these; `pytest -s` shows them). Information, never asserted."""
    if len(runs) >= 2:
        print(f"\nMEASURED {what}: resumed {runs[-1]['at'] - fault_at:.1f} s after the fault")


def trial_on(master: MasterProcess, exp_id: int, node_ip: str, min_step: int = 2) -> dict:
    """Wait for a trial of the experiment running on `node_ip` with a checkpoint (it reported
    step `min_step`, after checkpointing the step before)."""

    def found() -> dict | None:
        for trial in trials(master, exp_id):
            placed = runs_of(master, trial["id"])
            if placed and placed[-1]["node"] == node_ip:
                steps = [s for s, _ in master.series(trial["id"], "training")]
                if steps and max(steps) >= min_step:
                    return trial
        return None

    return wait_until(
        found,
        timeout=180,
        what=f"a trial with a checkpoint on node {node_ip}",
        details=lambda: all_logs(master, exp_id)[-3000:],
    )


def assert_clean_completion(master, cluster, exp_id: int, clean: dict[float, float]) -> list:
    """The search completed with the clean run's validation metrics and left no trial behind."""
    experiment = wait_for_experiment(master, exp_id, timeout=300)
    text = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", text[-4000:]
    found = {}
    for trial in trials(master, exp_id):
        assert trial["state"] == "COMPLETED", text[-4000:]
        validations = master.series(trial["id"], "validation")
        assert len(validations) == 1, validations
        found[trial["hparams"]["lr"]] = validations[0][1]["x"]
    assert found == clean, text[-4000:]
    wait_until(
        lambda: not cluster.trial_processes(),
        timeout=60,
        what="every trial process to exit",
        details=lambda: "\n".join(cluster.leftovers()),
    )
    return trials(master, exp_id)


def test_a_search_runs_across_the_nodes_with_checkpoints_in_s3(master, cluster, s3, clean_metrics):
    exp_id = search(master, s3, "clean")
    expected = {lr: clean_x(lr) for lr in LEARNING_RATES}
    done = assert_clean_completion(master, cluster, exp_id, expected)
    clean_metrics.update(expected)
    nodes = {runs_of(master, t["id"])[0]["node"] for t in done}
    assert nodes == {node.ip for node in cluster.nodes}  # one trial on each machine
    # Every checkpoint is in the bucket; no node kept one on its disk.
    # Every checkpoint the master keeps (after its GC) is in the bucket, and only those.
    listed = master.session.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
    kept = {c["uuid"] for c in listed if c["state"] == "COMPLETED"}
    assert kept and s3.checkpoint_uuids(BUCKET, "clean") == kept
    for node in cluster.nodes:
        assert not list(node.dir.rglob("state.json")), f"a checkpoint on {node.name}'s disk"


def test_a_killed_node_costs_its_trial_a_restart_from_s3_on_another_node(
    master, cluster, s3, clean_metrics
):
    exp_id = search(master, s3, "kill-node")
    victim = cluster.workers[0]
    trial = trial_on(master, exp_id, victim.ip)
    fault_at = time.time()
    cluster.kill_node(victim)  # raylet, workers, the trial: a machine switched off
    assert_clean_completion(master, cluster, exp_id, clean_metrics)
    # Another run of the trial resumed from its last checkpoint (from S3) on another node.
    runs = runs_of(master, trial["id"])
    assert len(runs) >= 2 and runs[-1]["step"] >= 1 and runs[-1]["node"] != victim.ip, runs
    assert_named_lost(master, trial["id"], victim.ip)
    measured("node killed", fault_at, runs)


def test_a_partitioned_node_costs_its_trial_a_restart_and_leaves_nothing(
    master, cluster, s3, clean_metrics
):
    exp_id = search(master, s3, "partition")
    victim = cluster.workers[1]
    trial = trial_on(master, exp_id, victim.ip)
    fault_at = time.time()
    cluster.partition(victim)
    wait_until(
        lambda: victim.ip not in cluster.alive_node_ips(),
        timeout=90,
        what="Ray to count the cut-off node dead",
    )
    cluster.heal(victim)  # the node comes back: its raylet learns it was declared dead
    assert_clean_completion(master, cluster, exp_id, clean_metrics)
    runs = runs_of(master, trial["id"])
    assert len(runs) >= 2 and runs[-1]["step"] >= 1 and runs[-1]["node"] != victim.ip, runs
    assert_named_lost(master, trial["id"], victim.ip)
    measured("node partitioned", fault_at, runs)


def test_the_master_outlives_a_ray_head_stop_and_restart(master, cluster, s3, clean_metrics):
    exp_id = search(master, s3, "head-restart")
    trial = trial_on(master, exp_id, cluster.head.ip)
    fault_at = time.time()
    cluster.stop_head()
    # Without their GCS the workers' raylets give up (10 s here), and their trials with them.
    for worker in cluster.workers:
        wait_until(
            lambda worker=worker: not worker.raylet_alive(),
            timeout=90,
            what=f"{worker.name}'s raylet to give up",
        )
    wait_until(lambda: not cluster.trial_processes(), timeout=60, what="the trials to die")
    # The master stays up and says what it waits for.
    state = wait_until(
        lambda: (
            (c := master.session.get("/master").get("cluster") or {}).get("state") == "waiting"
            and c
        ),
        timeout=60,
        what="the master to say it waits for the Ray cluster",
    )
    assert "waiting for the Ray cluster" in state["message"], state
    cluster.restore()  # the head, then the workers, started again
    restarted_at = time.time()
    done = assert_clean_completion(master, cluster, exp_id, clean_metrics)
    assert any(runs_of(master, t["id"])[-1]["step"] >= 1 for t in done)  # from checkpoints
    assert master.alive()
    print(f"\nMEASURED head restarted {restarted_at - fault_at:.1f} s after its stop")
    measured("Ray head stopped and restarted", fault_at, runs_of(master, trial["id"]))


def test_sigterm_stops_the_master_cleanly_and_a_restart_finishes_the_search(
    master, cluster, s3, clean_metrics
):
    exp_id = search(master, s3, "sigterm")
    for node in cluster.nodes:
        trial_on(master, exp_id, node.ip)
    fault_at = time.time()
    master.process.send_signal(signal.SIGTERM)
    assert master.process.wait(90) == 0, master.log_text()[-3000:]
    print(f"\nMEASURED master stopped cleanly {time.time() - fault_at:.1f} s after SIGTERM")
    master.closed()
    # The trials were preempted with a checkpoint, and none is left running.
    wait_until(lambda: not cluster.trial_processes(), timeout=60, what="the trials to stop")
    master.restart()
    done = assert_clean_completion(master, cluster, exp_id, clean_metrics)
    stopped = marked_values(all_logs(master, exp_id), "PREEMPTED")
    assert stopped, "no trial was preempted by the clean stop"
    resumed = [runs_of(master, t["id"]) for t in done]
    resumed = [runs for runs in resumed if len(runs) >= 2]
    assert len(resumed) == len(stopped), resumed  # each preempted trial ran again...
    assert all(runs[-1]["step"] >= 1 for runs in resumed), resumed  # ...from its checkpoint
