"""Checkpoint garbage collection after an experiment ends (rules: docs/fault-tolerance.md).

Kept: the union of the `save_experiment_best` best checkpoints of the experiment, the
`save_trial_best` best of each trial and the `save_trial_latest` latest of each trial (numbers
from `checkpoint_storage`). Everything else is deleted from storage and marked DELETED.

A checkpoint's metric is the searcher metric (`searcher.metric`) of the trial's current
validation report with the same `steps_completed` as the checkpoint (the report a resumed run
re-made wins, see docs/fault-tolerance.md). Checkpoints without such a validation rank after
every validated one — like Determined's `ORDER BY searcher_metric NULLS LAST` — so they are kept
as "best" only when a trial has fewer validated checkpoints than `save_trial_best`. Ties go to
the earlier checkpoint (fewer steps, then earlier report). "Latest" is by steps_completed, then
report time.

Never deleted, whatever the counts: a checkpoint some live trial still needs — the
`latest_checkpoint` of any trial that is not finished (in any experiment: it may be a warm-start
source) and the warm-start source of any experiment that is not finished. An experiment whose
GC had to hold such a checkpoint back is collected again when another experiment ends or the
master starts, until nothing is held.

Never deleted either: a checkpoint a model version of the registry names (`model_versions`).
It counts as kept, not held: the experiment's GC is done without it, and deleting the model
version later does not bring it back under the policy (as in Determined).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from determined.common.states import (
    CheckpointState,
)
from master_lite import errors
from master_lite._core import _metric_format, _trash
from master_lite.checkpoints import _buckets
from master_lite.checkpoints._confinement import is_checkpoint_uuid, owned_checkpoint_dir

if TYPE_CHECKING:
    from master_lite.store import CheckpointRow, Store

logger = logging.getLogger("master_lite")


@dataclasses.dataclass(frozen=True)
class GcPolicy:
    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1

    @classmethod
    def from_storage_config(cls, storage: dict | None) -> GcPolicy:
        storage = storage or {}

        def count(key: str, default: int) -> int:
            value = storage.get(key)
            return default if value is None else max(0, int(value))

        return cls(
            save_experiment_best=count("save_experiment_best", 0),
            save_trial_best=count("save_trial_best", 1),
            save_trial_latest=count("save_trial_latest", 1),
        )


def checkpoints_to_keep(
    checkpoints: list[CheckpointRow],
    metrics: dict[str, float | None],
    policy: GcPolicy,
    *,
    smaller_is_better: bool = True,
) -> set[str]:
    """UUIDs to keep among one experiment's `checkpoints` (their uuid, trial_id,
    steps_completed and report_time count); `metrics` maps uuid -> searcher metric (None: unvalidated)."""

    def best_first(checkpoint: CheckpointRow) -> tuple:
        value = metrics.get(checkpoint.uuid)
        signed = 0.0 if value is None else (value if smaller_is_better else -value)
        return (
            value is None,
            signed,
            checkpoint.steps_completed,
            checkpoint.report_time,
            checkpoint.uuid,
        )

    def latest_first(checkpoint: CheckpointRow) -> tuple:
        return (-checkpoint.steps_completed, -checkpoint.report_time, checkpoint.uuid)

    keep: set[str] = set()
    ranked = sorted(checkpoints, key=best_first)
    keep.update(c.uuid for c in ranked[: policy.save_experiment_best])
    by_trial: dict[int, list[CheckpointRow]] = {}
    for checkpoint in checkpoints:
        by_trial.setdefault(checkpoint.trial_id, []).append(checkpoint)
    for trial_checkpoints in by_trial.values():
        keep.update(
            c.uuid for c in sorted(trial_checkpoints, key=best_first)[: policy.save_trial_best]
        )
        keep.update(
            c.uuid for c in sorted(trial_checkpoints, key=latest_first)[: policy.save_trial_latest]
        )
    return keep


class CheckpointCollector:
    """The master's checkpoint GC: owns no state of its own beyond the store's checkpoint rows
    and the experiments' `checkpoint_gc_done` flag. Runs on the event loop thread.

    `on_deleted(uuid)` is called for each checkpoint it deleted (the master publishes it).
    """

    def __init__(
        self,
        store: Store,
        *,
        on_deleted: Callable[[str], None],
        roots: Sequence[Path] | None = None,
    ) -> None:
        self.store = store
        self._on_deleted = on_deleted
        # The master's checkpoint storage roots (resolved); None: wherever the config says
        # (for a collector built outside a master, e.g. in tests of the policy).
        self._roots: Sequence[Path] = roots if roots is not None else (Path("/"),)
        self._last_failure: str | None = None  # why the last bucket deletion failed

    def _checkpoints_in_use(self) -> set[str]:
        return (
            self.store.trials.checkpoints_in_use()
            | self.store.experiments.warm_start_checkpoints_in_use()
        )

    def _checkpoint_metrics(
        self, checkpoints: list[CheckpointRow], metric_name: str | None
    ) -> dict[str, float | None]:
        metrics: dict[str, float | None] = {}
        for checkpoint in checkpoints:
            row = self.store.metrics.validation_at(checkpoint.trial_id, checkpoint.steps_completed)
            metrics[checkpoint.uuid] = (
                _metric_format.comparable_metric_value(row["metrics"], metric_name) if row else None
            )
        return metrics

    def _delete(self, checkpoint: CheckpointRow, storage_config: dict) -> str:
        """Delete one checkpoint's files and mark it DELETED: "deleted"; "refused" for a
        uuid that is not a plain directory name under the storage dir (never rmtree outside
        it, whatever a trial registered); "failed" when the files could not be removed."""
        from determined.common import storage

        if _buckets.is_bucket(storage_config):
            return self._delete_objects(checkpoint, storage_config)
        path = storage.checkpoint_dir(storage_config, checkpoint.uuid)
        base = storage.checkpoint_base(storage_config)
        # The path the master registered (a row without one: where the config puts it).
        recorded = checkpoint.path or str(path)
        owned = owned_checkpoint_dir(recorded, checkpoint.uuid, self._roots)
        if owned is None or owned != path.resolve() or owned.parent != base.resolve():
            # Only a uuid-named directory the master registered under its own storage roots,
            # never a symlink out of them, whatever a run put in its config or record.
            logger.warning(
                "checkpoint GC: refusing to delete %s (uuid %r is not a checkpoint directory "
                "of %s under the master's checkpoint storage %s)",
                path,
                checkpoint.uuid,
                base,
                ", ".join(str(root) for root in self._roots),
            )
            return "refused"
        try:
            _trash.discard(owned)  # gone now, its files removed off the loop
        except FileNotFoundError:
            pass  # already gone (deleted by hand, or by a GC the master died during)
        except OSError as exc:
            logger.warning("checkpoint GC: could not delete %s: %s", path, exc)
            return "failed"
        self.store.checkpoints.mark_deleted(checkpoint.uuid, resources={})
        self._on_deleted(checkpoint.uuid)
        return "deleted"

    def _delete_objects(self, checkpoint: CheckpointRow, storage_config: dict) -> str:
        """`_delete` for a bucket: the objects under `<prefix>/<uuid>/`, nothing else."""
        from determined.common import storage

        if not is_checkpoint_uuid(checkpoint.uuid):
            logger.warning(
                "checkpoint GC: refusing to delete checkpoint %r: not a UUID", checkpoint.uuid
            )
            return "refused"
        try:
            _buckets.delete_objects(storage_config, checkpoint.uuid)
        except (storage.StorageError, ValueError) as exc:
            self._last_failure = str(exc)  # names the bucket and the cause, never the keys
            logger.warning(
                "checkpoint GC: could not delete checkpoint %s: %s", checkpoint.uuid, exc
            )
            return "failed"
        self.store.checkpoints.mark_deleted(checkpoint.uuid, resources={})
        self._on_deleted(checkpoint.uuid)
        return "deleted"

    def delete_checkpoint(self, uuid: str) -> None:
        """A user's deletion of one checkpoint: its files and its record's state.

        Raises:
            NotFound: no such checkpoint.
            Conflict: a live trial needs it (its latest checkpoint or a warm-start source), a
                model version names it, or it is not COMPLETED.
            Forbidden: its directory is not one the master may delete (`_confinement`).
            MasterError: its files could not be removed.
        """
        checkpoint = self.store.checkpoints.get(uuid)
        if checkpoint is None:
            raise errors.NotFound(f"checkpoint {uuid} not found")
        if checkpoint.state != CheckpointState.COMPLETED:
            raise errors.Conflict(f"checkpoint {uuid} is {checkpoint.state}: nothing to delete")
        from master_lite.store import registered_message

        versions = self.store.model_versions.naming(uuid)
        if versions:
            raise errors.Conflict(registered_message(uuid, versions))
        if uuid in self._checkpoints_in_use():
            raise errors.Conflict(
                f"checkpoint {uuid} is in use: a trial that is not finished resumes or "
                "warm-starts from it"
            )
        experiment = self.store.experiments.get(checkpoint.experiment_id)
        assert experiment is not None  # a checkpoint's experiment is never removed
        self._last_failure = None
        outcome = self._delete(checkpoint, experiment.config["checkpoint_storage"])
        if outcome == "refused":
            raise errors.Forbidden(
                f"checkpoint {uuid}: its directory is not a checkpoint directory under this "
                "master's checkpoint storage; the master does not delete it"
            )
        if outcome != "deleted":
            reason = self._last_failure or "see the master's log"
            raise errors.MasterError(
                f"checkpoint {uuid}: its files could not be deleted ({reason})"
            )

    def collect_pending(self) -> None:
        """GC every finished experiment not yet fully collected."""
        pending = self.store.experiments.awaiting_checkpoint_gc()
        if not pending:
            return
        in_use = self._checkpoints_in_use()
        for experiment in pending:
            try:
                self.collect_experiment_checkpoints(experiment.id, in_use=in_use)
            except Exception:  # one experiment's storage trouble must not stop the master
                logger.exception("checkpoint GC of experiment %s failed", experiment.id)

    def collect_experiment_checkpoints(
        self, exp_id: int, *, in_use: set[str] | None = None
    ) -> list[str]:
        """Delete the checkpoints of a finished experiment that the GC policy does not keep;
        returns their uuids."""
        experiment = self.store.experiments.get(exp_id)
        if experiment is None:
            raise ValueError(f"checkpoint GC: no experiment {exp_id}")
        config = experiment.config
        searcher_config = config.get("searcher") or {}
        checkpoints = self.store.checkpoints.matching(
            experiment_id=exp_id, state=str(CheckpointState.COMPLETED)
        )
        keep = checkpoints_to_keep(
            checkpoints,
            self._checkpoint_metrics(checkpoints, searcher_config.get("metric")),
            GcPolicy.from_storage_config(config.get("checkpoint_storage")),
            smaller_is_better=bool(searcher_config.get("smaller_is_better", True)),
        )
        if in_use is None:
            in_use = self._checkpoints_in_use()
        keep |= self.store.model_versions.registered_among(c.uuid for c in checkpoints)
        doomed = [c for c in checkpoints if c.uuid not in keep and c.uuid not in in_use]
        held = [c for c in checkpoints if c.uuid not in keep and c.uuid in in_use]
        deleted = []
        for checkpoint in doomed:
            outcome = self._delete(checkpoint, config["checkpoint_storage"])
            if outcome == "failed":
                held.append(checkpoint)  # try again next time
            elif outcome == "deleted":
                deleted.append(checkpoint.uuid)
        if not held:
            self.store.experiments.mark_checkpoint_gc_done(exp_id)
        if deleted or held:
            logger.info(
                "checkpoint GC of experiment %s: deleted %d, kept %d, held back %d "
                "(needed by live trials)",
                exp_id,
                len(deleted),
                len(keep),
                len(held),
            )
        return deleted


__all__ = ["CheckpointCollector", "GcPolicy", "checkpoints_to_keep"]
