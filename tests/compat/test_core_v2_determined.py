"""`det.experimental.core_v2` as Determined's unmanaged examples and e2e fixtures use it.

Scripts written the way Determined's are (`examples/tutorials/core_api_unmanaged/`,
`e2e_tests/tests/fixtures/unmanaged/`), run as plain processes against a real master:

* `error_termination`: a script whose exception ends it (or `sys.exit(3)`) leaves its trial
  ERROR, not COMPLETED (Determined watches `sys.excepthook` and `sys.exit`);
* `3_torch_distributed` / `checkpoint_distributed`: two ranks with the same external ids report
  into one trial (the chief opens it and hands it to the other rank), sharded checkpoints;
* `core_v2.url_reverse_webui_exp_view()`: a URL of this master's view of the experiment.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests._support import MasterProcess, child_env


@pytest.fixture
def master(start_master: Callable[..., MasterProcess], tmp_path: Path) -> MasterProcess:
    return start_master(env={"MASTER_LITE_CHECKPOINT_STORAGE_ROOTS": str(tmp_path)})


def run_script(
    master: MasterProcess, tmp_path: Path, source: str, argv: list[str] | None = None, **env: str
) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    environment = child_env(
        {"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token, "CKPT": str(tmp_path), **env}
    )
    return subprocess.run(
        [sys.executable, *(argv or []), str(script)],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def only_experiment(master: MasterProcess) -> tuple[dict, list[dict]]:
    (experiment,) = master.session.get("/experiments")["experiments"]
    return experiment, master.trials(experiment["id"])


ERROR_TERMINATION = """
import os, random, sys
from determined.experimental import core_v2

def main():
    name = os.environ["DET_TEST_EXTERNAL_EXP_ID"]
    core_v2.init(
        config=core_v2.DefaultConfig(name=name, external_experiment_id=name, external_trial_id=name),
        checkpoint_storage=os.environ["CKPT"],
    )
    for i in range(100):
        core_v2.train.report_training_metrics(steps_completed=i, metrics={"loss": random.random()})
        if i == 15:
            if os.environ.get("HOW") == "exit":
                sys.exit(3)
            raise ValueError("oops")
    core_v2.close()

if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_script_that_fails_ends_its_trial_in_error(
    master: MasterProcess, tmp_path: Path, how: str
) -> None:
    done = run_script(master, tmp_path, ERROR_TERMINATION, DET_TEST_EXTERNAL_EXP_ID="e1", HOW=how)
    assert done.returncode != 0, done.stderr
    experiment, (trial,) = only_experiment(master)
    assert trial["state"] == "ERROR", (trial, done.stderr[-2000:])
    assert experiment["state"] == "ERROR"
    assert len(master.series(trial["id"], "training")) == 16
    logs = "\n".join(master.logs(trial["id"]))
    expected = "ValueError: oops" if how == "raise" else "the script exited with code 3"
    assert expected in logs, logs[-2000:]


def test_a_script_that_ends_without_close_completes(master: MasterProcess, tmp_path: Path) -> None:
    source = ERROR_TERMINATION.replace("if i == 15:", "if False:").replace(
        "    core_v2.close()\n", ""
    )
    done = run_script(master, tmp_path, source, DET_TEST_EXTERNAL_EXP_ID="e2")
    assert done.returncode == 0, done.stderr
    experiment, (trial,) = only_experiment(master)
    assert trial["state"] == "COMPLETED" and experiment["state"] == "COMPLETED"


