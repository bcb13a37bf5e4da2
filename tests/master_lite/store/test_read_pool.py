"""The store's read pool (master_lite/store/_reads.py): reads in worker threads, each on a
read-only connection in one read transaction, beside each other and beside the writer.

Each test orders its events with `threading.Event`s; the waits' timeouts only guard against a
hung test (nothing is timed)."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from master_lite import errors
from master_lite.store import Store

GUARD_SECONDS = 30


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "master.db")
    yield store
    store.close()


def _experiment(store: Store, name: str) -> int:
    return store.experiments.create(
        name=name, state="ACTIVE", config={"searcher": {"name": "single"}}, start_time=1.0
    )


def _names(store: Store) -> list[str]:
    return [row.name for row in store.experiments.matching()]


def test_a_read_completes_while_another_read_holds_its_transaction(store):
    _experiment(store, "a")
    inside, release = threading.Event(), threading.Event()

    def long_read() -> list[str]:
        names = _names(store)  # the read transaction has begun: its snapshot is taken
        inside.set()
        release.wait(GUARD_SECONDS)
        return names

    held = store.reads.submit(long_read)
    try:
        assert inside.wait(GUARD_SECONDS)
        # Were reads serialized, this one would wait for the held one (released only below).
        assert store.reads.submit(_names, store).result(GUARD_SECONDS) == ["a"]
        assert not held.done()
    finally:
        release.set()
    assert held.result(GUARD_SECONDS) == ["a"]


def test_reads_proceed_while_the_writer_holds_a_write_transaction(store):
    _experiment(store, "committed")
    with store.transaction():
        _experiment(store, "uncommitted")
        # The writer's lock does not stop a reader, which sees only committed data.
        assert store.reads.submit(_names, store).result(GUARD_SECONDS) == ["committed"]
    assert store.reads.submit(_names, store).result(GUARD_SECONDS) == ["committed", "uncommitted"]


def test_a_read_after_an_acknowledged_write_sees_it(store):
    assert store.reads.submit(_names, store).result(GUARD_SECONDS) == []  # readers exist now
    for index in range(20):
        _experiment(store, f"e{index}")  # committed when this returns: the acknowledgment
        names = store.reads.submit(_names, store).result(GUARD_SECONDS)
        assert names[-1] == f"e{index}" and len(names) == index + 1


def test_every_query_of_one_read_sees_the_same_snapshot(store):
    _experiment(store, "before")
    first_done, written = threading.Event(), threading.Event()

    def two_queries() -> tuple[list[str], list[str]]:
        first = _names(store)
        first_done.set()
        written.wait(GUARD_SECONDS)
        return first, _names(store)

    read = store.reads.submit(two_queries)
    assert first_done.wait(GUARD_SECONDS)
    _experiment(store, "during")  # commits between the read's two queries
    written.set()
    assert read.result(GUARD_SECONDS) == (["before"], ["before"])
    assert store.reads.submit(_names, store).result(GUARD_SECONDS) == ["before", "during"]


def test_a_reader_cannot_write(store):
    read = store.reads.submit(_experiment, store, "sneaky")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        read.result(GUARD_SECONDS)
    assert _names(store) == []


def test_reads_run_off_the_calling_thread_and_stop_with_the_store(tmp_path):
    store = Store(tmp_path / "master.db")
    thread = store.reads.submit(threading.get_ident).result(GUARD_SECONDS)
    assert thread != threading.get_ident()
    store.close()
    # The API answers it 503 "the master is stopping", as a write to the closed store.
    with pytest.raises(errors.MasterStopping, match="the master is stopping"):
        store.reads.submit(_names, store)
