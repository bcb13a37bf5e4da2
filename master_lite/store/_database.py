"""SQLite persistence: one file, WAL mode, one connection per thread (`Database`; the `Store`
in _store.py adds the repositories on top).

The event loop thread does almost all writes; log capture threads insert log batches. WAL lets
readers run beside the single writer, and `busy_timeout` makes a second writer wait instead of
failing. The API's heavy reads run in the read pool (_reads.py): threads marked as readers
(`mark_reader_thread`) get read-only connections and read in `read_transaction`s.

The generic helpers (`get`, `select`, `insert`, `update`) take a table name and
hand out plain dicts with JSON columns already decoded; they are for the repositories of this
package (and tests), which give the rest of the master typed rows (`_rows.py`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from master_lite.errors import MASTER_STOPPING_MESSAGE, MasterStopping

from ._schema import JSON_COLUMNS, MIGRATIONS

BUSY_TIMEOUT_MS = 30_000
# A read-pool connection maps the database file instead of copying pages through read(2) into
# its own 2 MiB cache: the curve reads jump around a large metrics table (10,000 reports of
# 100,000), and mapped pages are shared by every reader and the OS cache (a 20% faster read).
# Reads only: SQLite still writes with write(2).
READER_MMAP_BYTES = 256 * 1024 * 1024


def _encode(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


class Database:
    """The generic SQL of the store: connections, transactions, table helpers, migrations.

    The repositories take this, not the `Store`, so they never import the module that builds
    them (no import circle inside `store/`)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Created 0600 before SQLite opens it: the store holds tokens and registry passwords,
        # and SQLite gives its -wal/-shm files the database file's mode.
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        self.migrate()

    # -- connections and transactions --------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            # The API answers this with a clean 503 (the master stops), never an internal 500.
            raise MasterStopping(MASTER_STOPPING_MESSAGE)
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # isolation_level=None: we issue BEGIN/COMMIT ourselves (see `transaction`).
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
            conn.row_factory = sqlite3.Row
            if getattr(self._local, "reader", False):
                # A read pool thread: the database is already WAL (the writer made it so); any
                # write through this connection is refused.
                conn.execute("PRAGMA query_only=ON")
                conn.execute(f"PRAGMA mmap_size={READER_MMAP_BYTES}")
            else:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._local.conn = conn
            self._local.depth = 0
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE); nested uses join the outer one."""
        conn = self._connection()
        if self._local.depth:
            self._local.depth += 1
            try:
                yield conn
            finally:
                self._local.depth -= 1
            return
        conn.execute("BEGIN IMMEDIATE")
        self._local.depth = 1
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                # E.g. a full disk: end the transaction, or every later BEGIN on this
                # connection fails with "cannot start a transaction within a transaction".
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            self._local.depth = 0

    def mark_reader_thread(self) -> None:
        """Make the calling thread a reader: its connection (opened on its first use) is
        read-only. For the read pool's threads (_reads.py), before they touch the store."""
        if getattr(self._local, "conn", None) is not None:
            raise RuntimeError("mark_reader_thread: this thread already has a connection")
        self._local.reader = True

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside reads the same snapshot, that of the
        transactions committed when the first one ran (WAL). A reader's writes are refused."""
        conn = self._connection()
        if conn.in_transaction or self._local.depth:
            yield conn  # inside a transaction already: it is the snapshot
            return
        conn.execute("BEGIN")  # deferred: the snapshot is taken by the first read
        try:
            yield conn
        finally:
            # Nothing was written (or could be, on a reader): ending the transaction only
            # lets the WAL be checkpointed past this snapshot.
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def close(self) -> None:
        with self._connections_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
        self._closed = True
        self._local = threading.local()

    # -- schema ------------------------------------------------------------------------------
    def migrate(self) -> int:
        """Apply every migration not yet recorded; returns the schema version."""
        conn = self._connection()
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(version INTEGER PRIMARY KEY, applied REAL NOT NULL)"
        )
        with self.transaction():
            current = self.schema_version()
            for version, script in enumerate(MIGRATIONS, start=1):
                if version <= current:
                    continue
                for statement in script.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version (version, applied) VALUES (?, ?)",
                    (version, time.time()),
                )
        return self.schema_version()

    def schema_version(self) -> int:
        row = self._connection().execute("SELECT MAX(version) FROM schema_version").fetchone()
        return row[0] or 0

    def pragma(self, name: str) -> Any:
        return self._connection().execute(f"PRAGMA {name}").fetchone()[0]

    # -- generic row helpers -----------------------------------------------------------------
    @staticmethod
    def _decode(table: str, row: sqlite3.Row) -> dict:
        json_columns = JSON_COLUMNS.get(table, frozenset())
        out = dict(row)
        for key in json_columns & out.keys():
            if out[key] is not None:
                out[key] = json.loads(out[key])
        return out

    @staticmethod
    def _encode_columns(table: str, values: dict) -> dict:
        json_columns = JSON_COLUMNS[table]
        return {k: (_encode(v) if k in json_columns else v) for k, v in values.items()}

    def insert(self, table: str, **values: Any) -> int:
        encoded = self._encode_columns(table, values)
        columns = ", ".join(encoded)
        marks = ", ".join("?" for _ in encoded)
        with self.transaction() as conn:
            cursor = conn.execute(
                f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(encoded.values())
            )
            assert cursor.lastrowid is not None  # set by every INSERT
            return cursor.lastrowid

    def update(self, table: str, key: Any, *, key_column: str = "id", **values: Any) -> None:
        if not values:
            return
        encoded = self._encode_columns(table, values)
        assignments = ", ".join(f"{column} = ?" for column in encoded)
        with self.transaction() as conn:
            conn.execute(
                f"UPDATE {table} SET {assignments} WHERE {key_column} = ?", (*encoded.values(), key)
            )

    def get(self, table: str, key: Any, *, key_column: str = "id") -> dict | None:
        row = (
            self._connection()
            .execute(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,))
            .fetchone()
        )
        return None if row is None else self._decode(table, row)

    def select(
        self,
        table: str,
        where: str = "",
        params: Sequence[Any] = (),
        *,
        order: str = "id",
        limit: int | None = None,
    ) -> list[dict]:
        sql = f"SELECT * FROM {table}"
        if where:
            sql += f" WHERE {where}"
        if order:
            sql += f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._connection().execute(sql, tuple(params)).fetchall()
        return [self._decode(table, row) for row in rows]

    def select_sql(self, sql: str, params: Sequence[Any] = ()) -> list[dict]:
        """The rows of a read the store's modules write themselves (no JSON decoding)."""
        return [dict(row) for row in self._connection().execute(sql, tuple(params)).fetchall()]

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self._connection().execute(sql, tuple(params)).fetchone()
        return None if row is None else row[0]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self.transaction() as conn:
            conn.execute(sql, tuple(params))

    # -- batched inserts (ingestion hot paths) -----------------------------------------------
    def _insert_many(self, sql: str, rows: list[tuple]) -> list[int]:
        if not rows:
            return []
        with self.transaction() as conn:
            conn.executemany(sql, rows)
            # Inside one IMMEDIATE transaction nobody else writes, so the new rowids are the
            # contiguous range ending at last_insert_rowid().
            last = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        return list(range(last - len(rows) + 1, last + 1))

    def insert_metrics(self, rows: Iterable[dict]) -> list[int]:
        """Rows: dicts of trial_id, trial_run_id, group, steps_completed, metrics,
        batch_metrics, report_time."""
        encoded = [
            (
                r["trial_id"],
                r["trial_run_id"],
                r["group"],
                r["steps_completed"],
                _encode(r["metrics"]),
                _encode(r.get("batch_metrics")),
                r["report_time"],
            )
            for r in rows
        ]
        return self._insert_many(
            "INSERT INTO metrics (trial_id, trial_run_id, group_name, steps_completed, metrics,"
            " batch_metrics, report_time) VALUES (?, ?, ?, ?, ?, ?, ?)",
            encoded,
        )

    def insert_logs(self, rows: Iterable[tuple[int, int | None, str, float, str]]) -> list[int]:
        """Rows: (trial_id, rank, stream, time, line)."""
        return self._insert_many(
            "INSERT INTO logs (trial_id, rank, stream, time, line) VALUES (?, ?, ?, ?, ?)",
            list(rows),
        )

    def metric_rows(
        self,
        where: str,
        params: Sequence[Any],
        *,
        limit: int | None = None,
        order: str = "id",
        include_superseded: bool = False,
    ) -> list[dict]:
        """Metric reports with `group` for `group_name`; superseded reports (made by an earlier
        run past the checkpoint a later run resumed from) only when asked for."""
        if not include_superseded:
            where = (
                f"({where}) AND superseded_by_run IS NULL" if where else "superseded_by_run IS NULL"
            )
        rows = self.select("metrics", where, params, order=order, limit=limit)
        for row in rows:
            row["group"] = row.pop("group_name")
        return rows

    def insert_current_metrics(
        self, trial_id: int, rows: list[dict]
    ) -> tuple[list[int | None], list[int]]:
        """Insert one trial's reports so that a (group, steps_completed) reported again by a
        later run (a resumed run redoing steps) replaces the earlier runs' reports: those are
        marked superseded by the new report's run. A repeat of an existing report of the same
        run with equal metrics (a retried POST) is not stored again (its id is None).
        Returns (ids of the rows, ids of the reports superseded)."""
        if not rows:
            return [], []
        steps = sorted({r["steps_completed"] for r in rows})
        groups = sorted({r["group"] for r in rows})
        group_marks = ", ".join("?" for _ in groups)
        existing: dict[tuple[str, int], list[tuple[int, int, Any]]] = {}
        with self.transaction() as conn:
            for start in range(0, len(steps), 500):
                chunk = steps[start : start + 500]
                # Looked up in the (trial_id, group_name, steps_completed) index: a few index
                # probes per report however long the series. Named, because SQLite's planner
                # prefers an index with more `=` columns, (trial_id, group_name,
                # superseded_by_run, id), which scans the trial's whole series on every POST.
                for metric_id, group, step, run_id, metrics in conn.execute(
                    "SELECT id, group_name, steps_completed, trial_run_id, metrics FROM "
                    f"metrics INDEXED BY metrics_by_trial_group_steps WHERE trial_id = ? "
                    f"AND group_name IN ({group_marks}) AND steps_completed IN "
                    f"({', '.join('?' for _ in chunk)}) AND superseded_by_run IS NULL",
                    (trial_id, *groups, *chunk),
                ):
                    existing.setdefault((group, step), []).append(
                        (metric_id, run_id, json.loads(metrics))
                    )
            superseded: list[tuple[int, int]] = []  # (id, superseding run)
            fresh: list[dict] = []
            for row in rows:
                current = existing.setdefault((row["group"], row["steps_completed"]), [])
                if any(
                    run_id == row["trial_run_id"] and _same_metrics(metrics, row["metrics"])
                    for _, run_id, metrics in current
                ):
                    row["_repeat"] = True
                    continue
                for metric_id, run_id, _ in current:
                    if run_id < row["trial_run_id"]:
                        superseded.append((metric_id, row["trial_run_id"]))
                current[:] = [c for c in current if c[1] >= row["trial_run_id"]]
                current.append((-1, row["trial_run_id"], row["metrics"]))
                fresh.append(row)
            new_ids = iter(self.insert_metrics(fresh))
            ids = [None if row.pop("_repeat", False) else next(new_ids) for row in rows]
            if superseded:
                conn.executemany(
                    "UPDATE metrics SET superseded_by_run = ? WHERE id = ?",
                    [(run, metric_id) for metric_id, run in superseded],
                )
        return ids, [metric_id for metric_id, _ in superseded]


def _same_metrics(stored: Any, reported: Any) -> bool:
    """Equal metrics, NaN equal to NaN: a retried report of a diverged loss is a repeat too
    (`nan == nan` is False, so plain equality would store it twice)."""
    if stored == reported:
        return True
    try:
        return json.dumps(stored, sort_keys=True) == json.dumps(reported, sort_keys=True)
    except (TypeError, ValueError):
        return False


__all__ = ["Database"]
