"""The runner seam's own parts: the dispatcher's record of who owns each run, and the helpers
every runner shares (terminate-with-grace, the exit-code rule, run-as refusal)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from master_lite.runners import (
    DispatchingRunner,
    LaunchSpec,
    RunAs,
    Runner,
    exit_code_of,
    killed_exit_code,
    kind_of,
    refuse_run_as,
    signal_of,
    terminate_with_grace,
)
from master_lite.runners.kernel import KernelRunner


class FakeRunner(Runner):
    """Records every call; `running()` must not be what the dispatcher routes by."""

    def __init__(self, kind: str, log_sink: Any, on_exit: Any) -> None:
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        self.kind = kind
        self.calls: list[tuple[str, str]] = []
        self.live: set[str] = set()
        self.kept: set[str] = set()
        self.fail_launch = False

    def launch(self, spec: LaunchSpec) -> int | None:
        self.calls.append(("launch", spec.allocation_id))
        if self.fail_launch:
            raise OSError("cannot start")
        self.live.add(spec.allocation_id)
        return None

    def running(self) -> list[str]:
        self.calls.append(("running", ""))
        return sorted(self.live)

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        self.calls.append(("signal", allocation_id))
        return True

    def terminate(self, allocation_id: str, grace: float) -> bool:
        self.calls.append(("terminate", allocation_id))
        return True

    def kill(self, allocation_id: str) -> bool:
        self.calls.append(("kill", allocation_id))
        return True

    def holds(self, allocation_id: str) -> bool:
        return allocation_id in self.kept

    def release(self, allocation_id: str) -> None:
        self.calls.append(("release", allocation_id))
        self.kept.discard(allocation_id)

    def expire(self, allocation_id: str) -> None:
        """What it kept of the run goes on its own (a kept kernel's timer ran out)."""
        self.kept.discard(allocation_id)
        self._released(allocation_id)

    def end(self, allocation_id: str, code: int, keep: bool = False) -> None:
        self.live.discard(allocation_id)
        if keep:
            self.kept.add(allocation_id)
        self._on_exit(allocation_id, code)


def dispatcher() -> tuple[DispatchingRunner, dict[str, FakeRunner], list]:
    made: dict[str, FakeRunner] = {}
    exits: list = []

    def factory(kind: str):
        def make(sink: Any, ended: Any) -> Runner:
            made[kind] = FakeRunner(kind, sink, ended)
            return made[kind]

        return make

    runner = DispatchingRunner(
        log_sink=lambda records: None,
        on_exit=lambda aid, code: exits.append((aid, code)),
        process=factory("process"),
        container=factory("container"),
        kernel=factory("kernel"),
    )
    return runner, made, exits


def spec(aid: str, image: str | None = None, config: dict | None = None) -> LaunchSpec:
    return LaunchSpec(aid, 1, ["true"], {}, Path("."), image=image, config=config)


def test_runs_go_to_the_runner_of_their_kind_and_later_calls_to_their_owner():
    runner, made, exits = dispatcher()
    assert set(made) == {"process"}  # the others are made when first needed
    runner.launch(spec("trial-1.1"))
    runner.launch(spec("trial-2.1", image="img:1"))
    runner.launch(spec("trial-3.1", config={"environment": {"kernel": {}}}))
    for kind, aid in (
        ("process", "trial-1.1"),
        ("container", "trial-2.1"),
        ("kernel", "trial-3.1"),
    ):
        assert runner.terminate(aid, 1.0) and runner.kill(aid) and runner.send_signal(aid, 2)
        assert made[kind].calls == [
            ("launch", aid),
            ("terminate", aid),
            ("kill", aid),
            ("signal", aid),
        ]  # never asked who runs what
    made["container"].end("trial-2.1", 3)
    assert exits == [("trial-2.1", 3)]
    runner.kill("trial-2.1")  # ended: no longer the container runner's
    assert made["container"].calls[-1] == ("signal", "trial-2.1")
    assert made["process"].calls[-1] == ("kill", "trial-2.1")


def test_a_run_its_runner_still_holds_stays_owned_until_released():
    runner, made, exits = dispatcher()
    runner.launch(spec("trial-3.1", config={"environment": {"kernel": {}}}))
    made["kernel"].end("trial-3.1", 1, keep=True)
    assert exits == [("trial-3.1", 1)]
    assert runner.holds("trial-3.1")
    runner.release("trial-3.1")
    assert made["kernel"].calls[-1] == ("release", "trial-3.1")
    runner.kill("trial-3.1")
    assert made["process"].calls[-1] == ("kill", "trial-3.1")


def test_a_kept_run_that_its_runner_lets_go_of_on_its_own_is_owned_by_nobody():
    runner, made, exits = dispatcher()
    kernel_config = {"environment": {"kernel": {}}}
    runner.launch(spec("trial-4.1", config=kernel_config))
    runner.launch(spec("trial-5.1", config=kernel_config))
    heard: list[str] = []
    runner.on_released(heard.append)
    made["kernel"].end("trial-4.1", 1, keep=True)
    assert runner.owner("trial-4.1") is made["kernel"]
    made["kernel"].expire("trial-4.1")  # no release() from the master: its timer ran out
    assert runner.owner("trial-4.1") is made["process"]  # the record went
    assert not runner.holds("trial-4.1")
    assert heard == ["trial-4.1"]  # the dispatcher's own listeners hear it too
    # A run the runner still runs keeps its owner whatever the runner says it let go of.
    made["kernel"].expire("trial-5.1")
    assert runner.owner("trial-5.1") is made["kernel"]
    assert exits == [("trial-4.1", 1)]


class _Kernel:
    """A kernel that is always there and shuts down when asked."""

    pid = 4242

    def __init__(self) -> None:
        self.shut_down = threading.Event()

    def shutdown(self, now: bool = False) -> None:
        self.shut_down.set()

    def signal(self, sig: int) -> None:
        self.shut_down.set()


class _FailingKernels(KernelRunner):
    """The real kernel runner, with kernels that fail their program at once (exit 1, alive)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernels: list[_Kernel] = []

    def _start(self, run: Any) -> Any:
        self.kernels.append(_Kernel())
        return self.kernels[-1]

    def _execute(self, run: Any, handle: Any, cell: str) -> tuple[int, bool]:
        return 1, True


def test_a_kernel_kept_for_post_mortem_leaves_the_dispatcher_when_its_timer_ends(tmp_path):
    exits: list = []
    forgotten = threading.Event()
    made: list[_FailingKernels] = []

    def kernel(sink: Any, ended: Any) -> Runner:
        made.append(_FailingKernels(log_sink=sink, on_exit=ended))
        return made[-1]

    runner = DispatchingRunner(
        log_sink=lambda records: None,
        on_exit=lambda aid, code: exits.append((aid, code)),
        process=lambda sink, ended: FakeRunner("process", sink, ended),
        kernel=kernel,
    )
    # Heard after the dispatcher's own listener (made with the runner): set once the record
    # is gone.
    runner.runner("kernel").on_released(lambda aid: forgotten.set())
    config = {"entrypoint": "python3 train.py", "environment": {"kernel": {"keep_alive": 0.05}}}
    runner.launch(LaunchSpec("trial-6.1", 1, ["true"], {}, tmp_path, config=config))
    assert forgotten.wait(30), "the kept kernel was never let go of"
    assert made[0].kernels[0].shut_down.is_set()
    assert exits == [("trial-6.1", 1)]
    assert not runner.holds("trial-6.1")
    assert runner.owner("trial-6.1") is not made[0]


def test_a_run_that_failed_to_launch_is_owned_by_nobody():
    runner, made, _ = dispatcher()
    runner.runner("container").fail_launch = True  # type: ignore[attr-defined]
    with pytest.raises(OSError):
        runner.launch(spec("trial-2.1", image="img:1"))
    runner.kill("trial-2.1")
    assert made["process"].calls == [("kill", "trial-2.1")]


def test_a_kind_without_a_runner_falls_to_the_process_runner():
    made: list[FakeRunner] = []

    def process(sink: Any, ended: Any) -> Runner:
        made.append(FakeRunner("process", sink, ended))
        return made[-1]

    runner = DispatchingRunner(log_sink=lambda r: None, on_exit=lambda a, c: None, process=process)
    # It refuses images at submit (the base config_problems), and would run the rest.
    assert runner.config_problems({"environment": {"image": "img:1"}})
    runner.launch(spec("trial-1.1", image="img:1"))
    assert made[0].calls == [("launch", "trial-1.1")]


def test_kind_of():
    assert kind_of(None, None) == "process"
    assert kind_of("img", {}) == "container"
    assert kind_of("img", {"environment": {"kernel": {"spec": "python3"}}}) == "kernel"


def test_terminate_with_grace_kills_only_a_run_still_running():
    killed = threading.Event()
    assert terminate_with_grace(lambda: True, lambda: True, killed.set, 0.0)
    assert killed.wait(10)
    assert not terminate_with_grace(lambda: False, lambda: True, killed.set, 0.0)

    # A run that ended within the grace is not killed: the timer's check says so.
    checked = threading.Event()
    calls: list[str] = []

    def still_running() -> bool:
        checked.set()
        return False

    assert terminate_with_grace(lambda: True, still_running, lambda: calls.append("kill"), 0.0)
    assert checked.wait(10)
    assert calls == []


def test_the_exit_code_rule():
    assert exit_code_of(0) == 0 and exit_code_of(3) == 3
    assert exit_code_of(-signal.SIGKILL) == 137 and exit_code_of(-signal.SIGTERM) == 143
    assert killed_exit_code(signal.SIGTERM) == 143
    assert signal_of(exit_code_of(-signal.SIGSEGV)) == signal.SIGSEGV


def test_runners_that_cannot_run_as_another_user_say_so():
    runner, _, _ = dispatcher()
    refuse_run_as(runner, spec("trial-1.1"))  # no run_as: nothing to refuse
    asked = LaunchSpec("trial-1.1", 1, ["true"], {}, Path("."), run_as=RunAs(user="alice"))
    with pytest.raises(
        NotImplementedError,
        match="alice.*only process, container and local kernel trials run as their owner",
    ):
        refuse_run_as(runner, asked)
