"""Warm kernels (`runners/kernel/_warm.py`) through a real `KernelRunner` and real ipykernel
kernels: the notebook's second trial takes a kernel that already imported its modules, a
changed import statement or a changed module file starts cold, nothing of one trial reaches
the next, and a launch with no warm kernel ready starts cold as before."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from master_lite.runners._base import LaunchSpec
from master_lite.runners.kernel import KernelRunner, _warm
from tests._support import context_tarball, wait_until
from tests._support.jupyter import JupyterServer

pytestmark = pytest.mark.slow

# `warmmod` lives outside the work dir (on PYTHONPATH, as an installed package would be);
# `email.mime.text` is a standard-library module a bare kernel has not imported.
SCRIPT = """
import json as _json, os, sys
state = {
    "preloaded": "email.mime.text" in sys.modules and "warmmod" in sys.modules,
    "leak": hasattr(_json, "_leaked_by_previous_trial"),
    "names": sorted(k for k in globals() if not k.startswith("_") and k not in ("os", "sys")),
    "det_x": os.environ.get("DET_X"),
    "reserve": "DET_PRESTARTED_ENV_RESERVE" in os.environ,
    "cwd": os.getcwd(),
    "proc_environ": b"DET_X=" + os.environ["DET_X"].encode() in open("/proc/self/environ", "rb").read(),
}
IMPORTS
_json._leaked_by_previous_trial = True
warmmod.counter.append(1)
print("STATE " + _json.dumps({**state, "counter": len(warmmod.counter)}))
"""
IMPORTS = "import email.mime.text\nimport warmmod"


class Trials:
    """A `KernelRunner` and the trials run on it one after another."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.lib = tmp_path / "lib"
        self.lib.mkdir()
        (self.lib / "warmmod.py").write_text("counter = []\n")
        self.logs: list[tuple] = []
        self.exits: dict[str, int] = {}
        self.ended = threading.Condition()
        self.runner = KernelRunner(log_sink=self.logs.extend, on_exit=self._on_exit)
        self.count = 0

    def _on_exit(self, allocation_id: str, code: int) -> None:
        with self.ended:
            self.exits[allocation_id] = code

    def run(self, imports: str = IMPORTS) -> tuple[dict, str]:
        """Run one trial of SCRIPT; (the state it printed, the master's kernel line)."""
        self.count += 1
        n = self.count
        work_dir = self.root / f"trial-{n}"
        work_dir.mkdir()
        (work_dir / "train.py").write_text(SCRIPT.replace("IMPORTS", imports))
        spec = LaunchSpec(
            f"alloc-{n}",
            n,
            ["python3", "train.py"],
            {"DET_X": str(n), "PYTHONPATH": str(self.lib)},
            work_dir,
            config={"entrypoint": "python3 train.py", "environment": {"kernel": {}}},
        )
        self.runner.launch(spec)
        wait_until(lambda: spec.allocation_id in self.exits, 120, f"trial {n} to end")
        mine = [r for r in self.logs if r[0] == n]
        assert self.exits[spec.allocation_id] == 0, mine
        (state,) = [json.loads(r[4][len("STATE ") :]) for r in mine if r[4].startswith("STATE ")]
        (started,) = [r[4] for r in mine if r[2] == "master" and "started" in r[4]]
        assert state["det_x"] == str(n) and state["cwd"] == os.path.realpath(work_dir)
        return state, started

    def warm_ready(self) -> None:
        wait_until(lambda: self.runner.warm.ready() or None, 120, "a warm kernel")


@pytest.fixture
def trials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Trials]:
    monkeypatch.setattr(_warm, "MIN_MODULES", 1)  # our few modules are worth warming here
    monkeypatch.setenv(_warm.WARM_ENV, "300")
    made = Trials(tmp_path)
    yield made
    made.runner.close()


