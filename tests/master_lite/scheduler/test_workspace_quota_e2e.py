"""A workspace's slot quota on a real master with a fake 4-GPU inventory and real trial
processes (issue 30; docs/scheduling.md, "Workspace quotas and default pools"), set with `det`
as Determined's: `det workspace create ml-team --resource-quota 2` keeps the workspace's
experiments at 2 slots (the waiting trials say why) while an experiment elsewhere uses the other
slots; every search completes with the results of a run alone."""

from __future__ import annotations

import json

import pytest

from tests._support.master import submit, trials
from tests._support.waiting import wait_until
from tests.cli.test_cli_verbs import det, failed, local_env, ok
from tests.master_lite.scheduler.test_sharing_e2e import TRAIN, expected, final_results, search

pytestmark = pytest.mark.slow


def in_workspace(name: str, vals: list[int], step_s: float = 0.05) -> dict:
    config = search(name, step_s=step_s)
    config["hyperparameters"]["h"]["vals"] = vals
    return config


def held_by(master, exp_ids: set[int]) -> int:
    """Slots held now by the trials of these experiments."""
    mine = {t["id"] for e in exp_ids for t in trials(master, e)}
    return sum(1 for s in master.session.get("/resources")["slots"] if s["trial_id"] in mine)


def test_a_workspace_quota_keeps_its_experiments_at_two_slots(start_master, tmp_path):
    master = start_master(cpu_slots=None, env={"MASTER_LITE_FAKE_GPUS": "4"})
    env = local_env(master, tmp_path / "home")  # the master's owner: an admin
    failed(
        det(env, "workspace", "create", "x", "--default-compute-pool", "tpu"),
        "'tpu' is not a resource pool of this master",
    )
    ok(det(env, "workspace", "create", "ml-team", "--resource-quota", "1"))
    ok(det(env, "project", "create", "ml-team", "vision"))
    out = ok(det(env, "workspace", "resource-quota", "set", "ml-team", "2"))
    assert out.strip() == "Resource quota 2 is set on workspace ml-team"
    described = json.loads(ok(det(env, "workspace", "describe", "ml-team", "--json")))
    assert described["resourceQuota"] == 2

    ml = {"workspace": "ml-team", "project": "vision"}
    first = submit(master.session, {**in_workspace("ml-1", [1, 2, 3]), **ml}, {"train.py": TRAIN})
    second = submit(master.session, {**in_workspace("ml-2", [4]), **ml}, {"train.py": TRAIN})
    other = submit(master.session, in_workspace("elsewhere", [1, 2], 0.15), {"train.py": TRAIN})
    team = {first, second}

    def team_at_quota_with_waiting() -> list[dict]:
        if held_by(master, team) != 2 or held_by(master, {other}) != 2:
            return []
        return [t for e in team for t in trials(master, e) if t["run_state"] == "QUEUED"]

    waiting = wait_until(team_at_quota_with_waiting, what="ml-team at 2 slots, others at 2")
    assert {t["wait_reason"] for t in waiting} == {
        "waiting: workspace ml-team is at its 2-slot quota"
    }
    seen_most = 0

    def done() -> bool:
        nonlocal seen_most
        seen_most = max(seen_most, held_by(master, team))
        states = {master.session.get(f"/experiments/{e}")["experiment"]["state"] for e in team}
        return states == {"COMPLETED"}

    wait_until(done, timeout=240, what="ml-team's searches to complete", interval=0.1)
    assert seen_most == 2
    assert final_results(master, first) == {h: expected(h) for h in (1, 2, 3)}
    assert final_results(master, second) == {4: expected(4)}
    assert final_results(master, other) == {h: expected(h) for h in (1, 2)}
    ok(det(env, "workspace", "resource-quota", "unset", "ml-team"))
    out = ok(det(env, "workspace", "edit", "ml-team", "--default-compute-pool", "default"))
    header, row = [line.split("|") for line in out.splitlines() if "|" in line][:2]
    cells = dict(zip([h.strip() for h in header], [c.strip() for c in row], strict=True))
    assert cells["Default Compute Pool"] == "default" and cells["Resource Quota"] == ""
