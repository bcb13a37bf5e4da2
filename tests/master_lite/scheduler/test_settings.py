"""The scheduling settings: command line, traits and MASTER_LITE_* variables make one Policy;
a bad value stops master-lite at start with one line naming the setting."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from master_lite import _cli
from master_lite._app import MasterLite
from master_lite.scheduler import Policy


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in (
        "MASTER_LITE_SCHEDULER",
        "MASTER_LITE_PREEMPTION",
        "MASTER_LITE_SCHEDULER_MIN_RUN_SECONDS",
        "MASTER_LITE_MAX_SLOTS_PER_USER",
        "MASTER_LITE_USER_MAX_SLOTS",
        "MASTER_LITE_USER_WEIGHTS",
        "MASTER_LITE_RESOURCE_POOLS",
        "MASTER_LITE_DEFAULT_RESOURCE_POOL",
    ):
        monkeypatch.delenv(name, raising=False)


def test_the_default_is_fair_share_with_a_ten_second_minimum_run():
    assert MasterLite().scheduling_policy() == Policy(kind="fair_share", min_run_seconds=10)


def test_environment_variables_make_the_policy(monkeypatch):
    monkeypatch.setenv("MASTER_LITE_SCHEDULER", "priority")
    monkeypatch.setenv("MASTER_LITE_PREEMPTION", "false")
    monkeypatch.setenv("MASTER_LITE_SCHEDULER_MIN_RUN_SECONDS", "3")
    monkeypatch.setenv("MASTER_LITE_MAX_SLOTS_PER_USER", "4")
    monkeypatch.setenv("MASTER_LITE_USER_MAX_SLOTS", '{"alice": 8}')
    monkeypatch.setenv("MASTER_LITE_USER_WEIGHTS", '{"bob": 2}')
    monkeypatch.setenv("MASTER_LITE_RESOURCE_POOLS", '[{"pool_name": "cpu", "cpu_slots": 2}]')
    app = MasterLite()
    assert app.scheduling_policy() == Policy(
        kind="priority",
        preemption=False,
        min_run_seconds=3,
        max_slots_per_user=4,
        user_max_slots={"alice": 8},
        user_weights={"bob": 2.0},
    )
    assert app.resource_pools == [{"pool_name": "cpu", "cpu_slots": 2}]


def test_the_command_line_sets_the_traits():
    args = _cli._parser().parse_args(
        ["--scheduler", "priority", "--no-preemption", "--scheduler-min-run-seconds", "0"]
    )
    app = MasterLite(config=_cli._config(args))
    assert app.scheduling_policy() == Policy(kind="priority", preemption=False, min_run_seconds=0)


def test_bad_values_name_the_setting(monkeypatch, capsys):
    monkeypatch.setenv("MASTER_LITE_SCHEDULER", "round_robin")
    with pytest.raises(TraitError, match="MASTER_LITE_SCHEDULER='round_robin': expected one of"):
        MasterLite().scheduler  # noqa: B018
    monkeypatch.delenv("MASTER_LITE_SCHEDULER")
    monkeypatch.setenv("MASTER_LITE_USER_MAX_SLOTS", "{alice: 2}")
    with pytest.raises(TraitError, match="MASTER_LITE_USER_MAX_SLOTS is not valid JSON"):
        MasterLite().user_max_slots  # noqa: B018
    monkeypatch.delenv("MASTER_LITE_USER_MAX_SLOTS")
    monkeypatch.setenv("MASTER_LITE_USER_WEIGHTS", '{"bob": 0}')
    assert _cli.main(["--port", "0"]) == 2
    assert "user_weights: 'bob' must have a weight > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _cli.main(["--scheduler", "fifo"])
