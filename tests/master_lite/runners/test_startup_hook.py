"""`startup-hook.sh`: sourced before the entrypoint, whatever the entrypoint (the master-level
behaviour is in tests/compat/test_launchers.py)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from master_lite.runners import (
    entrypoint_argv,
    has_startup_hook,
    plain_python_launch,
    with_startup_hook,
)

HARNESS = str(pathlib.Path(__file__).resolve().parents[3] / "harness")
SHELLS = ["sh"] + (["bash"] if shutil.which("bash") else [])


def run(argv: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = HARNESS + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("HOOK_VALUE", None)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("shell", SHELLS)
def test_exports_reach_the_entrypoint_and_output_is_kept(
    tmp_path: pathlib.Path, shell: str
) -> None:
    (tmp_path / "startup-hook.sh").write_text("echo from the hook\nexport HOOK_VALUE=7\n")
    assert has_startup_hook(tmp_path)
    argv = [sys.executable, "-c", "import os, sys; print(os.environ['HOOK_VALUE']); sys.exit(4)"]
    result = run(with_startup_hook(argv, shell=shell), tmp_path)
    assert result.returncode == 4  # the entrypoint's own status
    assert result.stdout == "from the hook\n7\n"
    assert "echo from the hook" in result.stderr  # traced, as Determined's `set -x`
    assert "failed" not in result.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_first_failing_command_ends_the_run(tmp_path: pathlib.Path, shell: str) -> None:
    (tmp_path / "startup-hook.sh").write_text("echo one\nsh -c 'exit 3'\necho two\n")
    result = run(with_startup_hook(["echo", "entrypoint ran"], shell=shell), tmp_path)
    assert result.returncode == 3
    assert result.stdout == "one\n"
    assert result.stderr.endswith(
        "startup-hook.sh failed with exit code 3; the entrypoint did not run\n"
    )


def test_exit_in_the_hook(tmp_path: pathlib.Path) -> None:
    (tmp_path / "startup-hook.sh").write_text("exit 0\n")
    result = run(with_startup_hook(["echo", "entrypoint ran"]), tmp_path)
    assert result.returncode == 0 and result.stdout == ""
    assert "startup-hook.sh exited (exit code 0) before the entrypoint ran" in result.stderr


def test_bash_syntax_is_allowed_where_bash_exists(tmp_path: pathlib.Path) -> None:
    if not shutil.which("bash"):
        pytest.skip("no bash")
    (tmp_path / "startup-hook.sh").write_text("words=(a b)\nexport HOOK_VALUE=${words[1]}\n")
    result = run(with_startup_hook(["sh", "-c", "echo $HOOK_VALUE"]), tmp_path)
    assert result.returncode == 0 and result.stdout == "b\n", result.stderr


def test_no_hook(tmp_path: pathlib.Path) -> None:
    assert not has_startup_hook(tmp_path)
    (tmp_path / "startup-hook.sh").mkdir()
    assert not has_startup_hook(tmp_path)


def test_a_trial_class_entrypoint_runs_after_the_hook(tmp_path: pathlib.Path) -> None:
    (tmp_path / "startup-hook.sh").write_text("export HOOK_VALUE=class\n")
    # The harness imports model_def from the context directory; importing it is enough here.
    (tmp_path / "model_def.py").write_text(
        "import os\nprint('imported with', os.environ['HOOK_VALUE'], flush=True)\n"
        "raise SystemExit(0)\n"
    )
    (tmp_path / "const.yaml").write_text(
        "entrypoint: model_def:MyTrial\nsearcher: {name: single, metric: loss, max_length: 1}\n"
    )
    argv = entrypoint_argv("model_def:MyTrial", python=sys.executable)
    result = run(with_startup_hook([*argv, "--config", "const.yaml"]), tmp_path)
    assert "imported with class" in result.stdout, result.stderr


def test_a_hooked_launch_never_uses_a_pre_started_interpreter() -> None:
    argv = entrypoint_argv("python3 train.py --epochs 1")
    env = {"PATH": os.environ.get("PATH", "")}
    assert plain_python_launch(argv, env) is not None
    assert plain_python_launch(with_startup_hook(argv), env) is None
