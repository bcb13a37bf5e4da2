"""The master's reads and writes by aggregate: every SQL condition the master needs lives here.

One repository per aggregate (experiments, trials, allocations and their tokens, checkpoints,
contexts; metrics and logs are in `_series.py`), each a thin object over the `Store`'s generic
helpers and the fast paths of `_queries.py`. The rest of `master_lite` names what it wants
(`store.trials.of_experiment(id)`, `store.trials.set_state(id, state)`) instead of writing a
`WHERE` or naming a table. Reads return the frozen rows of `_rows.py`; writes name columns
that are checked against the row's fields.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from determined.common.states import (
    TERMINAL_EXPERIMENT_STATES,
    TERMINAL_TRIAL_STATES,
    CheckpointState,
)

from . import _deletion, _placement, _queries
from ._rows import AllocationRow, CheckpointRow, ContextRow, ExperimentRow, Row, TokenRow, TrialRow

if TYPE_CHECKING:
    from ._database import Database

# SQLite allows 999 parameters in old builds: `IN (...)` lists are sent in chunks of this size.
CHUNK = 500

R = TypeVar("R", bound=Row)


def marks(values: Sequence[Any]) -> str:
    """`?, ?, ?`: one placeholder per value."""
    return ", ".join("?" for _ in values)


def _terminal(states: Iterable[Any]) -> list[str]:
    return sorted(str(state) for state in states)


class Repository:
    """A repository over the store."""

    def __init__(self, store: Database) -> None:
        self._store = store


class TypedRepository(Repository, Generic[R]):
    """A repository of one table whose rows are the frozen dataclass `row_type`."""

    row_type: type[R]

    def get(self, key: Any) -> R | None:
        """The row with this key, or None."""
        row = self.row_type
        stored = self._store.get(row.TABLE, key, key_column=row.KEY)
        return None if stored is None else row.from_stored(stored)

    def _update(self, key: Any, **changes: Any) -> None:
        """Write `changes` (column=value, JSON columns as Python values) to the row with this
        key; ValueError for a name that is not a column (or is the key), or is a state column
        (those only `set_state` writes: see `Row.STATE_COLUMNS`).

        Private to the store: the rest of master_lite calls the named writes below, which say
        what changes (tests/master_lite/test_state_owner.py fails on a generic update outside
        `store/`)."""
        self.row_type.check_columns(changes)
        owned = sorted(self.row_type.STATE_COLUMNS.intersection(changes))
        if owned:
            raise ValueError(
                f"{self.row_type.TABLE}: {', '.join(owned)} change only through a named state "
                "transition (master_lite/_core/_states.py), not update()"
            )
        self._store.update(self.row_type.TABLE, key, key_column=self.row_type.KEY, **changes)

    def _set_state(self, key: Any, state: str, **companions: Any) -> None:
        """The row's new `state` with its companions (end time, exit code...), in one write."""
        self.row_type.check_columns(companions)
        self._store.update(
            self.row_type.TABLE, key, key_column=self.row_type.KEY, state=str(state), **companions
        )

    def _insert(self, **values: Any) -> int:
        self.row_type.check_columns(values, writing_key=True)
        return self._store.insert(self.row_type.TABLE, **values)

    def _select(self, where: str = "", params: Sequence[Any] = (), *, order: str = "id") -> list[R]:
        return [
            self.row_type.from_stored(stored)
            for stored in self._store.select(self.row_type.TABLE, where, params, order=order)
        ]


