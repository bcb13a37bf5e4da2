"""The checkpoints part places a container trial's reported checkpoint from its view into the
storage (runners/container/_storage.py), over the real parts and store."""

from __future__ import annotations

import asyncio
import os
import uuid as uuid_module
from pathlib import Path

import pytest

from determined.common import storage
from master_lite import errors
from master_lite.runners.container import trial_view_dir
from tests._support.parts import SINGLE, started_parts


def _save(view: Path) -> str:
    uuid = str(uuid_module.uuid4())
    (view / uuid).mkdir(parents=True)
    (view / uuid / "metadata.json").write_text("{}")
    (view / uuid / "state").write_text("saved")
    return uuid


def test_a_container_trials_report_places_its_files_and_no_other_trials(tmp_path) -> None:
    async def body() -> None:
        async with started_parts(tmp_path / "root") as (parts, _):
            first = parts.experiments.create_experiment(SINGLE, None)
            second = parts.experiments.create_experiment(SINGLE, None)
            [owner] = parts.views.list_trials(first["id"])
            [other] = parts.views.list_trials(second["id"])
            config = parts.views.experiment_row(first["id"]).config
            base = storage.checkpoint_base(config["checkpoint_storage"])
            label = str(Path(parts.shared.root_dir).absolute())
            view = trial_view_dir(base, label, owner["id"])
            uuid = _save(view)
            record = {"uuid": uuid, "trial_id": owner["id"], "metadata": {"steps_completed": 3}}
            await parts.checkpoints.place_container_checkpoint(record)
            checkpoint = parts.checkpoints.report_checkpoint(record)
            assert (base / uuid / "state").read_text() == "saved"
            assert os.path.samefile(base / uuid / "state", view / uuid / "state")
            assert checkpoint["uuid"] == uuid

            # Another container trial with a directory of that uuid in its own view: nothing
            # of it reaches the storage, and its report is refused.
            other_view = trial_view_dir(base, label, other["id"])
            (other_view / uuid).mkdir(parents=True)
            (other_view / uuid / "state").write_text("forged")
            forged = {"uuid": uuid, "trial_id": other["id"], "metadata": {"steps_completed": 9}}
            await parts.checkpoints.place_container_checkpoint(forged)
            with pytest.raises(errors.Conflict):
                parts.checkpoints.report_checkpoint(forged)
            assert (base / uuid / "state").read_text() == "saved"

    asyncio.run(asyncio.wait_for(body(), 60))
