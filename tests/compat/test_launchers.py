"""Determined's launchers and `startup-hook.sh`, through a real master.

* `determined.launch.tensorflow` on 2 slots: two workers train one
  `MultiWorkerMirroredStrategy` model on scikit-learn's digits and report through the Core API.
* `determined.launch.horovod` without Horovod: one slot runs the script; two slots fail at once
  with an error saying what to install.
* `startup-hook.sh`: sourced before the entrypoint (its exports reach the trial, also a trial
  that would otherwise start in a pre-started interpreter); a failing hook ends the trial in
  ERROR with a log line naming it and its exit code.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests._support import MasterProcess, all_logs, submit, trials, wait_for_experiment


def config(entrypoint: str | list[str], slots: int = 1, **extra: object) -> dict:
    return {
        "name": "launchers",
        "entrypoint": entrypoint,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "resources": {"slots_per_trial": slots},
        "max_restarts": 0,
        **extra,
    }


@pytest.fixture
def master(start_master: Callable[..., MasterProcess]) -> MasterProcess:
    return start_master(cpu_slots=2)


TF_TRAIN = """
import json, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import determined as det
from determined import core

tf_config = json.loads(os.environ["TF_CONFIG"])
workers = tf_config["cluster"]["worker"]
assert tf_config["task"]["type"] == "worker", tf_config
assert len(workers) == 2 and len(set(workers)) == 2, workers
print("TF_CONFIG " + json.dumps(tf_config), flush=True)

import tensorflow as tf
from sklearn.datasets import load_digits

distributed, strategy = core.DistributedContext.from_tf_config()
assert isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy), strategy
assert distributed.rank == tf_config["task"]["index"], (distributed, tf_config)
print(f"RANKS {distributed.rank} {distributed.size} {distributed.local_rank} "
      f"{distributed.local_size}", flush=True)

x, y = load_digits(return_X_y=True)
x = tf.constant(x[distributed.rank::distributed.size] / 16.0, tf.float32)
y = tf.constant(y[distributed.rank::distributed.size], tf.int64)
with strategy.scope():
    w = tf.Variable(tf.zeros([64, 10]), aggregation=tf.VariableAggregation.MEAN)
    b = tf.Variable(tf.zeros([10]), aggregation=tf.VariableAggregation.MEAN)

@tf.function
def step(x, y):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = x @ w + b
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, [w, b])
        gw, gb = tf.distribute.get_replica_context().all_reduce("MEAN", grads)
        w.assign_sub(0.5 * gw)
        b.assign_sub(0.5 * gb)
        return loss
    return strategy.reduce("MEAN", strategy.run(replica_step, args=(x, y)), axis=None)

with core.init(distributed=distributed) as ctx:
    for batch in range(1, 21):
        loss = float(step(x, y))
        if batch % 10 == 0:
            ctx.train.report_training_metrics(steps_completed=batch, metrics={"loss": loss})
    accuracy = float(tf.reduce_mean(tf.cast(tf.argmax(x @ w + b, 1) == y, tf.float32)))
    accuracies = distributed.allgather(accuracy)
    if distributed.rank == 0:
        ctx.train.report_validation_metrics(
            steps_completed=20,
            metrics={"loss": loss, "accuracy": sum(accuracies) / len(accuracies)},
        )
"""


@pytest.mark.rendezvous_ports
def test_tensorflow_launcher_two_slots_trains_multi_worker(master: MasterProcess) -> None:
    exp_id = submit(
        master,
        config("python3 -m determined.launch.tensorflow -- python3 train.py", slots=2),
        {"train.py": TF_TRAIN},
    )
    experiment = wait_for_experiment(master, exp_id, timeout=300)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs[-6000:]
    (trial,) = trials(master, exp_id)

    configs = [
        json.loads(line.split("TF_CONFIG ", 1)[1])
        for line in logs.splitlines()
        if "TF_CONFIG {" in line
    ]
    assert sorted(c["task"]["index"] for c in configs) == [0, 1]
    assert configs[0]["cluster"] == configs[1]["cluster"]
    # Each worker's lines carry its rank (wrap_rank), stored as the log entry's rank.
    assert "rank=0] RANKS 0 2 0 2" in logs and "rank=1] RANKS 1 2 1 2" in logs

    training = master.series(trial["id"], "training")
    assert [steps for steps, _ in training] == [10, 20]
    assert training[1][1]["loss"] < training[0][1]["loss"]
    ((steps, validation),) = master.series(trial["id"], "validation")
    assert steps == 20 and validation["accuracy"] > 0.8


HOROVOD_SCRIPT = """
import os
import determined as det
from determined import core

