"""Issue 26, row 4: no input stalls the master's event loop, and a busy loop ends no live run.

A context of many files takes seconds to check and to unpack: that work runs in worker threads,
so the loop keeps answering. Each test holds the file work until the loop has shown it still
runs (a probe request answered, a ticker's ticks counted): were the work on the loop thread,
the loop could not answer, and the test fails on the order of events (its waits time out only
as a guard). Leases: a stall of the loop (heartbeats queued behind it) never ends a live run.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from pathlib import Path

import pytest
import requests

from determined.common.states import TrialState
from master_lite import MasterLite
from master_lite._master._wiring import Parts
from master_lite.runs import Contexts
from master_lite.unmanaged import UnmanagedRuns
from tests._support.context import tar_gz
from tests._support.parts import FakeRunner, run_with_parts, settle

# Empty files: the member count, not the bytes, is what costs (100k such files gzip to ~1 MiB).
MANY_FILES = {f"data/{index:05d}.txt": "" for index in range(5000)}
GUARD_SECONDS = 30  # a hung test fails after this; nothing is timed against it
CONFIG = {
    "name": "many-files",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


class Gate:
    """Holds a file-work method of Contexts until the test opens it; records which thread ran
    it and that it started."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.started = threading.Event()
        self.opened = threading.Event()
        self.threads: list[int] = []
        original = getattr(Contexts, name)

        def gated(contexts: Contexts, *args: object) -> object:
            self.threads.append(threading.get_ident())
            self.started.set()
            # On the loop thread this wait would hold the loop: the test could not open it.
            self.opened.wait(GUARD_SECONDS)
            return original(contexts, *args)

        monkeypatch.setattr(Contexts, name, gated)


@pytest.mark.slow  # a real master, in this process
def test_the_master_answers_while_a_many_file_context_is_checked(tmp_path, monkeypatch):
    gate = Gate(monkeypatch, "check_and_write")
    app = MasterLite(root_dir=str(tmp_path / "root"), port=0, cpu_slots=1)
    context = base64.b64encode(tar_gz({**MANY_FILES, "train.py": "pass\n"})).decode()
    events: list[str] = []

    async def scenario() -> None:
        url = await app.start()
        headers = {"Authorization": f"Bearer {app.master.user_token}"}
        try:
            post = asyncio.ensure_future(
                asyncio.to_thread(
                    requests.post,
                    f"{url}/api/v1/experiments",
                    json={"config": CONFIG, "context": context, "activate": False},
                    headers=headers,
                    timeout=2 * GUARD_SECONDS,
                )
            )
            await asyncio.to_thread(gate.started.wait, GUARD_SECONDS)
            events.append("check started")
            probe = await asyncio.to_thread(
                requests.get, f"{url}/api/v1/master", headers=headers, timeout=GUARD_SECONDS
            )
            events.append(f"probe answered {probe.status_code}")
            events.append("post done" if post.done() else "post pending")
            gate.opened.set()
            answer = await post
            events.append(f"post answered {answer.status_code}")
            experiment = answer.json()["experiment"]
            assert experiment["state"] == "PAUSED"
        finally:
            gate.opened.set()
            await app.stop()

    asyncio.run(scenario())
    assert events == [
        "check started",
        "probe answered 200",
        "post pending",
        "post answered 201",
    ]
    assert threading.main_thread().ident not in gate.threads  # the loop ran in the main thread


def test_a_trial_launch_unpacks_a_many_file_context_off_the_loop(tmp_path, monkeypatch):
    gate = Gate(monkeypatch, "unpack_file")
    context = tar_gz({**MANY_FILES, "train.py": "pass\n"})

    async def body(parts: Parts, runner: FakeRunner) -> None:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticking = asyncio.ensure_future(ticker())
        try:
            experiment = await parts.experiments.submit_experiment(CONFIG, context)
            await asyncio.to_thread(gate.started.wait, GUARD_SECONDS)
            assert gate.started.is_set()
            # The slots are granted, the context unpacks: nothing launched yet, the loop ticks.
            before = ticks
            await settle(lambda: ticks >= before + 100, GUARD_SECONDS)
            assert runner.launched == []
            trial = parts.views.list_trials(experiment["id"])[0]
            gate.opened.set()
            await settle(lambda: len(runner.launched) == 1, GUARD_SECONDS)
            launched = runner.launched[0]
            assert launched.trial_id == trial["id"]
            assert (launched.work_dir / "train.py").read_text() == "pass\n"
            assert len(list((launched.work_dir / "data").iterdir())) == len(MANY_FILES)
        finally:
            gate.opened.set()
            ticking.cancel()

    run_with_parts(tmp_path / "root", body, hang_limit=3 * GUARD_SECONDS)
    assert threading.main_thread().ident not in gate.threads


