"""The SDK's pieces that need no master: errors, enums, checkpoint sorting, the singleton."""

from __future__ import annotations

import pytest

from determined.common import api
from determined.common.api import errors
from determined.common.api._errors import error_for_status
from determined.common.experimental import _util
from determined.common.experimental.checkpoint import (
    Checkpoint,
    CheckpointSortBy,
    CheckpointState,
    rank_checkpoints,
    sort_checkpoints,
)
from determined.experimental import client
from determined.experimental.client import ExperimentState, OrderBy, TrialState

SEARCHER = {"name": "single", "metric": "loss", "smaller_is_better": True}


def checkpoint(uuid: str, steps: int, loss: float | None) -> Checkpoint:
    return Checkpoint._from_json(
        {
            "uuid": uuid,
            "trial_id": 1,
            "experiment_id": 1,
            "steps_completed": steps,
            "metadata": {"steps_completed": steps},
            "state": "COMPLETED",
            "report_time": f"2026-11-22T01:02:0{steps}.000Z",
            "validation_metrics": None if loss is None else {"loss": loss},
        },
        session=None,  # type: ignore[arg-type]
    )


CHECKPOINTS = [checkpoint("a", 1, 0.5), checkpoint("b", 2, None), checkpoint("c", 3, 0.2)]


def uuids(found: list[Checkpoint]) -> list[str]:
    return [c.uuid for c in found]


def test_errors_are_one_hierarchy_under_both_spellings():
    found = error_for_status(404, "experiment 7 not found")
    assert isinstance(found, errors.NotFoundException) and isinstance(found, api.NotFound)
    assert isinstance(found, errors.APIException) and isinstance(found, errors.BadRequestException)
    assert (found.status, found.status_code, found.message) == (404, 404, "experiment 7 not found")
    assert str(found) == "experiment 7 not found"
    assert isinstance(error_for_status(403, "no"), errors.ForbiddenException)
    assert isinstance(error_for_status(401, "no"), errors.UnauthenticatedException)
    conflict = error_for_status(409, "cannot activate", ["a: b"])
    assert type(conflict) is api.APIError and isinstance(conflict, errors.APIException)
    assert str(conflict) == "cannot activate\n  a: b"
    assert issubclass(api.MasterUnreachable, errors.MasterNotFoundException)
    assert issubclass(api.MasterNotFound, errors.MasterNotFoundException)
    assert issubclass(api.MasterNotFound, RuntimeError)
    assert errors.NotFoundException("trial 3 not found").status_code == 404


def test_states_use_determineds_values():
    assert ExperimentState(_util.state_value("COMPLETED")) is ExperimentState.COMPLETED
    assert ExperimentState.COMPLETED.value == "STATE_COMPLETED"
    assert TrialState(_util.state_value("STOPPING_KILLED")) is TrialState.STOPPING_KILLED
    assert _util.master_state(ExperimentState.PAUSED) == "PAUSED"
    assert CHECKPOINTS[0].state is CheckpointState.COMPLETED
    assert OrderBy.ASC is OrderBy.ASCENDING


def test_checkpoints_sort_by_the_searcher_metric_nulls_last():
    assert uuids(sort_checkpoints(CHECKPOINTS, None, None, SEARCHER)) == ["c", "a", "b"]
    bigger = {**SEARCHER, "smaller_is_better": False}
    assert uuids(sort_checkpoints(CHECKPOINTS, None, None, bigger)) == ["a", "c", "b"]
    assert uuids(sort_checkpoints(CHECKPOINTS, "loss", OrderBy.DESC, SEARCHER)) == ["a", "c", "b"]
    assert uuids(sort_checkpoints(CHECKPOINTS, None, None, SEARCHER, max_results=1)) == ["c"]


def test_checkpoints_sort_by_fields():
    by_steps = sort_checkpoints(CHECKPOINTS, CheckpointSortBy.BATCH_NUMBER, OrderBy.DESC, SEARCHER)
    assert uuids(by_steps) == ["c", "b", "a"]
    by_uuid = sort_checkpoints(CHECKPOINTS, CheckpointSortBy.UUID, OrderBy.ASC, SEARCHER)
    assert uuids(by_uuid) == ["a", "b", "c"]
    by_time = sort_checkpoints(CHECKPOINTS, CheckpointSortBy.END_TIME, OrderBy.DESC, SEARCHER)
    assert uuids(by_time) == ["c", "b", "a"]


def test_checkpoint_sort_arguments_are_checked_as_in_determined():
    with pytest.raises(AssertionError, match="both set, or neither"):
        sort_checkpoints(CHECKPOINTS, "loss", None, SEARCHER)
    with pytest.raises(ValueError, match="CheckpointSortBy or str"):
        sort_checkpoints(CHECKPOINTS, 3, OrderBy.ASC, SEARCHER)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="searcher.metric"):
        sort_checkpoints(CHECKPOINTS, None, None, {})


def test_the_latest_and_the_best_follow_one_rule_for_the_sdk_and_the_cli():
    """`rank_checkpoints` is what `Trial.select_checkpoint` and `det trial download` both pick by;
    the searcher is asked only when the caller gave no metric or no direction."""
    asked: list[str] = []

    def searcher() -> dict:
        asked.append("searcher")
        return {**SEARCHER, "smaller_is_better": False}

    def rank(**how) -> list[str]:
        options = {"latest": False, "sort_by": None, "smaller_is_better": None, **how}
        return uuids(rank_checkpoints(CHECKPOINTS, searcher=searcher, **options))

    assert rank(latest=True) == ["c", "b", "a"] and asked == []
    # The searcher's metric and direction (bigger is better here); no metric: last.
    assert rank() == ["a", "c", "b"] and asked == ["searcher"]
    asked.clear()
    assert rank(sort_by="loss", smaller_is_better=True) == ["c", "a", "b"] and asked == []
    # A metric without a direction takes the searcher's direction (Determined's top_checkpoint).
    assert rank(sort_by="loss") == ["a", "c", "b"] and asked == ["searcher"]
    with pytest.raises(ValueError, match="searcher.metric"):
        rank_checkpoints(
            CHECKPOINTS, latest=False, sort_by=None, smaller_is_better=None, searcher=dict
        )


def test_training_metadata_has_determineds_validation_form():
    training = CHECKPOINTS[0].training
    assert training is not None
    assert training.validation_metrics == {"avgMetrics": {"loss": 0.5}, "batchMetrics": []}
    assert CHECKPOINTS[1].training.validation_metrics == {}  # type: ignore[union-attr]
    assert (training.trial_id, training.experiment_id, training.steps_completed) == (1, 1, 1)
    assert CHECKPOINTS[0].task_id == "trial-1"


def test_download_of_a_deleted_checkpoint_is_refused(tmp_path):
    from determined import errors as det_errors

    deleted = checkpoint("d", 1, None)
    deleted.state = CheckpointState.DELETED
    with pytest.raises(det_errors.CheckpointStateException, match="checkpoint d is DELETED"):
        deleted.download(str(tmp_path / "d"))
    unknown = Checkpoint(None, "u")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reload"):
        unknown.download(str(tmp_path / "u"))


def test_no_master_is_reported_with_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("DET_MASTER", raising=False)
    monkeypatch.delenv("DET_MASTER_ADDR", raising=False)
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path))
    monkeypatch.setattr(client, "_determined", None)
    with pytest.raises(errors.MasterNotFoundException, match="no master found"):
        client.get_experiment(1)
    assert client._determined is None
