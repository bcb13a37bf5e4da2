"""`det image build` / `det image list` for real: Podman builds a Containerfile `FROM` a tiny test
image (with a `RUN` step, which needs the host settings the CLI shares with the master), and a
trial runs in the built image."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests._support import (
    CHECKPOINTING_SCRIPT,
    MasterProcess,
    child_env,
    submit,
    wait_for_experiment,
)
from tests._support.containers import TEST_PREFIX, remove_containers_of, remove_images
from tests.master_lite.runners.container.test_containers import PROBE, config, probe


def det(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )


def test_a_built_image_runs_trials_that_see_what_its_containerfile_added(
    start_master: Callable[..., MasterProcess], container_images: dict[str, str], tmp_path: Path
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "added.txt").write_text("added by COPY\n")
    containerfile = tmp_path / "Trial.containerfile"
    containerfile.write_text(
        f"FROM {container_images['a']}\n"
        "COPY added.txt /image-built.txt\n"
        # The tiny image has no /usr: the build's RUN gets the host's, passed through to podman.
        "RUN python3 -c \"open('/image-ran.txt', 'w').write('ran')\"\n"
    )
    name = f"{TEST_PREFIX}-built"
    stored = f"localhost/{name}:latest"
    master = start_master()
    try:
        built = det(
            "image", "build", "-t", name, "-f", str(containerfile), str(context),
            "--volume", "/usr:/usr:ro",
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
        assert "--ulimit" in built.stderr  # the command, with the host's settings, is shown
        assert f"built {stored}: trials use it with" in built.stdout
        assert f"image: {stored}" in built.stdout
        listed = det("image", "list")
        assert listed.returncode == 0 and f"localhost/{name}" in listed.stdout

        exp_id = submit(
            master, config(stored), {"probe.py": PROBE, "train.py": CHECKPOINTING_SCRIPT}
        )
        assert wait_for_experiment(master, exp_id)["state"] == "COMPLETED"
        (trial,) = master.trials(exp_id)
        markers = probe(master, trial["id"])["markers"]
        assert markers == ["image-a.txt", "image-built.txt", "image-ran.txt"]
    finally:
        remove_containers_of(master.root_dir)
        remove_images([stored])


def test_build_mistakes_are_one_clear_line(tmp_path: Path) -> None:
    missing = det("image", "build", "-t", "x", str(tmp_path / "nowhere"))
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"Error: {tmp_path / 'nowhere'}: not a directory (the build context: a directory)"
    )
    empty = det("image", "build", "-t", "x", str(tmp_path))
    assert empty.returncode == 1
    assert f"{tmp_path} has no Containerfile or Dockerfile" in empty.stderr
    (tmp_path / "Containerfile").write_text("FROM scratch\n")
    no_runtime = det("image", "build", "-t", "x", "--runtime", "no-such-runtime", str(tmp_path))
    assert no_runtime.returncode == 1
    assert "the container runtime 'no-such-runtime' is not installed" in no_runtime.stderr
    (tmp_path / "Containerfile").write_text("NOT-AN-INSTRUCTION x\n")
    failed = det("image", "build", "-t", f"{TEST_PREFIX}-broken", str(tmp_path))
    assert failed.returncode == 1
    assert failed.stderr.strip().endswith(
        "Error: podman build failed (exit code 125); its message is above"
    )
