"""The `slow` marker's rules (tests/_support/slow.py): which programs make a test slow, and that
a test not marked slow which starts one fails."""

from __future__ import annotations

import os

import pytest

from tests._support import REPO, slow

pytest_plugins = ["pytester"]

# What a master gives its trials (among more).
TRIAL_ENV = {"DET_CLUSTER_ID": "c", "DET_SESSION_TOKEN": "t", "DET_EXPERIMENT_CONFIG": "{}"}


@pytest.mark.parametrize(
    ("argv", "env", "what"),
    [
        (["python", "-m", "master_lite", "--port", "0", "--root-dir", "/r"], None, "a real master"),
        (["master-lite", "--root-dir", "/r"], None, "a real master"),
        (["python", "-m", "master_lite", "--kernel-gateway-url", "x:1"], None, "a real master"),
        (["python", "-m", "master_lite", "--help"], None, None),
        (["python", "-m", "jupyterlab", "--no-browser"], None, "a JupyterLab"),
        (["python", "-m", "kernel_gateway"], None, "a Jupyter Kernel Gateway"),
        (["python", "-m", "ipykernel_launcher", "-f", "k.json"], None, "a Jupyter kernel"),
        (["python", "-m", "master_lite._tensorboard_main"], None, "a TensorBoard"),
        (["/usr/bin/chromium", "--headless"], None, "Chromium"),
        (["podman", "run", "--rm", "img"], None, "podman run (a container or image)"),
        (["/usr/bin/podman", "import", "-", "x"], None, "podman import (a container or image)"),
        (["podman", "ps", "--all"], None, None),
        # a test's stand-in for podman, in its tmp_path
        (["/tmp/pytest-of-x/t0/rt/podman", "run", "img"], None, None),
        (["sh", "-c", "python3 train.py"], TRIAL_ENV, "a master's trial process"),
        # a launcher or runner test fakes part of a trial's environment
        (["python", "-m", "determined.exec.launch"], {"DET_EXPERIMENT_CONFIG": "{}"}, None),
        (["sh", "-c", "python3 train.py"], {"PATH": "/usr/bin"}, None),
        (["python", "-c", "pass"], None, None),
    ],
)
def test_programs_that_make_a_test_slow(argv, env, what):
    assert slow.slow_program(argv, env) == what


INNER_CONFTEST = """
import pytest

pytest_plugins = ["tests._support.slow"]


@pytest.fixture
def start_master():
    return None
"""

INNER_TESTS = """
import subprocess, sys

import pytest

TRIAL_ENV = {"DET_CLUSTER_ID": "c", "DET_SESSION_TOKEN": "t", "DET_EXPERIMENT_CONFIG": "{}"}


def test_starts_a_trial_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], env=TRIAL_ENV, check=True)


@pytest.mark.slow
def test_starts_a_trial_marked():
    subprocess.run([sys.executable, "-c", "pass"], env=TRIAL_ENV, check=True)


def test_uses_a_slow_fixture(start_master):
    pass


def test_starts_a_plain_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def test_the_guard_fails_an_unmarked_test_and_fixtures_mark_theirs(pytester, monkeypatch):
    """End to end, in a pytest of its own: `-m "not slow"` deselects the marked test and the one
    using a slow fixture; the unmarked test that starts a trial fails, naming what it started."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(REPO / "harness")]))
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-m", "not slow", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*not marked slow*", "*a master's trial process*"])


def test_the_fixtures_that_mark_a_test_slow_exist():
    """A renamed fixture would silently stop marking its tests: every name in SLOW_FIXTURES is
    a fixture of tests/_support/fixtures.py or tests/browser/conftest.py."""
    import ast

    defined = set()
    for path in (REPO / "tests/_support/fixtures.py", REPO / "tests/browser/conftest.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(
                "fixture" in ast.unparse(decorator) for decorator in node.decorator_list
            ):
                defined.add(node.name)
    assert slow.SLOW_FIXTURES <= defined
