"""`%%det_submit`'s config in a Jupyter server with `notebook_trials_in_kernels` (the server
extension exports DET_NOTEBOOK_TRIALS_IN_KERNELS=1 to its kernels): trials run in a kernel
unless the config picks where they run or needs several slots."""

from __future__ import annotations

import pytest

from jupyter_determined.kernel._magics import build_config

BASE = {"name": "k", "searcher": {"name": "single", "metric": "x", "max_length": 1}}


def built(monkeypatch: pytest.MonkeyPatch, flag: str | None, **extra: object) -> dict:
    if flag is None:
        monkeypatch.delenv("DET_NOTEBOOK_TRIALS_IN_KERNELS", raising=False)
    else:
        monkeypatch.setenv("DET_NOTEBOOK_TRIALS_IN_KERNELS", flag)
    return build_config({**BASE, **extra}, name=None, notebook_path=None)


def test_a_notebook_trial_runs_in_a_kernel_when_the_server_says_so(monkeypatch) -> None:
    config = built(monkeypatch, "1", environment={"environment_variables": ["A=1"]})
    assert config["environment"] == {"environment_variables": ["A=1"], "kernel": {}}
    assert built(monkeypatch, "1")["environment"] == {"kernel": {}}


def test_the_config_or_the_server_can_say_otherwise(monkeypatch) -> None:
    assert "environment" not in built(monkeypatch, "0")
    assert "environment" not in built(monkeypatch, None)  # not in a Jupyter server
    image = built(monkeypatch, "1", environment={"image": "python:3.11"})
    assert image["environment"] == {"image": "python:3.11"}
    own = built(monkeypatch, "1", environment={"kernel": {"keep_alive": 0}})
    assert own["environment"] == {"kernel": {"keep_alive": 0}}
    distributed = built(monkeypatch, "1", resources={"slots_per_trial": 2})
    assert "environment" not in distributed
