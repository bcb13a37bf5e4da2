"""`det job list/update` without a master: Determined's flags and aliases, the body sent, and
the table's columns (`name (id)`, the user, slots acquired/needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from determined.cli import _job, build_parser

JOB = {
    "jobId": "exp-3",
    "type": "TYPE_EXPERIMENT",
    "entityId": "3",
    "name": "second",
    "username": "carol",
    "priority": 42,
    "weight": 1.0,
    "requestedSlots": 2,
    "allocatedSlots": 0,
    "submissionTime": "2026-11-28T12:00:03.000Z",
    "summary": {"state": "STATE_QUEUED", "jobsAhead": 1},
    "position": 2,
}


class FakeSession:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def get(self, path: str, params: Any = None) -> dict:
        self.calls.append(("GET", path, params))
        return {"jobs": [JOB]}

    def post(self, path: str, body: Any = None) -> dict:
        self.calls.append(("POST", path, body))
        return {}


class FakeContext:
    def __init__(self) -> None:
        self.session = FakeSession()


def run(*argv: str) -> FakeContext:
    args = build_parser().parse_args(list(argv))
    ctx = FakeContext()
    assert args.handler(args, ctx) == 0
    return ctx


@pytest.mark.parametrize(
    ("flags", "update"),
    [
        (["--priority", "10"], {"priority": 10}),
        (["-w", "2.5"], {"weight": 2.5}),
        (["--ahead-of", "exp-2"], {"aheadOf": "exp-2"}),
        (["--behind-of", "2"], {"behindOf": "2"}),
        (["--behind", "exp-2"], {"behindOf": "exp-2"}),
        (["--resource-pool", "gpu"], {"resourcePool": "gpu"}),
    ],
)
def test_update_sends_one_queue_control(flags: list[str], update: dict) -> None:
    ctx = run("j", "u", "exp-3", *flags)
    assert ctx.session.calls == [
        ("POST", "/job-queues", {"updates": [{"jobId": "exp-3", **update}]})
    ]


def test_update_takes_exactly_one_action(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["job", "update", "exp-3"], ["job", "update", "3", "-p", "1", "-w", "2"]):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(argv)
        assert exit_.value.code == 2
    assert "--priority" in capsys.readouterr().err


def test_list_shows_determineds_columns_with_name_and_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ctx = run("job", "list", "-p", "gpu", "--limit", "5")
    assert ctx.session.calls == [
        ("GET", "/job-queues", {"offset": 0, "resourcePool": "gpu", "limit": 5})
    ]
    header, _, row = capsys.readouterr().out.splitlines()
    assert [h.strip() for h in header.split("|")] == _job.HEADERS
    assert [c.strip() for c in row.split("|")][:5] == [
        "1",
        "exp-3",
        "TYPE_EXPERIMENT",
        "second (3)",
        "42",
    ]
    assert [c.strip() for c in row.split("|")][-3:] == ["0/2", "STATE_QUEUED", "carol"]
    run("j", "ls", "--json")
    assert json.loads(capsys.readouterr().out) == {"jobs": [JOB]}
