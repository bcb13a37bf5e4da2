"""Read queries behind the API's metric and trial reads, answered mostly inside SQLite.

A metric report's `metrics` is stored as JSON text, so SQLite can write each report's whole
JSON object by splicing that text between the other fields: decoding and re-encoding it in
Python (what a read of 1,000 reports spent most of its time on) gives the same text, NaN and
Infinity included. The caller then decodes one string for all rows with one `json.loads`.

JSON functions (json_extract, json()) are never applied to stored metrics: SQLite before 3.42
rejects the NaN/Infinity tokens Python writes for non-finite floats, which Determined keeps.

Downsampling (`max_datapoints`) is by position: of a series of n current reports of one trial
and group, in id (= report) order, keep positions floor(k * (n - 1) / (m - 1)) for k = 0..m-1
— the first, the last and evenly spaced ones between, exactly min(n, m) reports. Whole reports
are kept (not points of one metric, as LTTB would pick), so every metric of a kept report is
there and a chart of any metric gets the same steps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._database import Database

MIN_DATAPOINTS = 2  # the first and the last report of a series


def iso_time_sql(column: str) -> str:
    """SQL for `_serialize.iso(column)` as a JSON value (a quoted string, or null).

    Like `datetime.fromtimestamp`, the fraction of the second is rounded to microseconds on
    its own (exact for epoch times), then cut to milliseconds.
    """
    whole = f"CAST({column} AS INTEGER)"
    micros = f"({whole} * 1000000 + CAST(round(({column} - {whole}) * 1000000) AS INTEGER))"
    return (
        f"CASE WHEN {column} IS NULL THEN 'null' ELSE "
        f"'\"' || strftime('%Y-%m-%dT%H:%M:%S', {micros} / 1000000, 'unixepoch') || '.' || "
        f"printf('%03d', {micros} % 1000000 / 1000) || 'Z\"' END"
    )


def metric_report_json_sql(alias: str) -> str:
    """SQL for `_serialize.metric_json` of the metrics row `alias`, as JSON text."""
    a = alias
    return (
        f"""'{{"id":' || {a}.id || ',"trial_id":' || {a}.trial_id || """
        f"""',"trial_run_id":' || {a}.trial_run_id || ',"group":' || """
        f"""json_quote({a}.group_name) || ',"steps_completed":' || {a}.steps_completed || """
        f"""',"metrics":' || {a}.metrics || ',"report_time":' || """
        f"""{iso_time_sql(f"{a}.report_time")} || '}}'"""
    )


def metric_summary_json_sql(alias: str) -> str:
    """SQL for `_serialize.metric_summary` of the (LEFT JOINed) metrics row `alias`."""
    a = alias
    return (
        f"""CASE WHEN {a}.id IS NULL THEN 'null' ELSE """
        f"""'{{"steps_completed":' || {a}.steps_completed || ',"metrics":' || {a}.metrics """
        f"""|| ',"report_time":' || {iso_time_sql(f"{a}.report_time")} || '}}' END"""
    )


def evenly_spaced_positions(n: int, m: int) -> range | list[int]:
    """Positions kept of a series of n reports for at most m (>= 2): see the module doc."""
    if m < MIN_DATAPOINTS:
        raise ValueError(f"max_datapoints: must be at least {MIN_DATAPOINTS}, got {m}")
    if n <= m:
        return range(n)
    return [k * (n - 1) // (m - 1) for k in range(m)]


def _rows(store: Database, sql: str, params: Sequence[Any]) -> list[tuple]:
    cursor = store._connection().cursor()
    cursor.row_factory = None  # plain tuples: no sqlite3.Row per row
    try:
        return cursor.execute(sql, tuple(params)).fetchall()
    finally:
        cursor.close()


def metric_reports_json(
    store: Database,
    where: str,
    params: Sequence[Any],
    *,
    limit: int | None = None,
    max_datapoints: int | None = None,
) -> str:
    """The current (not superseded) reports matching `where`, as the JSON text of a list of
    Metric objects in id order: downsampled per (trial, group) to `max_datapoints`, then cut
    to the first `limit`."""
    current = f"({where}) AND superseded_by_run IS NULL"
    report = metric_report_json_sql("m")
    # Each query answers one row (the reports joined inside SQLite): a read in the read pool
    # takes the GIL back once per row, and under load each take can wait for the loop thread's
    # switch interval (thousands of rows made a read of a few ms take hundreds).
    if max_datapoints is None:
        sql = f"SELECT {report} AS report FROM metrics m WHERE {current} ORDER BY m.id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return _joined_list(store, sql, params)
    # Two lists from one statement: each series' length (in (trial, group) order) and every
    # id of the series, in the same order, from the covering index metrics_current_by_trial_group
    # alone. Only the ids kept become ints, and only the reports kept are read from the table.
    # (One string per series, split again in Python, cost twice as much: SQLite built a string
    # per series and then the list of them.)
    order = "ORDER BY trial_id, group_name"
    [(lengths, ids)] = _rows(
        store,
        f"SELECT (SELECT group_concat(n) FROM (SELECT count(*) AS n FROM metrics WHERE {current} "
        f"GROUP BY trial_id, group_name {order})), (SELECT group_concat(id) FROM (SELECT id FROM "
        f"metrics WHERE {current} {order}, id))",
        (*params, *params),
    )
    kept: list[int] = []
    if lengths:
        all_ids = ids.split(",")
        start = 0
        for length in map(int, lengths.split(",")):
            kept.extend(
                int(all_ids[start + i]) for i in evenly_spaced_positions(length, max_datapoints)
            )
            start += length
    kept.sort()
    if limit is not None:
        kept = kept[: int(limit)]
    if not kept:
        return "[]"
    return _joined_list(
        store,
        f"SELECT {report} AS report FROM metrics m WHERE m.id IN "
        "(SELECT value FROM json_each(?)) ORDER BY m.id",
        (json.dumps(kept),),
    )


def _joined_list(store: Database, sql: str, params: Sequence[Any]) -> str:
    """The JSON list of the `report` texts `sql` selects, in its order, joined by SQLite."""
    [(joined,)] = _rows(store, f"SELECT group_concat(report, ',') FROM ({sql})", params)
    return "[" + (joined or "") + "]"


# Trials with their latest/best metric summaries, in one query. What goes into the JSON as
# JSON (hparams, the three summaries, the ISO times) comes last, as one JSON array text.
TRIAL_COLUMNS = (
    "id",
    "experiment_id",
    "request_id",
    "state",
    "seed",
    "restarts",
    "run_id",
    "steps_completed",
    "progress",
    "runner_state",
    "exit_code",
    "exit_summary",
    "latest_checkpoint",
)
TRIAL_JSON_PARTS = (
    "hparams",
    "latest_training",
    "latest_validation",
    "best_validation",
    "start_time",
    "end_time",
    "notebook_error",
)
TRIAL_ORDERS = {"id": "t.id", "-id": "t.id DESC"}


def trial_rows(
    store: Database,
    where: str,
    params: Sequence[Any],
    *,
    order: str = "id",
    limit: int | None = None,
    offset: int = 0,
) -> list[tuple[dict, list]]:
    """(row of TRIAL_COLUMNS, [the TRIAL_JSON_PARTS decoded]) for each trial matching `where`
    (on alias `t`), in `order` (a key of TRIAL_ORDERS)."""
    columns = ", ".join(f"t.{name}" for name in TRIAL_COLUMNS)
    sql = (
        f"SELECT {columns}, '[' || t.hparams || ',' || {metric_summary_json_sql('lt')} || ',' "
        f"|| {metric_summary_json_sql('lv')} || ',' || {metric_summary_json_sql('bv')} || ',' "
        f"|| {iso_time_sql('t.start_time')} || ',' || {iso_time_sql('t.end_time')} || ',' "
        "|| coalesce(t.notebook_error, 'null') || ']' "
        "FROM trials t "
        "LEFT JOIN metrics lt ON lt.id = t.latest_training_id "
        "LEFT JOIN metrics lv ON lv.id = t.latest_validation_id "
        "LEFT JOIN metrics bv ON bv.id = t.best_validation_id "
        f"WHERE {where} ORDER BY {TRIAL_ORDERS[order]}"
    )
    if limit is not None or offset:
        sql += f" LIMIT {-1 if limit is None else int(limit)} OFFSET {int(offset)}"
    rows = _rows(store, sql, params)
    parts = json.loads("[" + ",".join(row[-1] for row in rows) + "]")
    return [
        (dict(zip(TRIAL_COLUMNS, row, strict=False)), json_parts)
        for row, json_parts in zip(rows, parts, strict=False)
    ]


# What a listing of experiments shows of each: every column but the large ones (the expanded
# config, the submitted text, the searcher's snapshot), which a list of thousands would decode.
LISTING_COLUMNS = (
    "id",
    "name",
    "description",
    "labels",
    "state",
    "archived",
    "context_hash",
    "notebook",
    "parent_id",
    "progress",
    "start_time",
    "end_time",
    "searcher_shutdown",
    "searcher_failure",
    "warm_start_checkpoint",
    "checkpoint_gc_done",
    "notes",
    "owner_id",
    "project_id",
    "queue_position",
)


def experiment_listing(
    store: Database, where: str, params: Sequence[Any]
) -> list[tuple[dict, dict, int, list[str]]]:
    """For each experiment matching `where` (on alias `e`), in id order: (its LISTING_COLUMNS,
    its config cut to `searcher` and `unmanaged`, its number of trials, its trials' best
    validation `metrics` JSON texts). Three queries whatever the number of experiments.

    The config's two keys are extracted inside SQLite when the stored text is valid JSON; a
    config holding NaN or Infinity (which SQLite's JSON functions reject) is decoded here."""
    columns = ", ".join(f"e.{name}" for name in LISTING_COLUMNS)
    rows = _rows(
        store,
        f"SELECT {columns}, CASE WHEN json_valid(e.config) THEN json_object("
        "'searcher', json_extract(e.config, '$.searcher'), "
        "'unmanaged', json_extract(e.config, '$.unmanaged')) END, "
        "CASE WHEN json_valid(e.config) THEN NULL ELSE e.config END "
        f"FROM experiments e {'WHERE ' + where if where else ''} ORDER BY e.id",
        params,
    )
    matching = f"(SELECT e.id FROM experiments e {'WHERE ' + where if where else ''})"
    counts = dict(
        _rows(
            store,
            "SELECT experiment_id, COUNT(*) FROM trials "
            f"WHERE experiment_id IN {matching} GROUP BY experiment_id",
            params,
        )
    )
    best: dict[int, list[str]] = {}
    for experiment_id, metrics in _rows(
        store,
        "SELECT t.experiment_id, bv.metrics FROM trials t "
        "JOIN metrics bv ON bv.id = t.best_validation_id "
        f"WHERE t.experiment_id IN {matching} AND bv.superseded_by_run IS NULL",
        params,
    ):
        best.setdefault(experiment_id, []).append(metrics)
    listing = []
    for row in rows:
        stored = dict(zip(LISTING_COLUMNS, row, strict=False))
        extracted, whole = row[-2], row[-1]
        if extracted is not None:
            config = json.loads(extracted)
        else:
            decoded = json.loads(whole)
            config = {"searcher": decoded.get("searcher"), "unmanaged": decoded.get("unmanaged")}
        config = {key: value for key, value in config.items() if value is not None}
        for key in ("labels", "notebook"):  # JSON columns
            if stored[key] is not None:
                stored[key] = json.loads(stored[key])
        listing.append((stored, config, counts.get(stored["id"], 0), best.get(stored["id"], [])))
    return listing


def best_validation_metrics(store: Database, experiment_id: int) -> list[tuple[int, str | None]]:
    """(trial id, its best validation's `metrics` JSON text or None) of every trial of an
    experiment: enough to order them by their best, without building every trial."""
    return _rows(
        store,
        "SELECT t.id, bv.metrics FROM trials t "
        "LEFT JOIN metrics bv ON bv.id = t.best_validation_id "
        "WHERE t.experiment_id = ?",
        (int(experiment_id),),
    )


__all__ = [
    "LISTING_COLUMNS",
    "best_validation_metrics",
    "experiment_listing",
    "metric_reports_json",
    "trial_rows",
    "evenly_spaced_positions",
    "iso_time_sql",
    "MIN_DATAPOINTS",
    "TRIAL_ORDERS",
]
