"""The master's reads and writes by aggregate: every SQL condition the master needs lives here.

One repository per aggregate (experiments, trials, allocations and their tokens, metrics, logs,
checkpoints, contexts), each a thin object over the `Store`'s generic helpers and the fast paths
of `_queries.py`. The rest of `master_lite` names what it wants (`store.trials.of_experiment(id)`)
instead of writing a `WHERE`. Rows are the store's dicts (JSON columns decoded).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from determined.common.states import TERMINAL_EXPERIMENT_STATES, TERMINAL_TRIAL_STATES

from . import _queries

if TYPE_CHECKING:
    from ._store import Store

# SQLite allows 999 parameters in old builds: `IN (...)` lists are sent in chunks of this size.
CHUNK = 500


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


def _terminal(states: Iterable[Any]) -> list[str]:
    return sorted(str(state) for state in states)


class _Repository:
    def __init__(self, store: Store) -> None:
        self._store = store


class Experiments(_Repository):
    """The `experiments` table."""

    def matching(
        self, *, state: str | None = None, name: str | None = None, archived: bool | None = None
    ) -> list[dict]:
        """Experiments in id order; `name`: a case-insensitive part of the name."""
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
        return self._store.select("experiments", " AND ".join(where), params)

    def unfinished(self) -> list[dict]:
        """Experiments not in a terminal state (what recovery resumes)."""
        terminal = _terminal(TERMINAL_EXPERIMENT_STATES)
        return self._store.select("experiments", f"state NOT IN ({_marks(terminal)})", terminal)

    def awaiting_checkpoint_gc(self) -> list[dict]:
        """Finished experiments whose checkpoints were not all collected yet."""
        terminal = _terminal(TERMINAL_EXPERIMENT_STATES)
        return self._store.select(
            "experiments", f"state IN ({_marks(terminal)}) AND checkpoint_gc_done = 0", terminal
        )

    def warm_start_checkpoints_in_use(self) -> set[str]:
        """Checkpoints unfinished experiments start their trials from."""
        terminal = _terminal(TERMINAL_EXPERIMENT_STATES)
        rows = self._store.select(
            "experiments",
            f"state NOT IN ({_marks(terminal)}) AND warm_start_checkpoint IS NOT NULL",
            terminal,
        )
        return {row["warm_start_checkpoint"] for row in rows}


class Trials(_Repository):
    """The `trials` table, with the trial reads built in SQLite (`_queries.trial_rows`)."""

    def experiment_of(self, trial_id: int) -> int | None:
        return self._store.scalar("SELECT experiment_id FROM trials WHERE id = ?", (trial_id,))

    def count(self, experiment_id: int) -> int:
        return int(
            self._store.scalar(
                "SELECT COUNT(*) FROM trials WHERE experiment_id = ?", (int(experiment_id),)
            )
        )

    def of_experiment(self, experiment_id: int) -> list[dict]:
        """The experiment's trials in id order."""
        return self._store.select("trials", "experiment_id = ?", (int(experiment_id),))

    def by_request(self, experiment_id: int, request_id: int) -> dict | None:
        """The trial the searcher knows as `request_id`."""
        rows = self._store.select(
            "trials", "experiment_id = ? AND request_id = ?", (experiment_id, request_id)
        )
        return rows[0] if rows else None

    def ids_in_experiment(self, experiment_id: int, trial_ids: Sequence[int]) -> set[int]:
        """Those of `trial_ids` that are trials of the experiment."""
        found: set[int] = set()
        wanted = list(trial_ids)
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            rows = self._store.select(
                "trials",
                f"experiment_id = ? AND id IN ({_marks(chunk)})",
                (int(experiment_id), *chunk),
            )
            found.update(row["id"] for row in rows)
        return found

    def checkpoints_in_use(self) -> set[str]:
        """Latest checkpoints of trials that may still resume from them."""
        terminal = _terminal(TERMINAL_TRIAL_STATES)
        rows = self._store.select(
            "trials",
            f"state NOT IN ({_marks(terminal)}) AND latest_checkpoint IS NOT NULL",
            terminal,
        )
        return {row["latest_checkpoint"] for row in rows}

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
            where, params = f"t.id IN ({_marks(ids)})", tuple(ids)
        elif experiment_id is not None:
            where, params = "t.experiment_id = ?", (int(experiment_id),)
        else:
            raise ValueError("rows_with_summaries: pass experiment_id or trial_ids")
        return _queries.trial_rows(
            self._store, where, params, order=order, limit=limit, offset=offset
        )

    def best_validation_metrics(self, experiment_id: int) -> list[tuple[int, str | None]]:
        return _queries.best_validation_metrics(self._store, experiment_id)