distributed = core.DistributedContext.from_torch_distributed()
print("RANK ENV", os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["HOROVOD_RANK"],
      os.environ["HOROVOD_SIZE"], flush=True)
with core.init(distributed=distributed) as ctx:
    ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5,
                                        "size": float(distributed.size)})
"""


def test_horovod_launcher_one_slot_runs_without_horovod(master: MasterProcess) -> None:
    exp_id = submit(
        master,
        config("python3 -m determined.launch.horovod -- python3 train.py", slots=1),
        {"train.py": HOROVOD_SCRIPT},
    )
    experiment = wait_for_experiment(master, exp_id, timeout=120)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs[-4000:]
    assert "RANK ENV 0 1 0 1" in logs
    (trial,) = trials(master, exp_id)
    assert master.series(trial["id"], "validation") == [(1, {"loss": 0.5, "size": 1.0})]


@pytest.mark.rendezvous_ports
def test_horovod_launcher_two_slots_without_horovod_fails_clearly(master: MasterProcess) -> None:
    exp_id = submit(
        master,
        config("python3 -m determined.launch.horovod -- python3 train.py", slots=2),
        {"train.py": HOROVOD_SCRIPT},
    )
    experiment = wait_for_experiment(master, exp_id, timeout=120)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "ERROR", logs[-4000:]
    assert "pip install horovod" in logs and "determined.launch.torch_distributed" in logs
    assert "RANK ENV" not in logs  # it failed before running anything


HOOK_SCRIPT = """
import os
from determined import core
value = os.environ["HOOK_VALUE"]
print(f"trial sees HOOK_VALUE={value}", flush=True)
with core.init() as ctx:
    ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": float(value)})
"""


@pytest.mark.parametrize(
    "entrypoint",
    [
        "python3 train.py",  # would run in a pre-started interpreter without the hook
        ["python3", "-m", "determined.launch.tensorflow", "python3", "train.py"],
    ],
)
def test_startup_hook_exports_reach_the_trial(
    master: MasterProcess, entrypoint: str | list[str]
) -> None:
    hook = "echo installing things\nexport HOOK_VALUE=$((40 + 2))\n"
    exp_id = submit(master, config(entrypoint), {"train.py": HOOK_SCRIPT, "startup-hook.sh": hook})
    experiment = wait_for_experiment(master, exp_id, timeout=120)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "COMPLETED", logs[-4000:]
    assert "installing things" in logs  # the hook's output is in the trial's log
    assert "trial sees HOOK_VALUE=42" in logs
    (trial,) = trials(master, exp_id)
    assert master.series(trial["id"], "validation") == [(1, {"loss": 42.0})]


def test_failing_startup_hook_ends_the_trial_in_error(master: MasterProcess) -> None:
    hook = "echo about to fail\nsh -c 'exit 3'\necho never printed\n"
    exp_id = submit(
        master, config("python3 train.py"), {"train.py": HOOK_SCRIPT, "startup-hook.sh": hook}
    )
    experiment = wait_for_experiment(master, exp_id, timeout=120)
    logs = all_logs(master, exp_id)
    assert experiment["state"] == "ERROR", logs[-4000:]
    (trial,) = trials(master, exp_id)
    assert trial["state"] == "ERROR"
    assert "about to fail" in logs and "never printed" not in logs
    assert "startup-hook.sh failed with exit code 3" in logs
    assert "trial sees" not in logs
