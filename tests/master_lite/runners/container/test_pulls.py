"""Images pulled from a registry by the trial's run (`environment.registry_auth`,
`force_pull_image`): a real registry on loopback (Debian's docker-registry, htpasswd auth, plain
http), real Podman, a real master."""

from __future__ import annotations

import base64
import json
import socket
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from determined.common.api import errors as api_errors
from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    submit,
    wait_for_experiment,
    wait_until,
)
from tests._support.containers import (
    RUNTIME,
    TEST_PREFIX,
    build_tiny_image,
    remove_containers_of,
    remove_images,
)
from tests._support.registry import PASSWORD, USER, Registry, start_registry
from tests.master_lite.runners.container.test_containers import PROBE, config, probe

CREDENTIALS = {"username": USER, "password": PASSWORD}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    running = start_registry(tmp_path_factory.mktemp("registry"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def pushed(registry: Registry) -> Iterator[str]:
    """A tiny image with /image-pulled.txt that is in the registry and not in the local store."""
    local = build_tiny_image(f"{TEST_PREFIX}-pulled", {"/image-pulled.txt": "pulled\n"})
    reference = registry.push(local, f"{TEST_PREFIX}-pulled:1")
    remove_images([local])
    yield reference
    remove_images([reference])


@pytest.fixture
def master(start_master: Callable[..., MasterProcess]) -> Iterator[MasterProcess]:
    running = start_master()
    yield running
    remove_containers_of(running.root_dir)


def image_exists(reference: str) -> bool:
    return subprocess.run([RUNTIME, "image", "exists", reference], timeout=60).returncode == 0


def pull_config(image: str, **environment: object) -> dict:
    cfg = config(image, entrypoint="python3 probe.py && python3 train.py")
    cfg["environment"].update(environment)
    return cfg


FILES = {"probe.py": PROBE, "train.py": CHECKPOINTING_SCRIPT}


def run_to_end(master: MasterProcess, cfg: dict) -> tuple[dict, dict, str]:
    """(experiment, its one trial, the trial's log text) once the experiment ended."""
    exp_id = submit(master, cfg, FILES)
    experiment = wait_for_experiment(master, exp_id)
    (trial,) = master.trials(exp_id)
    return experiment, trial, "\n".join(master.logs(trial["id"]))


def test_a_trial_pulls_its_image_with_the_configured_credentials(
    master: MasterProcess, registry: Registry, pushed: str
) -> None:
    remove_images([pushed])
    assert not image_exists(pushed)
    # Absent locally but named with its registry: accepted at submit, pulled by the run.
    experiment, trial, text = run_to_end(master, pull_config(pushed, registry_auth=CREDENTIALS))
    assert experiment["state"] == "COMPLETED", text
    assert f"master-lite: pulling image {pushed} from {registry.host}" in text
    assert probe(master, trial["id"])["markers"] == ["image-pulled.txt"]
    assert image_exists(pushed)
    assert PASSWORD not in text

    # Present now: the next run does not pull it again...
    experiment, trial, text = run_to_end(master, pull_config(pushed, registry_auth=CREDENTIALS))
    assert experiment["state"] == "COMPLETED", text
    assert "pulling image" not in text

    # ...unless forced to.
    cfg = pull_config(pushed, registry_auth=CREDENTIALS, force_pull_image=True)
    experiment, trial, text = run_to_end(master, cfg)
    assert experiment["state"] == "COMPLETED", text
    assert f"master-lite: pulling image {pushed} from {registry.host}" in text


@pytest.mark.parametrize(
    "registry_auth",
    [{"username": USER, "password": "wrong"}, None],
    ids=["wrong-password", "no-credentials"],
)
def test_a_pull_the_registry_refuses_fails_the_trial_saying_what_to_do(
    master: MasterProcess, registry: Registry, pushed: str, registry_auth: dict | None
) -> None:
    remove_images([pushed])
    cfg = pull_config(pushed, **({"registry_auth": registry_auth} if registry_auth else {}))
    experiment, trial, text = run_to_end(master, cfg)
    assert experiment["state"] == "ERROR"
    assert trial["state"] == "ERROR" and trial["exit_code"] == 125
    assert f"could not pull image {pushed} from the registry {registry.host}" in text
    assert "det image build" in text and "make image" in text
    # The runtime's own reason comes first, and no container was ever started.
    assert "unauthorized" in text.lower() or "authentication required" in text.lower(), text
    assert "could not start the container" not in text
    assert not image_exists(pushed)


def test_an_unreachable_registry_fails_the_trial_naming_it(
    master: MasterProcess, refused_port: int
) -> None:
    image = f"127.0.0.1:{refused_port}/{TEST_PREFIX}-nowhere:1"
    experiment, trial, text = run_to_end(master, pull_config(image))
    assert experiment["state"] == "ERROR"
    assert f"could not pull image {image} from the registry 127.0.0.1:{refused_port}" in text
    assert "connection refused" in text.lower(), text


def test_images_that_no_registry_can_bring_are_refused_at_submit(
    master: MasterProcess, container_images: dict[str, str], tmp_path: Path
) -> None:
    bare = f"{TEST_PREFIX}-no-such-image"
    with pytest.raises(api_errors.APIError) as info:
        submit(master, pull_config(bare), FILES)
    message = str(info.value)
    assert f"environment.image: image '{bare}' is not in podman's local image store and " in (
        message
    )
    assert "names no registry" in message and "det image build" in message
    # A local image (podman's localhost/ names) cannot be force-pulled: there is no registry.
    with pytest.raises(api_errors.APIError) as info:
        submit(master, pull_config(container_images["a"], force_pull_image=True), FILES)
    assert (
        f"environment.force_pull_image: environment.image '{container_images['a']}' names no "
        "registry" in str(info.value)
    )
    assert master.session.get("/experiments")["experiments"] == []


def pull_processes(image: str) -> list[list[str]]:
    """Command lines of the running `podman pull` processes of `image`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        words = [arg.decode(errors="replace") for arg in argv]
        if len(words) > 2 and Path(words[0]).name == "podman" and "pull" in words:
            if words[-1] == image:
                found.append(words)
    return found


def test_credentials_stay_off_command_lines_and_a_kill_ends_a_pull_that_hangs(
    master: MasterProcess,
) -> None:
    # A registry that accepts connections and never answers: the pull waits until killed.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        image = f"{host}/{TEST_PREFIX}-hangs:1"
        exp_id = submit(master, pull_config(image, registry_auth=CREDENTIALS), FILES)
        (trial,) = wait_until(lambda: master.trials(exp_id), 30, "the trial")
        wait_until(
            lambda: f"pulling image {image} from {host}" in "\n".join(master.logs(trial["id"])),
            60,
            "the pull to start",
        )
        (argv,) = wait_until(lambda: pull_processes(image), 60, "the podman pull process")
        assert not [arg for arg in argv if PASSWORD in arg], argv
        auth_file = Path(argv[argv.index("--authfile") + 1])
        assert auth_file.parent.parent == master.root_dir / "pulls"
        assert stat.S_IMODE(auth_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(auth_file.parent.stat().st_mode) == 0o700
        assert (
            json.loads(auth_file.read_text())["auths"][host]["auth"]
            == base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        )

        master.session.post(f"/experiments/{exp_id}/kill")
        assert wait_for_experiment(master, exp_id)["state"] == "CANCELED"
        wait_until(lambda: pull_processes(image) == [], 60, "the pull to end")
        assert not auth_file.parent.exists(), "the credentials outlived the run"


def test_credentials_a_crashed_master_left_are_removed_by_the_next(
    start_master: Callable[..., MasterProcess], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    left = root / "pulls" / "run-abc123"
    left.mkdir(parents=True)
    (left / "config.json").write_text('{"auths": {}}')
    start_master(root_dir=root)
    wait_until(lambda: not left.exists(), 60, "the leftover pull directory to go")


def test_a_pause_during_a_pull_that_hangs_stops_the_pull(
    start_master: Callable[..., MasterProcess],
) -> None:
    master = start_master(env={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "1"})
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        image = f"{host}/{TEST_PREFIX}-hangs:2"
        exp_id = submit(master, pull_config(image), FILES)
        wait_until(lambda: pull_processes(image), 60, "the podman pull process")
        # The trial cannot answer the preemption (it has not started): the grace ends the pull.
        master.session.post(f"/experiments/{exp_id}/pause")
        wait_until(lambda: master.trials(exp_id)[0]["state"] == "PAUSED", 60, "the trial to pause")
        wait_until(lambda: pull_processes(image) == [], 60, "the pull to end")
        assert not list((master.root_dir / "pulls").iterdir())
