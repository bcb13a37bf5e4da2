"""Images as Determined's configs name them.

Every 0.37/0.38 example config names one of Determined's published environment images
(`determinedai/tensorflow-ngc:0.38.1`, `determinedai/pytorch-ngc:...`,
`determinedai/environments:...`, or a `{cpu, cuda}` map of them). Where this machine cannot
have the image, the trial runs in the master's own environment as a host process, with one line
in its log saying so; `MasterLite.determined_images_fallback` off refuses them at submit. Other
missing images stay a submit error, whose hint names the Docker Hub reference a bare name means
(`docker.io/<name>`, `docker.io/library/<name>` only for official one-component names).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from determined.common.api import errors as api_errors
from master_lite.runners import ContainerRuntime
from master_lite.runners.container._stock import docker_hub_reference, is_determined_image
from tests._support import MasterProcess, submit, trial_logs, trials, wait_for_experiment

NOTE = "is Determined's published environment image"


@pytest.mark.parametrize(
    "image",
    [
        "determinedai/tensorflow-ngc:0.38.1",
        "determinedai/pytorch-ngc:0.38.1",
        "determinedai/pytorch-ngc-dev:0.38.1",
        "determinedai/environments:py-3.8-pytorch-1.12-tf-2.11-cpu-0.21.2",
        "determinedai/environments:cuda-11.3-pytorch-1.12-tf-2.11-gpu-0.26.4",
        "determinedai/environments-dev:py-3.9",
        "determinedai/pytorch-tensorflow-cpu:0.33.0",
        "determinedai/tensorflow-cuda:0.30.0",
        "docker.io/determinedai/environments:py-3.8-cpu",
        "determinedai/environments@sha256:" + "0" * 64,
    ],
)
def test_determineds_published_images_are_recognised(image: str) -> None:
    assert is_determined_image(image)


@pytest.mark.parametrize(
    "image",
    ["python:3.12", "determinedai/determined-master:0.38.1", "me/environments:1", "ngc:1"],
)
def test_other_images_are_not_determineds_environments(image: str) -> None:
    assert not is_determined_image(image)


@pytest.mark.parametrize(
    "image, reference",
    [
        ("python:3.12", "docker.io/library/python:3.12"),
        ("ubuntu", "docker.io/library/ubuntu"),
        ("determinedai/tensorflow-ngc:0.38.1", "docker.io/determinedai/tensorflow-ngc:0.38.1"),
        ("me/trainer:1", "docker.io/me/trainer:1"),
        ("registry.example.com/me/trainer:1", "registry.example.com/me/trainer:1"),
    ],
)
def test_bare_names_mean_docker_hub(image: str, reference: str) -> None:
    assert docker_hub_reference(image) == reference


def fake_runtime(tmp_path: Path, **options: object) -> ContainerRuntime:
    """A 'podman' whose local store has no image (every `image exists` fails)."""
    binary = tmp_path / "bin" / "podman"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nexit 1\n")
    binary.chmod(0o755)
    return ContainerRuntime(str(binary), root_dir=tmp_path / "root", **options)  # type: ignore[arg-type]


def image_config(image: object) -> dict:
    return {"environment": {"image": image}, "entrypoint": "python3 train.py"}


def test_a_missing_determined_image_stands_in_for_the_host(tmp_path: Path) -> None:
    runtime = fake_runtime(tmp_path)
    image = "determinedai/tensorflow-ngc:0.38.1"
    assert runtime.config_problems(image_config(image)) == []
    per_device = {
        "cpu": "determinedai/environments:py-3.8-cpu",
        "cuda": "determinedai/pytorch-ngc:1",
    }
    assert runtime.config_problems(image_config(per_device)) == []
    note = runtime.stand_in(image)
    assert note is not None and NOTE in note and image in note and "host process" in note
    assert "determined_images_fallback" in note
    assert runtime.stand_in("me/trainer:1") is None


def test_without_the_fallback_a_determined_image_is_a_missing_image(tmp_path: Path) -> None:
    runtime = fake_runtime(tmp_path, determined_images_fallback=False)
    image = "determinedai/tensorflow-ngc:0.38.1"
    assert runtime.stand_in(image) is None
    (problem,) = runtime.config_problems(image_config(image))
    assert f"environment.image: image '{image}' is not in podman's local image store" in problem
    assert f"'docker.io/{image}' for Docker Hub" in problem and "library/" not in problem


def test_unknown_bare_images_get_the_right_docker_hub_hint(tmp_path: Path) -> None:
    runtime = fake_runtime(tmp_path)
    (problem,) = runtime.config_problems(image_config("me/trainer:1"))
    assert "'docker.io/me/trainer:1' for Docker Hub" in problem
    (problem,) = runtime.config_problems(image_config("python:3.12"))
    assert "'docker.io/library/python:3.12' for Docker Hub" in problem
    config = {**image_config("me/trainer:1")}
    config["environment"]["force_pull_image"] = True
    (problem,) = runtime.config_problems(config)
    assert "'docker.io/me/trainer:1' for Docker Hub" in problem


TRAIN = """
import determined as det
from determined import core
import sys
with core.init() as ctx:
    ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.5})
print("ran in", sys.executable, flush=True)
"""


def experiment_config(image: object) -> dict:
    return {
        "name": "determined-image",
        "entrypoint": "python3 train.py",
        "environment": {"image": image},
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "max_restarts": 0,
    }


def test_determined_images_run_in_the_masters_environment(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master()
    for image in (
        "determinedai/tensorflow-ngc:0.38.1",
        {"cpu": "determinedai/environments:py-3.8-cpu", "cuda": "determinedai/pytorch-ngc:1"},
    ):
        exp_id = submit(master, experiment_config(image), {"train.py": TRAIN})
        experiment = wait_for_experiment(master, exp_id)
        (trial,) = trials(master, exp_id)
        lines = [entry["line"] for entry in trial_logs(master, trial["id"])]
        assert experiment["state"] == "COMPLETED", lines
        assert len([line for line in lines if NOTE in line]) == 1, lines
        assert any("ran in" in line for line in lines)


def test_the_fallback_off_refuses_determined_images_at_submit(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master(env={"MASTER_LITE_DETERMINED_IMAGES_FALLBACK": "false"})
    image = "determinedai/tensorflow-ngc:0.38.1"
    with pytest.raises(api_errors.APIError) as info:
        submit(master, experiment_config(image), {"train.py": TRAIN})
    assert "environment.image" in str(info.value)
    assert master.session.get("/experiments")["experiments"] == []


def test_the_fallback_setting_reaches_the_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from traitlets import TraitError

    from master_lite._app import MasterLite

    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path))
    monkeypatch.delenv("MASTER_LITE_DETERMINED_IMAGES_FALLBACK", raising=False)
    assert MasterLite().determined_images_fallback is True
    assert MasterLite().build_master()._container_runtime.determined_images_fallback is True
    monkeypatch.setenv("MASTER_LITE_DETERMINED_IMAGES_FALLBACK", "false")
    assert MasterLite().build_master()._container_runtime.determined_images_fallback is False
    assert MasterLite(determined_images_fallback=True).determined_images_fallback is True
    monkeypatch.setenv("MASTER_LITE_DETERMINED_IMAGES_FALLBACK", "maybe")
    with pytest.raises(TraitError, match="MASTER_LITE_DETERMINED_IMAGES_FALLBACK='maybe'"):
        _ = MasterLite().determined_images_fallback
