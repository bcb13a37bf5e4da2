"""What trial runs report and ask: metrics, logs, searcher ops, preemption, checkpoints.

A mixin of `Master` (kept apart only to keep files small); see `_master.py`.
"""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

from determined.common.states import TERMINAL_TRIAL_STATES, CheckpointState
from master_lite import _reports, _serialize, errors
from master_lite._lifecycle import searcher_module

EARLY_EXIT_REASONS = {
    "EXITED_REASON_INVALID_HP": "INVALID_HP",
    "INVALID_HP": "INVALID_HP",
    "EXITED_REASON_USER_REQUESTED_STOP": "USER_REQUESTED_STOP",
    "USER_REQUESTED_STOP": "USER_REQUESTED_STOP",
}


class TrialReports:
    # -- metrics and logs ---------------------------------------------------------------------
    def get_logs(
        self,
        trial_id: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        tail: int | None = None,
        rank: int | None = None,
        stream: str | None = None,
    ) -> list[dict]:
        self._trial_row(trial_id)
        rows = self.store.logs.lines(
            trial_id, after_id=after_id, limit=limit, tail=tail, rank=rank, stream=stream
        )
        return [_serialize.log_json(row) for row in rows]

    def report_metrics(self, trial_id: int, reports: list[dict]) -> int:
        trial = self._trial_row(trial_id)
        rows = _reports.normalize_metric_reports(
            reports, trial_id=trial["id"], default_run_id=trial["run_id"]
        )
        if not rows:
            return 0
        accepted = len(rows)
        metric_name, smaller_is_better = self._searcher_metric(trial["experiment_id"])
        changes: dict[str, Any] = {}
        # Stored and heard by the searcher in one transaction: after a crash either both
        # happened or neither did (the resumed run reports it again).
        with self._atomic():
            # A resumed run redoing steps an earlier run reported replaces those reports
            # instead of duplicating them (docs/fault-tolerance.md).
            ids, superseded = self.store.insert_current_metrics(trial["id"], rows)
            rows = [row for row, metric_id in zip(rows, ids, strict=False) if metric_id is not None]
            for metric_id, row in zip([i for i in ids if i is not None], rows, strict=False):
                row["id"] = metric_id
                if row["group"] == "training":
                    changes["latest_training_id"] = metric_id
                elif row["group"] == "validation":
                    changes["latest_validation_id"] = metric_id
            if trial["best_validation_id"] in superseded:  # rare: recount from scratch
                changes["best_validation_id"] = self._best_validation_id(
                    trial["id"], metric_name, smaller_is_better
                )
            elif any(row["group"] == "validation" for row in rows):
                best_id, best_value = trial["best_validation_id"], None
                if best_id is not None:
                    best_row = self.store.metrics.by_id(best_id)
                    best_value = (
                        _reports.metric_value(best_row["metrics"], metric_name)
                        if best_row
                        else None
                    )
                for row in rows:
                    value = (
                        _reports.metric_value(row["metrics"], metric_name)
                        if row["group"] == "validation"
                        else None
                    )
                    if value is not None and (
                        best_value is None
                        or (value < best_value if smaller_is_better else value > best_value)
                    ):
                        best_id, best_value = row["id"], value
                changes["best_validation_id"] = best_id
            changes["steps_completed"] = max(
                [trial["steps_completed"]] + [row["steps_completed"] for row in rows]
            )
            self.store.update("trials", trial["id"], **changes)
            validations = [
                ("on_validation_reported", (trial["request_id"], row["metrics"]))
                for row in rows
                if row["group"] == "validation"
            ]
            if validations:
                self._searcher_events(trial["experiment_id"], validations)
        if self.events.has_subscribers("metric"):
            for row in rows:
                self.events.publish("metric", _serialize.metric_json(row))
        self._publish_trial(trial["id"])
        # The experiment's best validation is derived from its trials' best: listeners of
        # experiment events (the sidebar's list) must hear when it moves.
        if (
            changes.get("best_validation_id", trial["best_validation_id"])
            != trial["best_validation_id"]
        ):
            self._publish_experiment(trial["experiment_id"])
        return accepted

    def _searcher_metric(self, experiment_id: int) -> tuple[str | None, bool]:
        """(searcher.metric, smaller_is_better) of an experiment. Read once per experiment, not
        per report (an experiment's config never changes once created)."""
        cache: dict[int, tuple[str | None, bool]] = self.__dict__.setdefault(
            "_searcher_metric_cache", {}
        )
        cached = cache.get(experiment_id)
        if cached is None:
            config = self.store.get("experiments", experiment_id)["config"]
            searcher_config = config.get("searcher") or {}
            cached = (
                searcher_config.get("metric"),
                bool(searcher_config.get("smaller_is_better", True)),
            )
            cache[experiment_id] = cached
        return cached

    def _best_validation_id(
        self, trial_id: int, metric_name: str | None, smaller_is_better: bool
    ) -> int | None:
        """The trial's current validation report with the best searcher metric (the earliest
        of equals)."""
        best_id, best_value = None, None
        for row in self.store.metrics.validations(trial_id):
            value = _reports.metric_value(row["metrics"], metric_name)
            if value is not None and (
                best_value is None
                or (value < best_value if smaller_is_better else value > best_value)
            ):
                best_id, best_value = row["id"], value
        return best_id

    def report_progress(self, trial_id: int, progress: float) -> None:
        trial = self._trial_row(trial_id)
        try:
            value = float(progress)
        except (TypeError, ValueError) as exc:
            raise errors.InvalidRequest(f"progress: expected a number, got {progress!r}") from exc
        self.store.update("trials", trial["id"], progress=max(0.0, min(1.0, value)))
        self._update_experiment_progress(trial["experiment_id"])
        self._publish_trial(trial["id"])
        self._publish_experiment(trial["experiment_id"])

    def set_runner_state(self, trial_id: int, state: str) -> None:
        trial = self._trial_row(trial_id)
        self.store.update("trials", trial["id"], runner_state=str(state or ""))
        self._publish_trial(trial["id"])

    def report_early_exit(self, trial_id: int, reason: str) -> None:
        trial = self._trial_row(trial_id)
        normalized = EARLY_EXIT_REASONS.get(str(reason))
        if normalized is None:
            raise errors.InvalidRequest(
                f"reason: unknown early exit reason {reason!r}; expected "
                "EXITED_REASON_INVALID_HP or "
                "EXITED_REASON_USER_REQUESTED_STOP"
            )
        if trial["early_exit"]:
            raise errors.InvalidRequest(
                f"trial {trial_id} already reported an early exit ({trial['early_exit']})"
            )
        self.store.update("trials", trial["id"], early_exit=normalized)
        if normalized == "INVALID_HP":
            self._searcher_event(
                trial["experiment_id"],
                "on_trial_exited_early",
                trial["request_id"],
                searcher_module().ExitedReason.INVALID_HP,
            )

    # -- searcher operations (≤0.37 protocol) -------------------------------------------------
    async def next_operation(self, trial_id: int, timeout: float) -> dict:
        """The trial's current op, or `{completed: true}` when it has none.

        Searchers answer every event at once (a Create comes with its first ValidateAfter, a
        completed op with the promotion or nothing), so an empty queue means "nothing for you
        now": the process exits (after acknowledging, see the harness's `operations()`) and
        frees its slots. If the searcher later hands the trial another op (an ASHA promotion)
        the master starts it again from its latest checkpoint. `timeout` is accepted for the
        long-poll contract; no answer needs to wait."""
        trial = self._trial_row(trial_id)
        if trial["stop_requested"]:  # early-stopped: whatever was queued will not run
            return {"completed": True, "op": None}
        if trial["op_queue"] and trial["state"] not in TERMINAL_TRIAL_STATES:
            return {
                "completed": False,
                "op": {"validateAfter": {"length": str(trial["op_queue"][0])}},
            }
        return {"completed": True, "op": None}

    def complete_operation(self, trial_id: int, length: int, metric: Any) -> None:
        trial = self._trial_row(trial_id)
        try:
            length = int(length)
        except (TypeError, ValueError) as exc:
            raise errors.InvalidRequest(f"op.length: expected an integer, got {length!r}") from exc
        if length not in trial["op_queue"]:
            raise errors.InvalidRequest(
                f"trial {trial_id} has no pending operation of length {length} "
                f"(pending: {trial['op_queue'] or 'none'})"
            )
        if isinstance(metric, bool) or not isinstance(metric, (int, float)):
            raise errors.InvalidRequest(f"searcherMetric: expected a number, got {metric!r}")
        queue = list(trial["op_queue"])
        queue.remove(length)
        with self._atomic():  # the op is done exactly when the searcher has heard of it
            self.store.update("trials", trial["id"], op_queue=queue)
            self._searcher_event(
                trial["experiment_id"],
                "on_validation_completed",
                trial["request_id"],
                float(metric),
                length,
            )
        self._notify(("trial", trial["id"]))

    def best_validation(self, exp_id: int) -> float | None:
        return self._best_validation(self._experiment_row(exp_id))

    def _best_validation(self, experiment: dict) -> float | None:
        searcher_config = experiment["config"].get("searcher") or {}
        metric_name = searcher_config.get("metric")
        if not metric_name:
            return None
        rows = self.store.metrics.best_validations(experiment["id"])
        values = [
            v
            for v in (_reports.metric_value(r["metrics"], metric_name) for r in rows)
            if v is not None
        ]
        if not values:
            return None
        return min(values) if searcher_config.get("smaller_is_better", True) else max(values)

    # -- preemption ---------------------------------------------------------------------------
    def _allocation_row(self, allocation_id: str) -> dict:
        row = self.store.get("allocations", allocation_id)
        if row is None:
            raise errors.NotFound(f"allocation {allocation_id} not found")
        return row

    async def wait_preemption(self, allocation_id: str, timeout: float) -> bool:
        deadline = self._loop.time() + max(float(timeout), 0.0)
        while True:
            allocation = self._allocations.get(allocation_id)
            if allocation is None:
                self._allocation_row(allocation_id)  # NotFound for unknown ids
                return True  # the run is over: whoever still asks should stop
            if allocation["preempt"]:
                return True
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return False
            await self._wait_changed(("allocation", allocation_id), remaining)

    def ack_preemption(self, allocation_id: str) -> None:
        self._allocation_row(allocation_id)
        allocation = self._allocations.get(allocation_id)
        if allocation is not None:
            allocation["acked"] = True
        self.store.update("allocations", allocation_id, preempt_acked=1)

    # -- checkpoints --------------------------------------------------------------------------
    def report_checkpoint(self, record: dict) -> dict:
        from determined.common import storage

        uuid = record.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise errors.InvalidRequest("uuid: required (a string)", ["uuid: required"])
        if uuid in (".", "..") or any(c in uuid for c in "/\\\0"):
            # It names a directory of the checkpoint storage that GC may later delete.
            raise errors.InvalidRequest(
                f"uuid: {uuid!r} is not a plain directory name",
                [f"uuid: {uuid!r} is not a plain directory name"],
            )
        metadata = record.get("metadata")
        if not isinstance(metadata, dict) or not isinstance(metadata.get("steps_completed"), int):
            raise errors.InvalidRequest(
                "metadata.steps_completed: required (an integer); report the number of batches "
                "trained when this checkpoint was saved",
                ["metadata.steps_completed: required"],
            )
        trial_id = record.get("trial_id", record.get("trialId"))
        allocation_id = record.get("allocation_id", record.get("allocationId"))
        if trial_id is None and allocation_id:
            trial_id = self._allocation_row(allocation_id)["trial_id"]
        if trial_id is None:
            raise errors.InvalidRequest("trialId: required", ["trialId: required"])
        trial = self._trial_row(int(trial_id))
        config = self.store.get("experiments", trial["experiment_id"])["config"]
        path = storage.checkpoint_dir(config["checkpoint_storage"], uuid)
        resources = record.get("resources") or {}
        try:
            report_time = (
                _serialize.parse_time(record.get("report_time", record.get("reportTime")))
                or time.time()
            )
        except ValueError:
            report_time = time.time()
        with self.store.transaction():
            self.store.checkpoints.put(
                {
                    "uuid": uuid,
                    "trial_id": trial["id"],
                    "experiment_id": trial["experiment_id"],
                    "allocation_id": allocation_id,
                    "steps_completed": metadata["steps_completed"],
                    "metadata": metadata,
                    "resources": resources,
                    "state": str(CheckpointState.COMPLETED),
                    "report_time": report_time,
                    "path": str(path),
                }
            )
            self.store.update("trials", trial["id"], latest_checkpoint=uuid)
        checkpoint = self.get_checkpoint(uuid)
        self.events.publish("checkpoint", checkpoint)
        self._publish_trial(trial["id"])
        return checkpoint

    def _checkpoint_json(self, row: dict) -> dict:
        validation = self.store.metrics.validation_at(row["trial_id"], row["steps_completed"])
        return _serialize.checkpoint_json(
            row, validation_metrics=validation["metrics"] if validation else None
        )

    def get_checkpoint(self, uuid: str) -> dict:
        row = self.store.get("checkpoints", uuid, key_column="uuid")
        if row is None:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        return self._checkpoint_json(row)

    def list_checkpoints(
        self,
        *,
        experiment_id: int | None = None,
        trial_id: int | None = None,
        state: str | None = None,
    ) -> list[dict]:
        if experiment_id is not None:
            self._experiment_row(experiment_id)
        if trial_id is not None:
            self._trial_row(trial_id)
        rows = self.store.checkpoints.matching(
            experiment_id=experiment_id, trial_id=trial_id, state=state
        )
        return [self._checkpoint_json(row) for row in rows]

    def checkpoint_archive(self, uuid: str) -> bytes:
        checkpoint = self.get_checkpoint(uuid)
        path = Path(checkpoint["path"])
        if checkpoint["state"] != CheckpointState.COMPLETED or not path.is_dir():
            raise errors.NotFound(
                f"checkpoint {uuid} has no files at {path} (state {checkpoint['state']})"
            )
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for item in sorted(path.rglob("*")):
                tar.add(item, arcname=str(item.relative_to(path)), recursive=False)
        return buffer.getvalue()

    def mark_checkpoints_deleted(self, items: list[dict]) -> None:
        for item in items:
            uuid = item.get("uuid") if isinstance(item, dict) else None
            if not uuid:
                raise errors.InvalidRequest("checkpoints[].uuid: required")
            self.get_checkpoint(uuid)
        with self.store.transaction():
            for item in items:
                changes: dict[str, Any] = {"state": str(CheckpointState.DELETED)}
                if item.get("resources") is not None:
                    changes["resources"] = item["resources"]
                self.store.update("checkpoints", item["uuid"], key_column="uuid", **changes)


__all__ = ["TrialReports", "EARLY_EXIT_REASONS"]