def test_a_trial_killed_while_its_context_unpacks_is_not_launched(tmp_path, monkeypatch):
    gate = Gate(monkeypatch, "unpack_file")
    context = tar_gz({**MANY_FILES, "train.py": "pass\n"})

    async def body(parts: Parts, runner: FakeRunner) -> None:
        experiment = await parts.experiments.submit_experiment(CONFIG, context)
        await asyncio.to_thread(gate.started.wait, GUARD_SECONDS)
        assert gate.started.is_set()
        parts.experiments.experiment_action(experiment["id"], "kill")
        gate.opened.set()
        trial = parts.views.list_trials(experiment["id"])[0]
        # Until the unpack's end is handled on the loop (the runs part's own record of it).
        await settle(lambda: not parts.runs._preparing, GUARD_SECONDS)
        assert runner.launched == []
        assert parts.views.trial_row(trial["id"]).state == TrialState.CANCELED
        # Its slots are free again: nothing holds them.
        assert parts.runs.scheduler.granted() == {}

    run_with_parts(tmp_path / "root", body, hang_limit=3 * GUARD_SECONDS)


class FakeClock:
    """Wall-clock time the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


RUN = {
    "name": "in-kernel",
    "searcher": {"metric": "loss"},
    "external_experiment_id": "busy-loop",
    "external_trial_id": "trial-1",
    "lease_seconds": 10,
}


def test_a_live_run_survives_a_busy_loop_and_a_dead_one_still_expires(tmp_path: Path) -> None:
    async def body(parts: Parts, runner: FakeRunner) -> None:
        clock = FakeClock()
        runs = UnmanagedRuns(
            parts.shared,
            views=parts.views,
            logs=parts.logs,
            experiments=parts.experiments,
            clock=clock,
        )
        trial_id = runs.open_run(RUN)["trial_id"]

        def ticks(seconds: float) -> None:
            """The loop runs `seconds`, ticking every half second."""
            for _ in range(int(seconds * 2)):
                clock.now += 0.5
                runs.observe_loop()

        ticks(5)
        runs.heartbeat(trial_id)
        # The loop is busy for 53 s (a request's work): the kernel's heartbeats wait in its
        # queue. When it comes back, the lease timer may run before them.
        clock.now += 53
        runs.observe_loop()
        assert runs.expire_leases() == []
        runs.heartbeat(trial_id)  # the queued heartbeat, answered
        assert parts.views.trial_row(trial_id).state == TrialState.ACTIVE

        # Busy again, and this time the kernel is dead: it gets a full lease period of a
        # responsive loop, then its trial ends as ERROR.
        clock.now += 53
        runs.observe_loop()
        ticks(9.5)
        assert runs.expire_leases() == []
        ticks(1)
        assert runs.expire_leases() == [trial_id]
        assert parts.views.trial_row(trial_id).state == TrialState.ERROR
        runs.stop()

    run_with_parts(tmp_path / "root", body)


def test_a_large_unsafe_context_is_refused_by_the_child_check(tmp_path: Path) -> None:
    import tarfile

    from master_lite import errors

    evil = tarfile.TarInfo("../outside.txt")
    evil.size = 1
    context = tar_gz(MANY_FILES, members=[(evil, b"x")])

    async def body(parts: Parts, runner: FakeRunner) -> None:
        with pytest.raises(errors.InvalidRequest, match="contains '..'"):
            await parts.experiments.submit_experiment(CONFIG, context)
        assert parts.views.list_experiments() == []
        # Nothing stored under the contexts, not even the partial file.
        assert list((tmp_path / "root" / "contexts").iterdir()) == []
        assert not (tmp_path / "outside.txt").exists()

    run_with_parts(tmp_path / "root", body)
