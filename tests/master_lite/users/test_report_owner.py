"""The trial-facing routes a user token may also call (reports, a run's close, a checkpoint
report) follow the owner-or-admin rule too (docs/team.md): bob's session
cannot end or write into alice's run (403 naming her, nothing changed), while the run's own
trial token and an admin still can."""

from __future__ import annotations

import uuid

from tests.master_lite.users.test_users_http import Api, with_api


@with_api
async def test_bob_cannot_report_into_or_close_alices_run(api: Api) -> None:
    await api.user("report_alice")
    await api.user("report_bob")
    alice, bob = await api.login("report_alice"), await api.login("report_bob")
    status, run = await api.call("POST", "/unmanaged/runs", {"name": "alices-run"}, token=alice)
    assert status == 200, run
    trial_id = run["trial_id"]
    refused = "belongs to report_alice: only report_alice or an admin may report to it"

    attempts = [
        (f"/unmanaged/trials/{trial_id}/close", {"state": "CANCELED"}),
        (f"/unmanaged/trials/{trial_id}/heartbeat", {}),
        (f"/unmanaged/trials/{trial_id}/logs", {"logs": [{"line": "bob was here"}]}),
        (f"/trials/{trial_id}/metrics", {}),  # refused before the body is read
        (f"/trials/{trial_id}/progress", {"progress": 0.5}),
        (f"/trials/{trial_id}/early_exit", {"reason": "ERRORED"}),
        (
            "/checkpoints",
            {"uuid": str(uuid.uuid4()), "trialId": trial_id, "metadata": {}, "resources": {}},
        ),
    ]
    for path, body in attempts:
        status, answer = await api.call("POST", path, body, token=bob)
        assert status == 403 and answer["message"].endswith(refused), (path, status, answer)

    status, answer = await api.call("GET", f"/trials/{trial_id}/logs", token=alice)
    assert "bob was here" not in str(answer)
    status, answer = await api.call("GET", f"/trials/{trial_id}", token=alice)
    assert answer["trial"]["state"] == "ACTIVE", answer
    status, answer = await api.call("GET", f"/experiments/{run['experiment_id']}/checkpoints")
    assert answer["checkpoints"] == []

    # The run's own token, then an admin (the owner account), still may.
    status, answer = await api.call(
        "POST", f"/unmanaged/trials/{trial_id}/heartbeat", {}, token=run["token"]
    )
    assert status == 200, answer
    status, answer = await api.call(
        "POST", f"/unmanaged/trials/{trial_id}/close", {"state": "CANCELED"}
    )
    assert status == 200 and answer["trial"]["state"] == "CANCELED", answer
