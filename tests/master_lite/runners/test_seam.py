"""A deployment's own runner plugs in through `MasterLite.runner_class` (a traitlets Type):
the master launches, signals and hears exits through the `Runner` seam only."""

from __future__ import annotations

import asyncio

import pytest
from traitlets import TraitError
from traitlets.config import Config

from master_lite import MasterLite
from master_lite.scheduler import LaunchSpec, LocalRunner, Runner
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
def test_a_configured_runner_class_runs_the_trials(tmp_path):
    RecordingRunner.calls = []
    app = MasterLite(
        config=Config(
            {
                "MasterLite": {
                    "root_dir": str(tmp_path / "root"),
                    "runner_class": f"{__name__}.RecordingRunner",
                }
            }
        )
    )
    assert app.runner_class is RecordingRunner
    master = app.build_master()

    async def body() -> None:
        await master.start("http://127.0.0.1:9")
        try:
            assert isinstance(master.runner, RecordingRunner)
            config = {
                "name": "seam",
                "entrypoint": "python3 train.py",
                "max_restarts": 0,
                "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
            }
            created = master.create_experiment(config, tar_gz({"train.py": TRAIN}))
            exp_id = created["id"]
            await wait_until_async(
                lambda: master.get_experiment(exp_id)["state"] == "COMPLETED",
                60,
                "the experiment to complete",
            )
            (trial,) = master.list_trials(exp_id)
            lines = [entry["line"] for entry in master.get_logs(trial["id"], stream="stdout")]
            assert "trained by the recording runner" in "".join(lines)
            assert RecordingRunner.calls == [("launch", f"trial-{trial['id']}.1")]
        finally:
            await master.stop(pause_running=False)

    asyncio.run(asyncio.wait_for(body(), 120))
    assert RecordingRunner.calls[-1] == ("close", "")


def test_runner_class_must_be_a_runner(tmp_path):
    with pytest.raises(TraitError, match="runner_class"):
        MasterLite(root_dir=str(tmp_path), runner_class=dict)
    assert issubclass(LocalRunner, Runner)