class Experiments(TypedRepository[ExperimentRow]):
    """The `experiments` table."""

    row_type = ExperimentRow

    def matching(
        self, *, state: str | None = None, name: str | None = None, archived: bool | None = None
    ) -> list[ExperimentRow]:
        """Experiments in id order; `name`: a case-insensitive part of the name."""
        return self._select(*self._filters(state, name, archived))

    def listing(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        archived: bool | None = None,
        **place: Any,
    ) -> list[tuple[ExperimentRow, int, list[str]]]:
        """What a list of experiments shows, as `matching` selects them: for each, its row
        with `config` cut to `searcher` and `unmanaged` (no `original_config`, no
        `searcher_snapshot`), its number of trials and its trials' best validation `metrics`
        JSON texts; in a few queries however many experiments there are. `place`: the
        owner, project and workspace filters of `_placement.place_filters`."""
        where, params = self._filters(state, name, archived)
        if place:
            where, params = _placement.place_filters(where, params, **place)
        listing = []
        for stored, config, num_trials, best in _queries.experiment_listing(
            self._store, where, params
        ):
            row = ExperimentRow.from_stored(
                {**stored, "config": config, "original_config": None, "searcher_snapshot": None}
            )
            listing.append((row, num_trials, best))
        return listing

    @staticmethod
    def _filters(
        state: str | None, name: str | None, archived: bool | None
    ) -> tuple[str, list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        if state:
            where.append("state = ?")
            params.append(str(state))
        if name:
            where.append("instr(lower(name), lower(?)) > 0")
            params.append(name)
        if archived is not None:
            where.append("archived = ?")
            params.append(int(bool(archived)))
        return " AND ".join(where), params

    def unfinished(self) -> list[ExperimentRow]:
        """Experiments not in a terminal state (what recovery resumes)."""
        terminal = _terminal(TERMINAL_EXPERIMENT_STATES)
        return self._select(f"state NOT IN ({marks(terminal)})", terminal)

    def awaiting_checkpoint_gc(self) -> list[ExperimentRow]:
        """Finished experiments whose checkpoints were not all collected yet."""
        terminal = _terminal(TERMINAL_EXPERIMENT_STATES)
        return self._select(f"state IN ({marks(terminal)}) AND checkpoint_gc_done = 0", terminal)

    def warm_start_checkpoints_in_use(self) -> set[str]:
        """Checkpoints unfinished experiments start their trials from."""
        terminal = _terminal(TERMINAL_EXPERIMENT_STATES)
        rows = self._store.select(
            "experiments",
            f"state NOT IN ({marks(terminal)}) AND warm_start_checkpoint IS NOT NULL",
            terminal,
        )
        return {row["warm_start_checkpoint"] for row in rows}

    def create(self, **values: Any) -> int:
        """Insert a new experiment (column=value); its id."""
        return self._insert(**values)

    def set_state(self, experiment_id: int, state: str, **companions: Any) -> None:
        """The experiment's new state and its companions (`end_time=...`, ...): for the state
        owner (master_lite/_core/_states.py) only."""
        self._set_state(experiment_id, state, **companions)

    def set_archived(self, experiment_id: int, archived: bool) -> None:
        """Archive or unarchive the experiment."""
        self._update(experiment_id, archived=bool(archived))

    def set_details(
        self,
        experiment_id: int,
        *,
        name: str | None = None,
        description: str | None = None,
        labels: list[str] | None = None,
        notes: str | None = None,
    ) -> None:
        """The fields a user edits (those given): name, description, labels, notes."""
        given = {"name": name, "description": description, "labels": labels, "notes": notes}
        changes = {column: value for column, value in given.items() if value is not None}
        if changes:
            self._update(experiment_id, **changes)

    def save_searcher(self, experiment_id: int, snapshot: Any) -> None:
        """The searcher's snapshot (what recovery restores it from)."""
        self._update(experiment_id, searcher_snapshot=snapshot)

    def mark_searcher_shutdown(self, experiment_id: int, *, failure: bool) -> None:
        """The searcher has nothing more to do (`failure`: it ended in error)."""
        self._update(experiment_id, searcher_shutdown=True, searcher_failure=bool(failure))

    def mark_checkpoint_gc_done(self, experiment_id: int) -> None:
        """Checkpoint GC after the experiment's end ran to completion."""
        self._update(experiment_id, checkpoint_gc_done=True)

    def set_config(self, experiment_id: int, config: dict) -> None:
        """The experiment's expanded config (a user's edit of its `resources`)."""
        self._update(experiment_id, config=config)

    def set_queue_position(self, experiment_id: int, position: float) -> None:
        """The experiment's place in the job queue (`det job update --ahead-of/--behind-of`)."""
        self._update(experiment_id, queue_position=float(position))

    def set_progress(self, experiment_id: int, progress: float) -> None:
        """The experiment's progress, clamped to 0..1 (its searcher's, or its trials' mean)."""
        self._update(experiment_id, progress=max(0.0, min(1.0, float(progress))))

    def delete(self, experiment_id: int) -> list[int]:
        """Remove the experiment with all its trials' rows, at once; the trial ids it had."""
        return _deletion.delete_experiment_rows(self._store, experiment_id)


class Trials(TypedRepository[TrialRow]):
    """The `trials` table, with the trial reads built in SQLite (`_queries.trial_rows`)."""

    row_type = TrialRow

    def experiment_of(self, trial_id: int) -> int | None:
        """The id of the trial's experiment (None for an unknown trial)."""
        return self._store.scalar("SELECT experiment_id FROM trials WHERE id = ?", (trial_id,))

    def count(self, experiment_id: int) -> int:
        """How many trials the experiment has."""
        return int(
            self._store.scalar(
                "SELECT COUNT(*) FROM trials WHERE experiment_id = ?", (int(experiment_id),)
            )
        )

    def of_experiment(self, experiment_id: int) -> list[TrialRow]:
        """The experiment's trials in id order."""
        return self._select("experiment_id = ?", (int(experiment_id),))

    def by_request(self, experiment_id: int, request_id: int) -> TrialRow | None:
        """The trial the searcher knows as `request_id`."""
        rows = self._select("experiment_id = ? AND request_id = ?", (experiment_id, request_id))
        return rows[0] if rows else None

    def ids_in_experiment(self, experiment_id: int, trial_ids: Sequence[int]) -> set[int]:
        """Those of `trial_ids` that are trials of the experiment."""
        found: set[int] = set()
        wanted = list(trial_ids)
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            rows = self._store.select(
                "trials",
                f"experiment_id = ? AND id IN ({marks(chunk)})",
                (int(experiment_id), *chunk),
            )
            found.update(row["id"] for row in rows)
        return found

    def checkpoints_in_use(self) -> set[str]:
        """Latest checkpoints of trials that may still resume from them."""
        terminal = _terminal(TERMINAL_TRIAL_STATES)
        rows = self._store.select(
            "trials",
            f"state NOT IN ({marks(terminal)}) AND latest_checkpoint IS NOT NULL",
            terminal,
        )
        return {row["latest_checkpoint"] for row in rows}

    def create(self, **values: Any) -> int:
        """Insert a new trial (column=value); its id."""
        return self._insert(**values)

    def set_state(self, trial_id: int, state: str, **companions: Any) -> None:
        """The trial's new state and its companions (`end_time=...`, `exit_code=...`): for the
        state owner (master_lite/_core/_states.py) only."""
        self._set_state(trial_id, state, **companions)

    def mark_closed(self, trial_id: int) -> None:
        """The searcher closed the trial: it gets no more operations."""
        self._update(trial_id, closed=True)

    def request_stop(self, trial_id: int) -> None:
        """The searcher stopped the trial early: its run's exit completes it."""
        self._update(trial_id, stop_requested=True)

    def set_latest_checkpoint(self, trial_id: int, uuid: str) -> None:
        """The checkpoint the trial's next run resumes from."""
        self._update(trial_id, latest_checkpoint=uuid)

    def set_op_queue(self, trial_id: int, queue: Sequence[int]) -> None:
        """The searcher's operations (lengths) the trial has still to run, in order."""
        self._update(trial_id, op_queue=list(queue))

    def set_progress(self, trial_id: int, progress: float) -> None:
        """The trial's progress as its run reports it, clamped to 0..1."""
        self._update(trial_id, progress=max(0.0, min(1.0, float(progress))))

    def set_runner_state(self, trial_id: int, text: str) -> None:
        """What the trial's run says it is doing (free text)."""
        self._update(trial_id, runner_state=str(text or ""))

    def set_early_exit(self, trial_id: int, reason: str) -> None:
        """The early exit its run reported (INVALID_HP or USER_REQUESTED_STOP)."""
        self._update(trial_id, early_exit=reason)

    def set_exit_summary(self, trial_id: int, summary: str | None) -> None:
        """Why the trial's last run ended, in words (None: it ended well)."""
        self._update(trial_id, exit_summary=summary)

    def record_restart(self, trial_id: int, *, restarts: int, exit_code: int) -> None:
        """A failed run will be restarted: the restarts so far and the failed run's exit code."""
        self._update(trial_id, restarts=int(restarts), exit_code=exit_code)

    def record_metrics(
        self,
        trial_id: int,
        *,
        steps_completed: int,
        latest_training_id: int | None = None,
        latest_validation_id: int | None = None,
        best_validation_id: int | None = None,
        best_changed: bool = False,
    ) -> None:
        """After stored metric reports: the trial's steps, its latest training and validation
        report ids (those given) and, when `best_changed`, its best validation's id (None
        clears it)."""
        changes: dict[str, Any] = {"steps_completed": int(steps_completed)}
        if latest_training_id is not None:
            changes["latest_training_id"] = latest_training_id
        if latest_validation_id is not None:
            changes["latest_validation_id"] = latest_validation_id
        if best_changed:
            changes["best_validation_id"] = best_validation_id
        self._update(trial_id, **changes)

    def set_notebook_error_once(self, trial_id: int, record: dict) -> None:
        """Keep the first notebook error a trial reports (later ones are its consequences)."""
        self._store.execute(
            "UPDATE trials SET notebook_error = ? WHERE id = ? AND notebook_error IS NULL",
            (json.dumps(record), trial_id),
        )

    def rows_with_summaries(
        self,
        *,
        experiment_id: int | None = None,
        trial_ids: Sequence[int] | None = None,
        order: str = "id",
        limit: int | None = None,
        offset: int = 0,
    ) -> list[tuple[dict, list]]:
        """Trials (of an experiment, or these ids) with their metric summaries: see
        `_queries.trial_rows`."""
        if trial_ids is not None:
            ids = list(trial_ids)
            where, params = f"t.id IN ({marks(ids)})", tuple(ids)
        elif experiment_id is not None:
            where, params = "t.experiment_id = ?", (int(experiment_id),)
        else:
            raise ValueError("rows_with_summaries: pass experiment_id or trial_ids")
        return _queries.trial_rows(
            self._store, where, params, order=order, limit=limit, offset=offset
        )

    def best_validation_metrics(self, experiment_id: int) -> list[tuple[int, str | None]]:
        """(trial id, its best validation's metrics as JSON text) of each trial."""
        return _queries.best_validation_metrics(self._store, experiment_id)


class Allocations(TypedRepository[AllocationRow]):
    """The `allocations` table and the trial tokens issued to them."""

    row_type = AllocationRow

    def unfinished(self) -> list[AllocationRow]:
        """Allocations with no end (what a stopped master left running)."""
        return self._select("end_time IS NULL")

    def start(
        self,
        allocation_id: str,
        *,
        trial_id: int,
        run_id: int,
        slot_ids: list[int],
        token_hash: str,
    ) -> None:
        """Record a run starting on `slot_ids`, and the (hashed) token it authenticates with."""
        with self._store.transaction():
            self._insert(
                id=allocation_id,
                trial_id=trial_id,
                run_id=run_id,
                state="RUNNING",
                slot_ids=slot_ids,
                start_time=time.time(),
            )
            self._store.insert(
                TokenRow.TABLE,
                token_hash=token_hash,
                trial_id=trial_id,
                allocation_id=allocation_id,
            )

    def set_end_intent(self, allocation_id: str, intent: str) -> None:
        """Why the master is ending the run (preempt, pause, kill...), for a restarted master."""
        self._update(allocation_id, end_intent=intent)

    def mark_preempt_requested(self, allocation_id: str) -> None:
        """The run was asked to checkpoint and exit."""
        self._update(allocation_id, preempt_requested=True)

    def mark_preempt_acked(self, allocation_id: str) -> None:
        """The run heard it must exit, and will."""
        self._update(allocation_id, preempt_acked=True)

    def set_process(self, allocation_id: str, pid: int | None) -> None:
        """The run's process (it leads its own process group)."""
        self._update(allocation_id, pid=pid, pgid=pid)

    def end(
        self, allocation_id: str, *, exit_code: int | None = None, intent: str | None = None
    ) -> None:
        """The run is over (`exit_code` when it was seen to exit; `intent`: why it was ended,
        recorded when given)."""
        changes: dict[str, Any] = {"state": "ENDED", "end_time": time.time()}
        if exit_code is not None:
            changes["exit_code"] = exit_code
        if intent is not None:
            changes["end_intent"] = intent
        self._update(allocation_id, **changes)

    def token(self, token_hash: str) -> TokenRow | None:
        """The token issued with this hash, or None."""
        stored = self._store.get(TokenRow.TABLE, token_hash, key_column=TokenRow.KEY)
        return None if stored is None else TokenRow.from_stored(stored)

    def token_owners(self) -> dict[str, str]:
        """Token hash -> allocation id, of every token issued."""
        rows = self._store.select("trial_tokens", order="token_hash")
        return {row["token_hash"]: row["allocation_id"] for row in rows}

    def revoke_tokens(self, allocation_id: str) -> None:
        self._store.execute("DELETE FROM trial_tokens WHERE allocation_id = ?", (allocation_id,))

    def revoke_all_tokens(self) -> None:
        self._store.execute("DELETE FROM trial_tokens")


class Checkpoints(TypedRepository[CheckpointRow]):
    """The `checkpoints` table."""

    row_type = CheckpointRow

    def matching(
        self,
        *,
        experiment_id: int | None = None,
        trial_id: int | None = None,
        state: str | None = None,
    ) -> list[CheckpointRow]:
        """Checkpoints in report order."""
        where: list[str] = []
        params: list[Any] = []
        if experiment_id is not None:
            where.append("experiment_id = ?")
            params.append(int(experiment_id))
        if trial_id is not None:
            where.append("trial_id = ?")
            params.append(int(trial_id))
        if state:
            where.append("state = ?")
            params.append(str(state))
        return self._select(" AND ".join(where), params, order="report_time, uuid")

    def live_uuids(self) -> set[str]:
        """Every uuid a record names whose files should exist (any state but DELETED): what
        the partial checkpoint collection must keep."""
        text = self._store.scalar(
            "SELECT json_group_array(uuid) FROM checkpoints WHERE state != ?",
            (str(CheckpointState.DELETED),),
        )
        return set(json.loads(text or "[]"))

    def set_metadata(self, uuid: str, metadata: dict) -> None:
        """Replace the checkpoint's user metadata."""
        self._update(uuid, metadata=metadata)

    def mark_deleted(self, uuid: str, *, resources: dict | None = None) -> None:
        """The checkpoint's files are gone: DELETED (`resources`: what is left of them, when
        the deleter says)."""
        changes: dict[str, Any] = {"state": str(CheckpointState.DELETED)}
        if resources is not None:
            changes["resources"] = resources
        self._update(uuid, **changes)

    def put(self, row: dict) -> None:
        """Insert or replace one checkpoint, given as a dict of every column (a re-report of a
        uuid replaces it)."""
        CheckpointRow.check_columns(row, writing_key=True)
        self._store.execute(
            "INSERT OR REPLACE INTO checkpoints (uuid, trial_id, experiment_id, allocation_id,"
            " steps_completed, metadata, resources, state, report_time, path)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["uuid"],
                row["trial_id"],
                row["experiment_id"],
                row["allocation_id"],
                row["steps_completed"],
                json.dumps(row["metadata"]),
                json.dumps(row["resources"]),
                row["state"],
                row["report_time"],
                row["path"],
            ),
        )


class Contexts(TypedRepository[ContextRow]):
    """The `contexts` table: uploaded context tarballs, by content hash."""

    row_type = ContextRow

    def add(self, context_hash: str, path: str, size: int) -> None:
        """Record a context file (a second upload of the same content changes nothing)."""
        self._store.execute(
            "INSERT OR IGNORE INTO contexts (hash, path, size, created) VALUES (?, ?, ?, ?)",
            (context_hash, path, size, time.time()),
        )

    def remove_if_unused(self, context_hash: str) -> str | None:
        """Forget the context when no experiment has it any more (the last one was deleted);
        the path of its tarball, for the caller to remove, or None when it is still used."""
        with self._store.transaction() as conn:
            row = conn.execute(
                "SELECT path FROM contexts WHERE hash = ? AND NOT EXISTS "
                "(SELECT 1 FROM experiments WHERE context_hash = ?)",
                (context_hash, context_hash),
            ).fetchone()
            if row is None:
                return None
            conn.execute("DELETE FROM contexts WHERE hash = ?", (context_hash,))
        return str(row[0])


__all__ = [
    "Allocations",
    "Checkpoints",
    "Contexts",
    "Experiments",
    "Repository",
    "TypedRepository",
    "Trials",
]