def test_the_second_trial_takes_a_kernel_with_the_notebooks_modules_imported(
    trials: Trials,
) -> None:
    first, started = trials.run()
    assert not first["preloaded"] and "warm" not in started
    trials.warm_ready()
    second, started = trials.run()
    assert second["preloaded"], second
    assert "warm: " in started and "modules imported ahead" in started
    # As a fresh kernel in every other way: its own environment (in /proc too), cwd, namespace.
    assert not second["reserve"] and second["proc_environ"]
    assert second["names"] == first["names"]


def test_a_launch_right_after_the_first_waits_for_the_kernel_still_importing(
    trials: Trials,
) -> None:
    # A search's next trial comes at once: the warm kernel the first one's end started is
    # still importing, and started earlier than a cold one would.
    trials.run()
    second, started = trials.run()
    assert second["preloaded"] and "warm: " in started


def test_no_state_of_one_trial_reaches_the_next(trials: Trials) -> None:
    trials.run()
    trials.warm_ready()
    second, _ = trials.run()
    trials.warm_ready()
    third, started = trials.run()
    assert "warm: " in started
    for state in (second, third):
        # A module's state set by the previous trial is not seen: each kernel serves one trial.
        assert not state["leak"] and state["counter"] == 1, state


def test_a_changed_import_statement_starts_cold(trials: Trials) -> None:
    trials.run()
    trials.warm_ready()
    changed, started = trials.run(IMPORTS + "\nimport email.mime.image")
    assert not changed["preloaded"] and "warm" not in started


def test_a_changed_module_file_starts_cold(trials: Trials) -> None:
    trials.run()
    trials.warm_ready()
    module = trials.lib / "warmmod.py"
    module.write_text("counter = []  # edited\n")
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    second, started = trials.run()
    assert not second["preloaded"] and "warm" not in started


def test_without_a_ready_warm_kernel_the_trial_starts_cold(trials: Trials) -> None:
    # Turned off: nothing is kept, every trial starts cold.
    trials.runner.warm.idle_s = 0
    trials.run()
    assert not trials.runner.warm.ready()
    again, started = trials.run()
    assert not again["preloaded"] and "warm" not in started