class Allocations(_Repository):
    """The `allocations` table and the trial tokens issued to them."""

    def unfinished(self) -> list[dict]:
        """Allocations with no end (what a stopped master left running)."""
        return self._store.select("allocations", "end_time IS NULL", order="id")

    def token_owners(self) -> dict[str, str]:
        """Token hash -> allocation id, of every token issued."""
        rows = self._store.select("trial_tokens", order="token_hash")
        return {row["token_hash"]: row["allocation_id"] for row in rows}

    def revoke_tokens(self, allocation_id: str) -> None:
        self._store.execute("DELETE FROM trial_tokens WHERE allocation_id = ?", (allocation_id,))

    def revoke_all_tokens(self) -> None:
        self._store.execute("DELETE FROM trial_tokens")


class Metrics(_Repository):
    """The `metrics` table: current (not superseded) reports."""

    def by_id(self, metric_id: int) -> dict | None:
        rows = self._store.metric_rows("id = ?", (metric_id,))
        return rows[0] if rows else None

    def validations(self, trial_id: int) -> list[dict]:
        """The trial's validation reports in report order."""
        return self._store.metric_rows("trial_id = ? AND group_name = 'validation'", (trial_id,))

    def validation_at(self, trial_id: int, steps_completed: int) -> dict | None:
        """The trial's latest validation report made at `steps_completed`."""
        rows = self._store.metric_rows(
            "trial_id = ? AND group_name = 'validation' AND steps_completed = ?",
            (trial_id, steps_completed),
            order="id DESC",
            limit=1,
        )
        return rows[0] if rows else None

    def best_validations(self, experiment_id: int) -> list[dict]:
        """The best validation report of each trial of the experiment."""
        return self._store.metric_rows(
            "id IN (SELECT best_validation_id FROM trials WHERE experiment_id = ?)",
            (experiment_id,),
        )

    def reports_json(
        self,
        *,
        after_id: int = 0,
        trial_id: int | None = None,
        experiment_id: int | None = None,
        trial_ids: Sequence[int] | None = None,
        group: str | None = None,
        limit: int | None = None,
        max_datapoints: int | None = None,
    ) -> str:
        """Reports as the JSON text the API sends (see `_queries.metric_reports_json`)."""
        where = ["id > ?"]
        params: list[Any] = [int(after_id or 0)]
        if trial_id is not None:
            where.append("trial_id = ?")
            params.append(int(trial_id))
        if trial_ids is not None:
            ids = list(trial_ids)
            where.append(f"trial_id IN ({_marks(ids)})")
            params.extend(ids)
        elif experiment_id is not None:
            where.append("trial_id IN (SELECT id FROM trials WHERE experiment_id = ?)")
            params.append(int(experiment_id))
        if group:
            where.append("group_name = ?")
            params.append(group)
        return _queries.metric_reports_json(
            self._store, " AND ".join(where), params, limit=limit, max_datapoints=max_datapoints
        )


class Logs(_Repository):
    """The `logs` table."""

    def lines(
        self,
        trial_id: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        tail: int | None = None,
        rank: int | None = None,
        stream: str | None = None,
    ) -> list[dict]:
        """The trial's lines after `after_id` in order: the last `tail`, or the first `limit`."""
        where = ["trial_id = ?", "id > ?"]
        params: list[Any] = [int(trial_id), int(after_id or 0)]
        if rank is not None:
            where.append("rank = ?")
            params.append(int(rank))
        if stream:
            where.append("stream = ?")
            params.append(stream)
        if tail is not None:
            rows = self._store.select(
                "logs", " AND ".join(where), params, order="id DESC", limit=tail
            )[::-1]
            return rows if limit is None else rows[:limit]
        return self._store.select("logs", " AND ".join(where), params, limit=limit)


class Checkpoints(_Repository):
    """The `checkpoints` table."""

    def matching(
        self,
        *,
        experiment_id: int | None = None,
        trial_id: int | None = None,
        state: str | None = None,
    ) -> list[dict]:
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
        return self._store.select(
            "checkpoints", " AND ".join(where), params, order="report_time, uuid"
        )

    def put(self, row: dict) -> None:
        """Insert or replace one checkpoint (a re-report of a uuid replaces it)."""
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


class Contexts(_Repository):
    """The `contexts` table: uploaded context tarballs, by content hash."""

    def add(self, context_hash: str, path: str, size: int) -> None:
        """Record a context file (a second upload of the same content changes nothing)."""
        self._store.execute(
            "INSERT OR IGNORE INTO contexts (hash, path, size, created) VALUES (?, ?, ?, ?)",
            (context_hash, path, size, time.time()),
        )


__all__ = [
    "Allocations",
    "Checkpoints",
    "Contexts",
    "Experiments",
    "Logs",
    "Metrics",
    "Trials",
]
