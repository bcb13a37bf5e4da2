"""A deployment's own runner plugs in through one `MasterLite.<kind>_runner_class` trait (a
traitlets Type) per kind: the master launches, signals and hears exits through the `Runner`
seam only, and replacing one kind keeps the others. `runner_class` is the deprecated name of
`process_runner_class`."""

from __future__ import annotations

import asyncio

import pytest
from traitlets import TraitError
from traitlets.config import Config

from master_lite import MasterLite
from master_lite.runners import (
    ContainerRunner,
    DispatchingRunner,
    KernelRunner,
    LaunchSpec,
    LocalRunner,
    Runner,
)
from tests._support import tar_gz, wait_until_async

TRAIN = b"print('trained by the recording runner')\n"


class RecordingRunner(LocalRunner):
    """Local processes, and a record of what the master asked for."""

    calls: list[tuple[str, str]] = []

    def launch(self, spec: LaunchSpec) -> int:
        RecordingRunner.calls.append(("launch", spec.allocation_id))
        return super().launch(spec)

    def close(self) -> None:
        RecordingRunner.calls.append(("close", ""))
        super().close()


@pytest.mark.slow
@pytest.mark.parametrize("trait", ["process_runner_class", "runner_class"])
def test_a_configured_runner_class_runs_the_trials(tmp_path, trait):
    RecordingRunner.calls = []
    app = MasterLite(
        config=Config(
            {
                "MasterLite": {
                    "root_dir": str(tmp_path / "root"),
                    trait: f"{__name__}.RecordingRunner",
                }
            }
        )
    )
    assert getattr(app, trait) is RecordingRunner
    master = app.build_master()

    async def body() -> None:
        await master.start("http://127.0.0.1:9")
        try:
            runner = master.runner
            assert isinstance(runner, DispatchingRunner)
            assert isinstance(runner.runner("process"), RecordingRunner)
            # Replacing the process runner keeps the container and kernel runners.
            assert type(runner.runner("container")) is ContainerRunner
            assert type(runner.runner("kernel")) is KernelRunner
            config = {
                "name": "seam",
                "entrypoint": "python3 train.py",
                "max_restarts": 0,
                "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
            }
            created = master.experiments.create_experiment(config, tar_gz({"train.py": TRAIN}))
            exp_id = created["id"]
            await wait_until_async(
                lambda: master.views.get_experiment(exp_id)["state"] == "COMPLETED",
                60,
                "the experiment to complete",
            )
            (trial,) = master.views.list_trials(exp_id)
            lines = [entry["line"] for entry in master.logs.get_logs(trial["id"], stream="stdout")]
            assert "trained by the recording runner" in "".join(lines)
            assert RecordingRunner.calls == [("launch", f"trial-{trial['id']}.1")]
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 120))
    assert RecordingRunner.calls[-1] == ("close", "")


class OwnContainers(ContainerRunner):
    """A deployment's container runner (nothing of its own: its type is what is checked)."""


def test_replacing_the_container_runner_keeps_the_process_and_kernel_runners(tmp_path):
    app = MasterLite(
        root_dir=str(tmp_path / "root"), container_runner_class=f"{__name__}.OwnContainers"
    )
    master = app.build_master()

    async def body() -> None:
        await master.start("http://127.0.0.1:9")
        try:
            assert type(master.runner.runner("container")) is OwnContainers
            assert type(master.runner.runner("process")) is LocalRunner
            assert type(master.runner.runner("kernel")) is KernelRunner
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 60))


@pytest.mark.parametrize(
    "trait",
    [
        "runner_class",
        "process_runner_class",
        "container_runner_class",
        "kernel_runner_class",
        "ray_runner_class",
    ],
)
def test_runner_class_must_be_a_runner(tmp_path, trait):
    with pytest.raises(TraitError, match=trait):
        MasterLite(root_dir=str(tmp_path), **{trait: dict})
    assert issubclass(LocalRunner, Runner)


def test_runners_written_against_the_old_scheduler_names_still_import():
    import master_lite.runners as runners
    import master_lite.scheduler as scheduler

    for name in ("Runner", "LaunchSpec", "LocalRunner", "ContainerRunner", "KernelRunner"):
        assert getattr(scheduler, name) is getattr(runners, name)
    with pytest.raises(AttributeError):
        scheduler.NoSuchName  # noqa: B018
