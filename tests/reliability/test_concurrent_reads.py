"""Issue 26, row 17: reads are not serialized behind each other or behind the writes.

A GET /experiments is held inside its read (a gate in `Views.list_experiments`, after the read
transaction began): another read, a write and a read after that write are all answered while
it is held, and that last read sees the write. Were reads done on the event loop thread, the
held read would hold the loop and nothing else could be answered (the waits' timeouts are a
guard against a hung test, nothing is timed).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
import requests

from master_lite import MasterLite
from master_lite._core import Views

GUARD_SECONDS = 30
CONFIG = {
    "name": "reads",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
}


@pytest.mark.slow  # a real master, in this process
def test_reads_and_writes_are_answered_while_a_read_is_held(tmp_path, monkeypatch):
    started, opened = threading.Event(), threading.Event()
    held_threads: list[int] = []
    original = Views.list_experiments

    def gated(views: Views, **filters: object) -> list[dict]:
        if not held_threads:  # only the first list is held
            held_threads.append(threading.get_ident())
            views._shared.store.experiments.matching()  # the read transaction has begun
            started.set()
            opened.wait(GUARD_SECONDS)
        return original(views, **filters)

    monkeypatch.setattr(Views, "list_experiments", gated)
    app = MasterLite(root_dir=str(tmp_path / "root"), port=0, cpu_slots=1)
    events: list[str] = []

    async def scenario() -> None:
        url = await app.start()
        api = f"{url}/api/v1"
        headers = {"Authorization": f"Bearer {app.master.user_token}"}

        def call(method: str, path: str, **kwargs: object) -> requests.Response:
            return requests.request(
                method, api + path, headers=headers, timeout=GUARD_SECONDS, **kwargs
            )

        try:
            created = await asyncio.to_thread(
                call, "POST", "/experiments", json={"config": CONFIG, "activate": False}
            )
            exp_id = created.json()["experiment"]["id"]
            held = asyncio.ensure_future(asyncio.to_thread(call, "GET", "/experiments"))
            await asyncio.to_thread(started.wait, GUARD_SECONDS)
            events.append("list held")
            other = await asyncio.to_thread(call, "GET", f"/experiments/{exp_id}")
            events.append(f"other read answered {other.status_code}")
            patched = await asyncio.to_thread(
                call, "PATCH", f"/experiments/{exp_id}", json={"name": "renamed"}
            )
            events.append(f"write answered {patched.status_code}")
            after = await asyncio.to_thread(call, "GET", "/experiments")
            names = [e["name"] for e in after.json()["experiments"]]
            events.append(f"read after the write sees {names}")
            events.append("held list answered" if held.done() else "held list pending")
            opened.set()
            answer = await held
            events.append(f"held list answered {answer.status_code}")
        finally:
            opened.set()
            await app.stop()

    asyncio.run(scenario())
    assert events == [
        "list held",
        "other read answered 200",
        "write answered 200",
        "read after the write sees ['renamed']",
        "held list pending",
        "held list answered 200",
    ]
    assert threading.main_thread().ident not in held_threads  # the loop ran in the main thread
