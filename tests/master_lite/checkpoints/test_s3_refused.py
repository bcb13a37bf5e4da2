"""A store that refuses the master's keys: deleting a checkpoint says why, naming
the bucket and the store's reason and never the keys; the checkpoint stays COMPLETED, so a later
GC or a retry can still delete it; the download says why too."""

from __future__ import annotations

import asyncio

import pytest

from master_lite import errors
from master_lite._master import Master
from tests._support.s3_server import start_s3_server

pytestmark = pytest.mark.slow

UUID = "00000000-0000-4000-8000-000000000001"


def test_refused_keys_are_named_by_delete_and_download(tmp_path):
    with start_s3_server(log_dir=str(tmp_path), refuse_all_keys=True) as server:
        storage_config = server.storage_config("ckpts", prefix="p")

        async def body() -> None:
            master = Master(tmp_path / "root", cpu_slots=1, gpus=[])
            await master.start("http://127.0.0.1:9")
            try:
                config = {
                    "name": "refused",
                    "entrypoint": "python3 -c pass",
                    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
                    "checkpoint_storage": storage_config,
                }
                exp_id = master.experiments.create_experiment(config, None, activate=False)["id"]
                (trial,) = master.views.list_trials(exp_id)
                master.checkpoints.report_checkpoint(
                    {"uuid": UUID, "trialId": trial["id"], "metadata": {"steps_completed": 1}}
                )
                master.checkpoints.report_checkpoint(  # the trial's latest now: UUID is not
                    {
                        "uuid": UUID.replace("1", "2"),
                        "trialId": trial["id"],
                        "metadata": {"steps_completed": 2},
                    }
                )
                with pytest.raises(errors.MasterError) as info:
                    master.delete_checkpoint(UUID)
                message = str(info.value)
                assert "bucket 'ckpts'" in message and "InvalidAccessKeyId" in message, message
                assert master.checkpoints.get_checkpoint(UUID)["state"] == "COMPLETED"
                with pytest.raises(errors.MasterError, match="InvalidAccessKeyId"):
                    master.checkpoints.checkpoint_archive(UUID)
                for secret in (server.secret_key, server.access_key):
                    assert secret not in message
                    log = (tmp_path / "root").rglob("*.log")
                    assert not any(secret in p.read_text(errors="replace") for p in log)
            finally:
                await master.stop(pause_running=False)

        asyncio.run(asyncio.wait_for(body(), 60))
