"""The experiment's progress comes from its searcher; a failing searcher is logged, not fatal."""

import asyncio
import logging

from master_lite._master import Master

CONFIG = {
    "name": "progress",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}},
    "hyperparameters": {},
}


class BrokenProgress:
    def progress(self, trial_progress):
        raise ZeroDivisionError("the searcher's progress is broken")


def test_a_failing_searcher_progress_is_logged_with_the_experiment_id(tmp_path, caplog):
    async def body() -> int:
        master = Master(tmp_path / "root", cpu_slots=1, gpus=[])
        await master.start("http://127.0.0.1:9")
        try:
            exp = master.experiments.create_experiment(CONFIG, None, activate=False)
            before = master.views.get_experiment(exp["id"])["progress"]
            # The searchers part is wiring, not the facade's: reach it as the wiring does.
            master._searchers.add(exp["id"], BrokenProgress())
            with caplog.at_level(logging.WARNING, logger="master_lite"):
                master.experiments.update_progress(exp["id"])
            assert master.views.get_experiment(exp["id"])["progress"] == before
            return exp["id"]
        finally:
            await master.stop(pause_running=False)

    exp_id = asyncio.run(asyncio.wait_for(body(), 60))
    [record] = [r for r in caplog.records if "progress()" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(f"experiment {exp_id}: the searcher's progress() failed")
    assert "the searcher's progress is broken" in caplog.text  # with the traceback
