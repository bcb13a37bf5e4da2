"""The experiment-editing part: what a user changes about an experiment after creating it
(name, description, notes, labels, the scheduling fields of `resources`) and its deletion."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from determined.common.states import TERMINAL_EXPERIMENT_STATES, CheckpointState
from master_lite import errors
from master_lite._core import _trash
from master_lite._core._shared import MasterState
from master_lite._core._views import Views
from master_lite.checkpoints import under_storage_roots
from master_lite.checkpoints._checkpoints import Checkpoints
from master_lite.experiments._job_queue import JobQueue
from master_lite.experiments._searchers import Searchers
from master_lite.runs import Runs, allocation_id_for
from master_lite.tensorboards._tensorboards import experiment_files_dir

logger = logging.getLogger("master_lite")

# The `resources` fields a user may change on a live experiment; the scheduler reads
# priority and max_slots, weight is the experiment's fair share weight (docs/scheduling.md).
EDITABLE_RESOURCES = ("priority", "max_slots", "weight")


def _check_resources(resources: Any) -> dict[str, Any]:
    """The `resources` edit, checked; InvalidRequest lists every bad field."""
    if not isinstance(resources, dict):
        raise errors.InvalidRequest("body.resources: expected an object")
    problems = []
    for key in resources:
        if key not in EDITABLE_RESOURCES:
            problems.append(
                f"body.resources.{key}: cannot be changed after creation "
                f"(editable: {', '.join(EDITABLE_RESOURCES)})"
            )
    priority = resources.get("priority")
    if "priority" in resources and (
        isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 99
    ):
        problems.append(
            f"body.resources.priority: must be an integer between 1 and 99 "
            f"(smaller is more important), got {priority!r}"
        )
    max_slots = resources.get("max_slots")
    if max_slots is not None and (
        isinstance(max_slots, bool) or not isinstance(max_slots, int) or max_slots < 0
    ):
        problems.append(
            f"body.resources.max_slots: must be an integer >= 0, or null for no limit, "
            f"got {max_slots!r}"
        )
    weight = resources.get("weight")
    if "weight" in resources and (
        isinstance(weight, bool)
        or not isinstance(weight, (int, float))
        or not math.isfinite(weight)  # NaN compares false to everything; 1e400 is Infinity
        or weight < 0
    ):
        problems.append(f"body.resources.weight: must be a finite number >= 0, got {weight!r}")
    if problems:
        raise errors.InvalidRequest("; ".join(problems), problems)
    return dict(resources)


def _kept_message(exp_id: int, protected: set[str], store: Any) -> str:
    """Why the experiment cannot be deleted: each protected checkpoint and what holds it."""
    from master_lite.store import registered_message

    reasons = []
    for uuid in sorted(protected):
        versions = store.model_versions.naming(uuid)
        if versions:
            reasons.append(registered_message(uuid, versions))
        else:
            reasons.append(
                f"checkpoint {uuid} is still needed: a trial that is not finished resumes or "
                "warm-starts from it (delete the experiment once that one has ended)"
            )
    return f"experiment {exp_id} cannot be deleted, nothing was: " + "; ".join(reasons)


class ExperimentEdits:
    """Edits of existing experiments, and their deletion."""

    def __init__(
        self,
        shared: MasterState,
        *,
        views: Views,
        runs: Runs,
        searchers: Searchers,
        checkpoints: Checkpoints,
        delete_checkpoint_files: Callable[[str], None],
    ) -> None:
        self._shared = shared
        self._views = views
        self._runs = runs
        self._searchers = searchers
        self._checkpoints = checkpoints
        # The checkpoint GC's one safe deletion (through the master: the GC starts with it).
        self._delete_checkpoint_files = delete_checkpoint_files
        # The job queue's changes are edits too (`master.edits.job_queue`, docs/scheduling.md).
        self.job_queue = JobQueue(
            shared,
            views=views,
            runs=runs,
            edit_resources=lambda exp_id, edit: self.patch_experiment(exp_id, resources=edit),
        )

    def patch_experiment(
        self,
        exp_id: int,
        *,
        name: str | None = None,
        description: str | None = None,
        labels: list[str] | None = None,
        resources: dict[str, Any] | None = None,
        notes: str | None = None,
    ) -> dict:
        """Change the name, description, notes, labels or scheduling `resources` (those given) of an
        experiment in any state; the experiment's JSON after it. Labels keep their order,
        without repeats; a new priority or max_slots applies to its trials that wait."""
        row = self._views.experiment_row(exp_id)  # NotFound names it
        if name is not None and not name.strip():
            raise errors.InvalidRequest("body.name: an experiment name cannot be empty")
        if labels is not None:
            if any(not label.strip() for label in labels):
                raise errors.InvalidRequest("body.labels: a label cannot be empty")
            labels = list(dict.fromkeys(labels))
        edit = _check_resources(resources) if resources is not None else {}
        with self._shared.atomic():
            self._shared.store.experiments.set_details(
                exp_id, name=name, description=description, labels=labels, notes=notes
            )
            if edit:
                config = copy.deepcopy(row.config)
                config.setdefault("resources", {}).update(edit)
                self._shared.store.experiments.set_config(exp_id, config)
        if edit:
            self._runs.reprioritize(exp_id)
        self._views.publish_experiment(exp_id)
        return self._views.get_experiment(exp_id, with_config=False)

    def delete_experiment(self, exp_id: int) -> dict:
        """Delete a finished experiment: its checkpoints' files, its trials' work dirs, the
        TensorBoard files its trials wrote, its context when no other experiment shares it,
        and every row of it. Refused (Conflict) while it
        runs or while a checkpoint of it must be kept (`Checkpoints.protected_uuids`:
        registered in the model registry, or needed by a live trial), so nothing the registry
        or another experiment needs is lost. (Keeping such a checkpoint while deleting the
        rest would need its trial and experiment rows, which its row references.)

        Returns:
            `{"id", "deleted_checkpoints", "deleted_trials"}`.
        """
        row = self._views.experiment_row(exp_id)
        if row.state not in TERMINAL_EXPERIMENT_STATES:
            raise errors.Conflict(
                f"experiment {exp_id} is {row.state}: only finished experiments can be "
                f"deleted (stop it first: det experiment kill {exp_id})"
            )
        protected = self._checkpoints.protected_uuids(exp_id)
        if protected:
            raise errors.Conflict(_kept_message(exp_id, protected, self._shared.store))
        last_seen = self._views.get_experiment(exp_id, with_config=False)
        store = self._shared.store
        completed = store.checkpoints.matching(
            experiment_id=exp_id, state=str(CheckpointState.COMPLETED)
        )
        # Files first: when one cannot be removed the experiment stays, its other
        # checkpoints already DELETED (as the GC leaves them), and the user may retry.
        for checkpoint in completed:
            try:
                self._delete_checkpoint_files(checkpoint.uuid)
            except errors.Forbidden:
                # Files outside the master's checkpoint storage (a record an older master
                # accepted) are not the master's to delete; the record goes with the
                # experiment, the files stay (the collector logged which).
                pass
        # A failed kernel trial's kernel kept for post-mortem would outlive its experiment (and
        # run in a work dir removed below) until keep_alive ends: it ends now.
        if self._runs.runner is not None:
            for trial in store.trials.of_experiment(exp_id):
                if trial.run_id:
                    self._runs.runner.release(allocation_id_for(trial.id, trial.run_id))
        trial_ids = store.experiments.delete(exp_id)
        self._searchers.discard(exp_id)
        for trial_id in trial_ids:
            _discard(self._shared.root_dir / "trials" / str(trial_id))
        # The TensorBoard files its trials wrote themselves, which the harness copied beside
        # the checkpoints (no row names them, so nothing else would ever remove them).
        tensorboard_files = experiment_files_dir(row.config, exp_id)
        if tensorboard_files is not None and under_storage_roots(
            tensorboard_files, self._shared.storage_roots
        ):
            _discard(tensorboard_files)
        # Its context, unless another experiment was made from the same files (same hash).
        unused_context = (
            store.contexts.remove_if_unused(row.context_hash) if row.context_hash else None
        )
        if unused_context is not None:
            Path(unused_context).unlink(missing_ok=True)
        if self._shared.events.has_subscribers("experiment"):
            # Its last JSON, marked: lists drop it, an open view of it shows it is gone.
            self._shared.events.publish(
                "experiment", {**last_seen, "state": "DELETED", "deleted": True}
            )
        return {
            "id": exp_id,
            "deleted_checkpoints": len(completed),
            "deleted_trials": len(trial_ids),
        }


def _discard(directory: Path) -> None:
    """Remove a deleted experiment's directory off the loop (what rmtree's ignore_errors did:
    a directory that is gone or cannot be moved is left as it is, with a log line)."""
    try:
        _trash.discard(directory)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("could not remove %s: %s", directory, exc)


__all__ = ["EDITABLE_RESOURCES", "ExperimentEdits"]