def test_the_key_reads_the_scripts_import_statements(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = 1\n")
    key = _warm.warm_key("python3", {"A": "1"}, [], script)
    script.write_text("import torch\nx = 2  # not an import: same key\n")
    assert _warm.warm_key("python3", {"A": "1"}, [], script) == key
    script.write_text("import torch\nfrom sklearn import datasets\n")
    assert _warm.warm_key("python3", {"A": "1"}, [], script) != key
    script.write_text("def broken(:\n")
    assert _warm.warm_key("python3", {"A": "1"}, [], script) is None
    assert _warm.warm_key("python3", {"A": "1"}, [], None) is None
    script.write_text("import torch\n")
    # A relative PYTHONPATH entry resolves against the cwd: the waiting kernel's is elsewhere.
    assert _warm.warm_key("python3", {"PYTHONPATH": "lib"}, [], script) is None
    assert _warm.warm_key("python3", {"PYTHONPATH": "/opt/lib"}, [], script) is not None


HOSTED_SCRIPT = """
import sys
print("PRELOADED", "sklearn.linear_model" in sys.modules)
import sklearn.linear_model
"""


def test_a_hosted_masters_notebook_trial_takes_a_warm_kernel_of_the_jupyter_server(
    start_jupyter: Callable[..., JupyterServer],
) -> None:
    # Through the Jupyter server's kernel manager (JupyterLab lists the kernel), sandboxed as
    # a cold one; scikit-learn's ~1,000 modules are worth a warm kernel by default.
    server = start_jupyter(app="jupyter_server")
    config = {
        "name": "warm-hosted",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "environment": {"kernel": {"keep_alive": 0}},
    }
    body = {"config": json.dumps(config), "context": context_tarball({"train.py": HOSTED_SCRIPT})}
    logs = []
    for _ in range(2):
        exp_id = server.api("POST", "experiments", json=body)["experiment"]["id"]
        experiment = server.wait_experiment(exp_id)
        (trial,) = server.api("GET", f"experiments/{exp_id}/trials")["trials"]
        logs.append(server.trial_logs(trial["id"]))
        assert experiment["experiment"]["state"] == "COMPLETED", logs[-1]
        wait_until(lambda: _warm_kernel_of(server), 120, "the warm kernel")
    assert "PRELOADED False" in logs[0] and "warm: " not in logs[0], logs[0]
    assert "PRELOADED True" in logs[1], logs[1]
    (started,) = [line for line in logs[1].splitlines() if "kernel 'python3' started" in line]
    assert "Jupyter kernel" in started and "warm: " in started, started


def _warm_kernel_of(server: JupyterServer) -> bool:
    """Whether the server runs a warm kernel (its session is called `warm-kernel`)."""
    response = requests.get(
        server.base + "api/sessions", headers={"Authorization": f"token {server.token}"}, timeout=30
    )
    response.raise_for_status()
    return any(s.get("name") == "warm-kernel" for s in response.json())


# -- the pool alone, with stand-in kernels ------------------------------------------------------
class FakeKernel:
    """Answers every execute at once: `n` = 10 modules, `files` = none."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.replies: list[dict] = []
        self.down = False
        self.codes: list[str] = []

    def execute(self, code: str, *, silent: bool, user_expressions: dict) -> str:
        if self.fail:
            raise OSError("the kernel's channels are closed")
        self.codes.append(code)
        msg_id = f"m{len(self.codes)}"
        values = {"n": "10", "files": repr(repr({}))}
        expressions = {k: {"data": {"text/plain": values[k]}} for k in user_expressions}
        content = {"status": "ok", "user_expressions": expressions}
        self.replies.append({"parent_header": {"msg_id": msg_id}, "content": content})
        return msg_id

    def iopub(self, timeout: float) -> None:
        return None

    def shell(self) -> dict | None:
        return self.replies.pop(0) if self.replies else None

    def alive(self) -> bool:
        return not self.down

    def shutdown(self, now: bool) -> None:
        self.down = True


class FakeStarts:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.started: list[FakeKernel] = []

    def __call__(self, key: tuple, env: dict[str, str], cwd: str) -> FakeKernel:
        kernel = FakeKernel(self.fail)
        self.started.append(kernel)
        return kernel


MODULES = [f"m{i}" for i in range(_warm.MIN_MODULES)]


def _has_kernel(pool: _warm.WarmKernels, key: tuple) -> Callable[[], bool]:
    return lambda: any(w.key == key for w in pool.ready())


def test_the_pool_keeps_at_most_two_and_shuts_them_all_down_on_close() -> None:
    starts = FakeStarts()
    pool = _warm.WarmKernels(starts, idle_s=300)
    for name in ("a", "b", "c"):
        pool.learned((name,), {}, MODULES)
        wait_until(_has_kernel(pool, (name,)), 30, f"kernel {name}")
    assert [w.key for w in pool.ready()] == [("b",), ("c",)]
    assert starts.started[0].down  # the oldest made room
    pool.close()
    assert all(k.down for k in starts.started) and not pool.ready()


def test_a_pool_kernel_unused_for_idle_s_is_shut_down() -> None:
    starts = FakeStarts()
    pool = _warm.WarmKernels(starts, idle_s=0.05)
    pool.learned(("a",), {}, MODULES)
    wait_until(lambda: starts.started and starts.started[0].down, 30, "the idle kernel's end")
    assert not pool.ready()
    pool.close()


def test_few_modules_or_a_failed_start_mean_cold_starts_and_nothing_left_running() -> None:
    starts = FakeStarts()
    pool = _warm.WarmKernels(starts, idle_s=300)
    pool.learned(("a",), {}, MODULES[:-1])  # below MIN_MODULES: not worth a kernel
    assert pool.take(("a",)) is None and not starts.started
    failing = FakeStarts(fail=True)
    pool = _warm.WarmKernels(failing, idle_s=300)
    pool.learned(("a",), {}, MODULES)
    assert pool.take(("a",)) is None  # waited for the failed start, then cold
    assert failing.started and all(k.down for k in failing.started)
    pool.close()