TORCH_DISTRIBUTED = """
import os, random
import torch.distributed as dist
from determined.experimental import core_v2

def main():
    dist.init_process_group("gloo")
    name = os.environ["DET_TEST_EXTERNAL_EXP_ID"]
    distributed = core_v2.DistributedContext.from_torch_distributed()
    core_v2.init(
        defaults=core_v2.DefaultConfig(name=name, checkpoint_storage=os.environ["CKPT"]),
        distributed=distributed,
        unmanaged=core_v2.UnmanagedConfig(external_experiment_id=name, external_trial_id=name),
    )
    size = dist.get_world_size()
    for i in range(10):
        if i % size == dist.get_rank():
            core_v2.train.report_training_metrics(
                steps_completed=i, metrics={"loss": random.random(), "rank": dist.get_rank() + 0.01}
            )
        metadata = {"steps_completed": i, f"rank_{dist.get_rank()}": "ok"}
        with core_v2.checkpoint.store_path(metadata, shard=True) as (path, uuid):
            (path / f"state_{dist.get_rank()}").write_text(f"{i},{dist.get_rank()}")
    if dist.get_rank() == 0:
        print("See the experiment at:", core_v2.url_reverse_webui_exp_view(), flush=True)
    core_v2.close()

if __name__ == "__main__":
    main()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.rendezvous_ports
def test_two_ranks_with_external_ids_report_into_one_trial(
    master: MasterProcess, tmp_path: Path
) -> None:
    launcher = ["-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2"]
    launcher += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    launcher += ["--max_restarts", "0"]
    pub = free_port()
    done = run_script(
        master,
        tmp_path,
        TORCH_DISTRIBUTED,
        launcher,
        DET_TEST_EXTERNAL_EXP_ID="dist",
        INTER_TRAIN_PROCESS_COMM_PORT_1=str(pub),
        INTER_TRAIN_PROCESS_COMM_PORT_2=str(free_port()),
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    experiment, (trial,) = only_experiment(master)
    assert trial["state"] == "COMPLETED" and experiment["state"] == "COMPLETED"
    training = master.series(trial["id"], "training")
    assert sorted(step for step, _ in training) == list(range(10))
    assert {metrics["rank"] for _, metrics in training} == {0.01, 1.01}
    checkpoints = master.session.get(f"/experiments/{experiment['id']}/checkpoints")["checkpoints"]
    assert len(checkpoints) == 10
    latest = Path(tmp_path) / trial["latest_checkpoint"]
    assert sorted(p.name for p in latest.iterdir() if p.name.startswith("state_")) == [
        "state_0",
        "state_1",
    ]
    url = f"{master.url}/api/v1/experiments/{experiment['id']}"
    assert f"See the experiment at: {url}" in done.stdout + done.stderr


def test_the_experiment_url_is_jupyterlabs_view_when_hosted(
    master: MasterProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from determined.common.experimental import Determined
    from determined.experimental import core_v2
    from determined.experimental.core_v2 import _exits

    with pytest.raises(RuntimeError, match="no run is open"):
        core_v2.url_reverse_webui_exp_view()
    client = Determined(master.url, token=master.token)
    core_v2.init(config=core_v2.Config(name="url"), client=client, checkpoint_storage=str(tmp_path))
    try:
        exp_id = core_v2.info.trial.experiment_id
        # A standalone master: the experiment in the API (the master says it is not hosted).
        assert master.session.get("/master")["jupyterlab"] is False
        url = core_v2.url_reverse_webui_exp_view()
        assert url == f"{master.url}/api/v1/experiments/{exp_id}"
        assert master.session.get(url.split("/api/v1", 1)[1])["experiment"]["id"] == exp_id
        # Hosted by Jupyter (DET_MASTER is `<server><base_url>determined`): the lab's view.
        monkeypatch.setattr(_exits, "hosted_in_jupyter", lambda url, token: True)
        monkeypatch.setattr(core_v2.info, "master_url", "http://127.0.0.1:8888/base/determined")
        assert core_v2.url_reverse_webui_exp_view() == (
            f"http://127.0.0.1:8888/base/lab?det-experiment={exp_id}"
        )
    finally:
        core_v2.close()


def test_a_hosted_master_says_so() -> None:
    from master_lite.api._allocations import master_info

    class Hosted:
        version = "x"
        root_dir = "/r"
        cluster_id = "c"
        jupyter_host = object()

    assert master_info(Hosted())["jupyterlab"] is True
