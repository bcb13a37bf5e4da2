"""The job queue over HTTP (Determined's `GET/POST /api/v1/job-queues`; docs/scheduling.md,
"Job queue"), against a real Master and store: jobs listed per pool in queue order with
Determined's fields, moved ahead of/behind others (kept over a master restart), priority,
weight and pool changed, and every refusal: another user's job 403, an unknown one 404, a
finished one or one of another pool 400, nothing changed; `read_access: own` lists only the
reader's jobs and hides the others' (404).

The trials need 2 slots in pools of 1, so they wait for good: no trial process runs (but
the one moved to the 2-slot pool)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from master_lite._master import Master
from master_lite.scheduler import Policy
from tests._support import context_tarball
from tests.master_lite.users.test_users_http import Api, serving

POOLS = [
    {"pool_name": "a", "cpu_slots": 1},
    {"pool_name": "b", "cpu_slots": 1},
    {"pool_name": "big", "cpu_slots": 2},
]


def config(name: str, pool: str = "a") -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "resources": {"slots_per_trial": 2, "resource_pool": pool},
    }


async def submit(api: Api, token: str, name: str, pool: str = "a") -> int:
    status, answer = await api.call(
        "POST",
        "/experiments",
        {"config": config(name, pool), "context": context_tarball({"train.py": "print(1)\n"})},
        token=token,
    )
    assert status == 201, answer
    return int(answer["experiment"]["id"])


async def queue(api: Api, token: str = "master", **query: str) -> list[dict]:
    path = "/job-queues" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
    status, answer = await api.call("GET", path, token=token)
    assert status == 200, answer
    return answer["jobs"]


async def update(api: Api, token: str, *updates: dict) -> tuple[int, dict]:
    return await api.call("POST", "/job-queues", {"updates": list(updates)}, token=token)


def with_queue(read_access: str) -> Callable[[Callable], Callable]:
    """Run an async test against a started Master (two 1-slot pools)."""
    return lambda test: _with_queue(test, read_access)


def _with_queue(test: Callable, read_access: str) -> Callable:
    def wrapper(tmp_path: Path) -> None:
        root = tmp_path / "root"
        root.mkdir()

        def new_master() -> Master:
            return Master(
                root,
                cpu_slots=4,
                gpus=[],
                resource_pools=POOLS,
                read_access=read_access,
                scheduling=Policy(kind="priority", preemption=False),
            )

        async def body() -> None:
            served: list[contextlib.AbstractAsyncContextManager[Api]] = []

            async def start() -> Api:
                served.append(serving(new_master()))
                return await served[-1].__aenter__()

            async def restart(api: Api) -> Api:
                await served.pop().__aexit__(None, None, None)
                return await start()

            try:
                await test(await start(), restart)
            finally:
                for each in served:
                    await each.__aexit__(None, None, None)

        asyncio.run(asyncio.wait_for(body(), 120))

    wrapper.__name__ = test.__name__
    return wrapper


def order(jobs: list[dict]) -> list[tuple[str, str, int]]:
    return [(j["resourcePool"], j["jobId"], j["position"]) for j in jobs]


@with_queue("all")
async def test_jobs_are_listed_in_queue_order_and_moved_ahead_and_behind(api, restart) -> None:
    await api.user("jq_alice")
    bob_id = await api.user("jq_bob")
    alice, bob = await api.login("jq_alice"), await api.login("jq_bob")
    a1, a2 = await submit(api, alice, "a-one"), await submit(api, alice, "a-two")
    b1 = await submit(api, bob, "b-one")
    other = await submit(api, alice, "a-other-pool", pool="b")
    jobs = await queue(api)
    assert order(jobs) == [
        ("a", f"exp-{a1}", 1),
        ("a", f"exp-{a2}", 2),
        ("a", f"exp-{b1}", 3),
        ("b", f"exp-{other}", 1),
    ]
    job = jobs[2]
    assert job == {
        **job,
        "type": "TYPE_EXPERIMENT",
        "entityId": str(b1),
        "name": "b-one",
        "username": "jq_bob",
        "userId": bob_id,
        "workspaceId": 1,
        "priority": 42,
        "weight": 1.0,
        "requestedSlots": 2,
        "allocatedSlots": 0,
        "isPreemptible": True,
        "summary": {"state": "STATE_QUEUED", "jobsAhead": 2},
    }
    assert "needs 2 slots" in job["waitReason"] and job["submissionTime"].endswith("Z")
    assert [j["jobId"] for j in await queue(api, resourcePool="b")] == [f"exp-{other}"]

    # Bob moves his job ahead of alice's first one, then (bare id) just behind it.
    assert await update(api, bob, {"jobId": f"exp-{b1}", "aheadOf": f"exp-{a1}"}) == (200, {})
    assert [j["entityId"] for j in await queue(api, resourcePool="a")] == [
        str(b1),
        str(a1),
        str(a2),
    ]
    assert (await update(api, bob, {"jobId": str(b1), "behindOf": f"exp-{a1}"}))[0] == 200
    assert [j["entityId"] for j in await queue(api, resourcePool="a")] == [
        str(a1),
        str(b1),
        str(a2),
    ]
    # Alice moves her second job to the head; a restarted master keeps the order.
    assert (await update(api, alice, {"jobId": f"exp-{a2}", "aheadOf": f"exp-{a1}"}))[0] == 200
    api = await restart(api)
    assert [j["entityId"] for j in await queue(api, resourcePool="a")] == [
        str(a2),
        str(a1),
        str(b1),
    ]


@with_queue("all")
async def test_priority_weight_and_pool_changes_and_every_refusal(api, restart) -> None:
    await api.user("jq_alice")
    await api.user("jq_bob")
    alice, bob = await api.login("jq_alice"), await api.login("jq_bob")
    a1, a2 = await submit(api, alice, "a-one"), await submit(api, alice, "a-two")
    b1 = await submit(api, bob, "b-one")
    other = await submit(api, alice, "a-other-pool", pool="b")
    done = await submit(api, alice, "a-done")
    assert (await api.call("POST", f"/experiments/{done}/kill", token=alice))[0] == 200
    before = await queue(api)

    refusals = [
        # Another user's job: 403 naming its owner, even in a list with a valid update.
        (alice, [{"jobId": f"exp-{a1}", "priority": 5}, {"jobId": f"exp-{b1}", "priority": 5}],
         403, "jq_bob"),
        (alice, [{"jobId": "exp-999", "priority": 5}], 404, "999 not found"),
        (alice, [{"jobId": f"exp-{done}", "priority": 5}], 400, "finished"),
        (alice, [{"jobId": f"exp-{other}", "aheadOf": f"exp-{a1}"}], 400, "resource pool"),
        (alice, [{"jobId": f"exp-{a1}", "aheadOf": f"exp-{a1}"}], 400, "itself"),
        (alice, [{"jobId": f"exp-{a2}", "aheadOf": f"exp-{done}"}], 400, "not in the queue"),
        (alice, [{"jobId": f"exp-{a1}", "priority": 5, "weight": 2}], 400, "exactly one"),
        (alice, [{"jobId": "job-1", "priority": 5}], 400, "exp-3"),
        (alice, [{"jobId": f"exp-{a1}", "resourcePool": "nope"}], 400, "not a resource pool"),
        (alice, [{"jobId": f"exp-{a1}", "resourcePool": "b"}], 400, "could never start"),
        # A valid update before an unknown job: nothing is changed.
        (api.master.user_token,
         [{"jobId": f"exp-{a1}", "priority": 7}, {"jobId": "exp-998", "weight": 2}],
         404, "exp-998"),
    ]  # fmt: skip
    for token, updates, status, words in refusals:
        code, answer = await update(api, token, *updates)
        assert (code, words in answer.get("message", "")) == (status, True), (updates, answer)
    assert await queue(api) == before

    # Priority and weight change the experiment's config, as `det e set priority` does.
    assert (await update(api, alice, {"jobId": f"exp-{a2}", "priority": 10}))[0] == 200
    assert (await update(api, alice, {"jobId": f"exp-{a1}", "weight": 2.5}))[0] == 200
    _, experiment = await api.call("GET", f"/experiments/{a2}", token=alice)
    assert experiment["experiment"]["config"]["resources"]["priority"] == 10
    jobs = {j["entityId"]: j for j in await queue(api)}
    assert jobs[str(a2)]["position"] == 1 and jobs[str(a2)]["priority"] == 10
    assert jobs[str(a1)]["weight"] == 2.5
    # Moving next to a job of another priority takes its priority (Determined's move).
    assert (await update(api, alice, {"jobId": f"exp-{a1}", "aheadOf": f"exp-{a2}"}))[0] == 200
    jobs = {j["entityId"]: j for j in await queue(api)}
    assert (jobs[str(a1)]["position"], jobs[str(a1)]["priority"]) == (1, 10)


@pytest.mark.slow  # the moved trial starts in its new pool: a trial process
@with_queue("all")
async def test_a_pool_change_moves_the_waiting_trials_to_the_new_pool(api, restart) -> None:
    await api.user("jq_alice")
    alice = await api.login("jq_alice")
    a1, a2 = await submit(api, alice, "a-one"), await submit(api, alice, "a-two")
    assert (await update(api, alice, {"jobId": f"exp-{a2}", "resourcePool": "big"}))[0] == 200
    _, experiment = await api.call("GET", f"/experiments/{a2}", token=alice)
    assert experiment["experiment"]["config"]["resources"]["resource_pool"] == "big"
    # Its trial has the 2 slots it needs there: it left pool a's queue and started.
    assert [j["entityId"] for j in await queue(api, resourcePool="a")] == [str(a1)]
    trial = api.master.store.trials.of_experiment(a2)[0]
    assert api.master.runs.allocation_of_trial(trial.id) is not None


@with_queue("own")
async def test_read_access_own_lists_only_the_readers_jobs(api, restart) -> None:
    await api.user("jq_alice")
    await api.user("jq_bob")
    alice, bob = await api.login("jq_alice"), await api.login("jq_bob")
    a1 = await submit(api, alice, "a-one")
    b1 = await submit(api, bob, "b-one")
    assert [j["entityId"] for j in await queue(api, token=bob)] == [str(b1)]
    assert [j["entityId"] for j in await queue(api, token=alice)] == [str(a1)]
    assert len(await queue(api)) == 2  # the admin sees both
    status, answer = await api.call("GET", "/job-queues?resourcePool=nope", token=alice)
    assert status == 400 and "not a resource pool" in answer["message"]
    # Alice may not see bob's job: naming it is as for no job at all, nothing changed.
    code, answer = await update(api, alice, {"jobId": f"exp-{a1}", "aheadOf": f"exp-{b1}"})
    assert code == 404 and f"experiment {b1} not found" in answer["message"]
    code, answer = await update(api, alice, {"jobId": f"exp-{b1}", "priority": 1})
    assert code == 404 and f"experiment {b1}" in answer["message"]
    assert [j["priority"] for j in await queue(api)] == [42, 42]
