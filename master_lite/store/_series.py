"""Repositories of the bulk series: metric reports and log lines.

Their rows are not typed (see `_rows.py`): a read returns thousands of them, which the API sends
on as JSON, so they stay the store's dicts (metric reports mostly as JSON text built inside
SQLite by `_queries.py`), with `group` for the column `group_name`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import _queries
from ._repositories import Repository, marks


@dataclasses.dataclass(frozen=True)
class MetricsQuery:
    """Which current metric reports to read, in id order: of a trial, or of an experiment's
    trials (only `trial_ids` of them when given), of one `group` ("training", "validation"),
    after `after_id`, at most `limit`, downsampled per (trial, group) to `max_datapoints`
    (`_queries.metric_reports_json` says which are kept).

    The one signature of a metrics read, from the API handlers through the facade and the views
    down to the store."""

    trial_id: int | None = None
    experiment_id: int | None = None
    group: str | None = None
    after_id: int = 0
    limit: int | None = None
    trial_ids: tuple[int, ...] | None = None
    max_datapoints: int | None = None

    def __post_init__(self) -> None:
        if self.trial_ids is not None:  # a list from a caller reads the same, and stays frozen
            object.__setattr__(self, "trial_ids", tuple(self.trial_ids))


class Metrics(Repository):
    """The `metrics` table: current (not superseded) reports."""

    def by_id(self, metric_id: int) -> dict | None:
        """One current report by id, or None."""
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

    def reports_json(self, query: MetricsQuery) -> str:
        """The reports `query` asks for, as the JSON text the API sends (see
        `_queries.metric_reports_json`)."""
        where = ["id > ?"]
        params: list[Any] = [int(query.after_id or 0)]
        if query.trial_id is not None:
            where.append("trial_id = ?")
            params.append(int(query.trial_id))
        if query.trial_ids is not None:
            ids = list(query.trial_ids)
            where.append(f"trial_id IN ({marks(ids)})")
            params.extend(ids)
        elif query.experiment_id is not None:
            where.append("trial_id IN (SELECT id FROM trials WHERE experiment_id = ?)")
            params.append(int(query.experiment_id))
        if query.group:
            where.append("group_name = ?")
            params.append(query.group)
        return _queries.metric_reports_json(
            self._store,
            " AND ".join(where),
            params,
            limit=query.limit,
            max_datapoints=query.max_datapoints,
        )

    def page_json(
        self, trial_ids: tuple[int, ...], after_id: int, *, max_reports: int, max_bytes: int
    ) -> str:
        """The next page of the current reports of `trial_ids` after `after_id` (keyset: pages
        never repeat or skip a report while more are added), as JSON text like `reports_json`:
        in id order, at most `max_reports`, and no more than fit in `max_bytes` of metrics text
        (but at least one, however large)."""
        if not trial_ids:
            return "[]"
        ids = [int(t) for t in trial_ids]
        sizes = _queries._rows(
            self._store,
            f"SELECT length(metrics) FROM metrics WHERE trial_id IN ({marks(ids)}) AND id > ? "
            "AND superseded_by_run IS NULL ORDER BY id LIMIT ?",
            (*ids, int(after_id), int(max_reports)),
        )
        count = total = 0
        for (size,) in sizes:
            if count and total + size > max_bytes:
                break
            count, total = count + 1, total + size
        if not count:
            return "[]"
        return self.reports_json(MetricsQuery(trial_ids=tuple(ids), after_id=after_id, limit=count))


class Logs(Repository):
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
        return self._select(where, params, limit=limit, tail=tail)

    def experiment_lines(
        self,
        experiment_id: int,
        *,
        search: str | None = None,
        after_id: int = 0,
        limit: int | None = None,
        tail: int | None = None,
        stream: str | None = None,
    ) -> list[dict]:
        """The lines of every trial of the experiment after `after_id`, in id order (the order
        they were written): the last `tail`, or the first `limit`; only those containing
        `search` (any case) when given."""
        where = ["trial_id IN (SELECT id FROM trials WHERE experiment_id = ?)", "id > ?"]
        params: list[Any] = [int(experiment_id), int(after_id or 0)]
        if search:
            # instr on lower(): a plain substring (no LIKE wildcards to escape in user text).
            where.append("instr(lower(line), ?) > 0")
            params.append(search.lower())
        if stream:
            where.append("stream = ?")
            params.append(stream)
        return self._select(where, params, limit=limit, tail=tail)

    def _select(
        self, where: list[str], params: list[Any], *, limit: int | None, tail: int | None
    ) -> list[dict]:
        """The lines matching `where` in id order: the last `tail`, or the first `limit`."""
        if tail is not None:
            rows = self._store.select(
                "logs", " AND ".join(where), params, order="id DESC", limit=tail
            )[::-1]
            return rows if limit is None else rows[:limit]
        return self._store.select("logs", " AND ".join(where), params, limit=limit)


__all__ = ["Logs", "Metrics"]
