"""A core_v2 run in a real IPython kernel (jupyter_client): its metrics, checkpoint and printed
lines arrive; SIGKILL of the kernel ends the trial as ERROR once its lease lapses; a new kernel
resumes the same trial by its external ids; a kernel shut down with the run open closes it."""

from __future__ import annotations

import signal
import textwrap
from collections.abc import Iterator

import pytest
from jupyter_client.manager import KernelManager

from tests._support import MasterProcess, wait_until
from tests._support.process import child_env

pytestmark = pytest.mark.slow

OPEN = """\
from determined.experimental import core_v2
core_v2.init(
    config=core_v2.Config(
        name="kernel-run",
        hparams={"lr": 0.1},
        searcher={"metric": "loss"},
        external_experiment_id="nb-exp",
        external_trial_id="nb-trial",
    ),
    lease_seconds=2,
)
print("TRIAL", core_v2.info.trial.trial_id, "LATEST", core_v2.info.latest_checkpoint)
"""

TRAIN = """\
import pathlib
for step in {steps}:
    core_v2.train.report_training_metrics(step, {{"loss": 1 / step}})
with core_v2.checkpoint.store_path({{"steps_completed": {last}}}) as (path, uuid):
    (path / "step.txt").write_text("{last}")
print("saved", uuid)
"""


class Kernel:
    """A started python3 kernel whose cells this test runs."""

    def __init__(self, master: MasterProcess) -> None:
        self.manager = KernelManager(kernel_name="python3")
        env = child_env({"DET_MASTER": master.url, "DET_MASTER_TOKEN": master.token})
        self.manager.start_kernel(env=env)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)

    def run(self, code: str) -> str:
        """Execute a cell; its stdout. A failing cell fails the test with its traceback."""
        output: list[str] = []
        errors: list[str] = []

        def hook(message: dict) -> None:
            content = message["content"]
            if message["msg_type"] == "stream":
                output.append(content["text"])
            elif message["msg_type"] == "error":
                errors.append("\n".join(content["traceback"]))

        reply = self.client.execute_interactive(
            textwrap.dedent(code), timeout=120, output_hook=hook
        )
        assert reply["content"]["status"] == "ok", "\n".join(errors)
        return "".join(output)

    def sigkill(self) -> None:
        self.manager.provisioner.process.send_signal(signal.SIGKILL)
        self.manager.provisioner.process.wait(timeout=30)
        self.client.stop_channels()

    def shutdown(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=False)


@pytest.fixture
def master(tmp_path) -> Iterator[MasterProcess]:
    with MasterProcess(tmp_path / "root") as process:
        yield process


@pytest.fixture
def kernels(master) -> Iterator[list[Kernel]]:
    started: list[Kernel] = []
    yield started
    for kernel in started:
        if kernel.manager.is_alive():
            kernel.client.stop_channels()
            kernel.manager.shutdown_kernel(now=True)


def trial_of(output: str) -> int:
    return int(output.split("TRIAL", 1)[1].split()[0])


def test_a_killed_kernel_ends_its_trial_and_a_new_kernel_resumes_it(master, kernels):
    session = master.session
    kernel = Kernel(master)
    kernels.append(kernel)
    trial_id = trial_of(kernel.run(OPEN))
    saved = kernel.run(TRAIN.format(steps="(1, 2, 3)", last=3))
    uuid = saved.split("saved", 1)[1].split()[0]
    wait_until(
        lambda: len(master.series(trial_id, "training")) == 3, 60, "the three reports stored"
    )
    wait_until(lambda: "saved " + uuid in master.logs(trial_id), 60, "the cell's output logged")
    trial = session.get(f"/trials/{trial_id}")["trial"]
    assert trial["state"] == "ACTIVE" and trial["latest_checkpoint"] == uuid
    experiment_id = trial["experiment_id"]
    assert session.get(f"/experiments/{experiment_id}")["experiment"]["unmanaged"] is True

    kernel.sigkill()
    ended = wait_until(
        lambda: (t := session.get(f"/trials/{trial_id}")["trial"])["state"] == "ERROR" and t,
        60,
        "the killed kernel's trial to end as ERROR",
    )
    assert "sent no heartbeat" in ended["exit_summary"]
    assert session.get(f"/experiments/{experiment_id}")["experiment"]["state"] == "ERROR"

    again = Kernel(master)
    kernels.append(again)
    opened = again.run(OPEN)
    assert trial_of(opened) == trial_id
    assert f"LATEST {uuid}" in opened
    again.run(TRAIN.format(steps="(4,)", last=4))
    resumed = session.get(f"/trials/{trial_id}")["trial"]
    assert resumed["state"] == "ACTIVE" and resumed["run_id"] == 2
    # Shut down with the run still open: the kernel's exit closes it.
    again.shutdown()
    wait_until(
        lambda: session.get(f"/trials/{trial_id}")["trial"]["state"] == "COMPLETED",
        60,
        "the trial closed at kernel shutdown",
    )
    assert [step for step, _ in master.series(trial_id, "training")] == [1, 2, 3, 4]
    assert session.get(f"/experiments/{experiment_id}")["experiment"]["state"] == "COMPLETED"
