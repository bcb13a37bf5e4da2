"""Pre-started interpreters: a `python3 <script.py>` trial run by a spare sees what a fresh
process would (environment, cwd, argv, sys.path, __main__, stdio, signals, exit status)."""

import json
import os
import pathlib
import signal
import sys
import threading

import pytest

from master_lite.runners import LaunchSpec, LocalRunner, entrypoint_argv, kill_orphaned_group
from master_lite.runners.process._prestart import plain_python_launch
from tests._support import wait_until

pytestmark = pytest.mark.skipif(
    not pathlib.Path("/proc/self/fd").exists(), reason="the probes read /proc"
)

# Everything a script can observe about how it was started.
PROBE = r"""
import json, os, signal, stat, sys
import __main__
def describe(stream):
    return {"fileno": stream.fileno(), "encoding": stream.encoding, "errors": stream.errors,
            "line_buffering": stream.line_buffering, "write_through": stream.write_through,
            "kind": stat.S_IFMT(os.fstat(stream.fileno()).st_mode)}
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
# A pre-started interpreter already runs the Core API's report courier (its pipes: the known
# difference); a fresh process starts one at its first report.
courier = getattr(sys.modules.get("determined.core._courier"), "_spare_child", None)
courier_fds = [courier.stdin.fileno(), courier.stdout.fileno()] if courier else []
null = os.stat(os.devnull)
stdin = os.fstat(0)
report = {
    "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "cwd": os.getcwd(),
    "environ": dict(os.environ), "executable": sys.executable, "file": __file__,
    "name": __name__, "main_is_module": sys.modules["__main__"] is __main__,
    "main_globals": sorted(k for k in vars(__main__) if k.startswith("__")),
    "main_loader": type(__main__.__loader__).__name__, "main_spec": __main__.__spec__,
    "stdin_is_devnull": (stdin.st_rdev, stat.S_IFMT(stdin.st_mode))
                        == (null.st_rdev, stat.S_IFMT(null.st_mode)),
    "stdout": describe(sys.stdout), "stderr": describe(sys.stderr),
    "group": os.getpgid(0), "session": os.getsid(0),
    "signals": {name: str(signal.getsignal(getattr(signal, name)))
                for name in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGUSR1", "SIGCHLD")},
    "open_fds": len(fds) - 1 - len(courier_fds),  # listdir's own fd, the courier's pipes
    "courier_fds": courier_fds,
    "flags": list(sys.flags), "hash": hash("determined"), "pid": os.getpid(),
}
print("PROBE " + json.dumps(report), flush=True)
"""


class Collector:
    def __init__(self):
        self.records = []
        self.exits = {}
        self.lock = threading.Lock()

    def sink(self, records):
        with self.lock:
            self.records.extend(records)

    def on_exit(self, allocation_id, code):
        self.exits[allocation_id] = code

    def lines(self, stream=None):
        with self.lock:
            return [r[4] for r in self.records if stream is None or r[2] == stream]


def trial_env(tmp_path, allocation_id):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    root = pathlib.Path(__file__).resolve().parents[4]
    env["PYTHONPATH"] = os.pathsep.join([str(root / "harness"), str(root)])
    env.update(
        PYTHONUNBUFFERED="1",
        DET_ALLOCATION_ID=allocation_id,
        DET_TRIAL_ID=allocation_id.split("-")[1].split(".")[0],
        CUDA_VISIBLE_DEVICES="",
    )
    return env


def work_dir(tmp_path, allocation_id, script):
    trial, run = allocation_id[len("trial-") :].split(".")
    path = tmp_path / "trials" / trial / f"run-{run}"
    path.mkdir(parents=True)
    (path / "train.py").write_text(script)
    return path


def run_trial(runner, collector, tmp_path, allocation_id, script, entrypoint="python3 train.py"):
    spec = LaunchSpec(
        allocation_id=allocation_id,
        trial_id=1,
        argv=entrypoint_argv(entrypoint),
        env=trial_env(tmp_path, allocation_id),
        work_dir=work_dir(tmp_path, allocation_id, script),
    )
    pid = runner.launch(spec)
    wait_until(lambda: allocation_id in collector.exits, 60, f"{allocation_id} to exit", 0.02)
    return pid, spec, collector.exits[allocation_id]


def start_spares(runner, collector, tmp_path, count=1):
    """Spares start when a launch follows another soon after: run two quick trials."""
    for n in (98, 99):
        run_trial(runner, collector, tmp_path, f"trial-{n}.1", "pass\n")
    return wait_for_spares(runner, count)


def wait_for_spares(runner, count=1):
    wait_until(
        lambda: len(runner.spare_pool.spares()) >= count, 60, "a pre-started interpreter", 0.02
    )
    return runner.spare_pool.spares()


def probe(collector, launched_pid):
    """The report of the trial whose process group the runner started as `launched_pid` (a
    fresh `sh -c` trial's interpreter is the shell's child, in the shell's group)."""
    reports = [
        json.loads(line[len("PROBE ") :])
        for line in collector.lines("stdout")
        if line.startswith("PROBE ")
    ]
    return {r["group"]: r for r in reports}[launched_pid]


@pytest.fixture
def runner():
    collector = Collector()
    runner = LocalRunner(log_sink=collector.sink, on_exit=collector.on_exit, prestarted=1)
    runner.collector = collector
    yield runner
    runner.close()


def test_only_plain_python_script_entrypoints_qualify():
    env = {
        "PATH": "/bin",
        "PYTHONPATH": "/abs/a:/abs/b",
        "DET_TRIAL_ID": "3",
        "C10D_PORT": "1",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    plain = plain_python_launch(entrypoint_argv("python3 train.py --lr=0.1 x"), env)
    assert plain is not None
    assert (plain.interpreter, plain.script_argv) == ("python3", ["train.py", "--lr=0.1", "x"])
    # The spare starts without what names one allocation, and only that differs between keys.
    assert plain.spare_env == {"PATH": "/bin", "PYTHONPATH": "/abs/a:/abs/b"}
    other = plain_python_launch(
        entrypoint_argv("python3 train.py --lr=0.1 x"), dict(env, DET_TRIAL_ID="4", C10D_PORT="2")
    )
    assert other.key == plain.key
    assert (
        plain_python_launch(entrypoint_argv("python3 train.py"), dict(env, TZ="UTC")).key
        != plain.key
    )
    for entrypoint in (
        "python3 -m pkg.train",
        "python3 train.py > out.log",
        "python3 train.py $ARG",
        "python3 'my train.py'",
        "cd x && python3 t.py",
        "FOO=1 python3 train.py",
        "python3 -u train.py",
        "torchrun train.py",
        "python3 train.sh",
        "model_def:MyTrial",
        "train.ipynb",
    ):
        assert plain_python_launch(entrypoint_argv(entrypoint), env) is None, entrypoint
    assert plain_python_launch(["python3", "train.py"], env) is None  # a list entrypoint: as is
    # Relative PYTHONPATH entries depend on the directory the interpreter started in.
    assert (
        plain_python_launch(
            entrypoint_argv("python3 train.py"), dict(env, PYTHONPATH="harness:/abs")
        )
        is None
    )
    assert (
        plain_python_launch(entrypoint_argv("python3 train.py"), dict(env, PYTHONPATH="/abs:"))
        is None
    )


def test_a_prestarted_trial_sees_what_a_fresh_process_sees(runner, tmp_path):
    collector = runner.collector
    fresh_pid, fresh_spec, code = run_trial(runner, collector, tmp_path, "trial-1.1", PROBE)
    assert code == 0
    (spare,) = start_spares(runner, collector, tmp_path)
    spare_pid, spare_spec, code = run_trial(runner, collector, tmp_path, "trial-2.1", PROBE)
    assert code == 0
    assert spare_pid == spare.process.pid != fresh_pid  # the second one ran in the spare
    fresh, prestarted = probe(collector, fresh_pid), probe(collector, spare_pid)

    # `sh -c` exports PWD; the rest is the launch's environment, untouched.
    assert prestarted["environ"] == dict(spare_spec.env, PWD=str(spare_spec.work_dir))
    assert fresh["environ"] == dict(fresh_spec.env, PWD=str(fresh_spec.work_dir))
    assert prestarted["cwd"] == str(spare_spec.work_dir)
    for report, spec in ((fresh, fresh_spec), (prestarted, spare_spec)):
        assert report["file"] == str(spec.work_dir / "train.py")
        assert report["path"][0] == str(spec.work_dir)
    assert prestarted["path"][1:] == fresh["path"][1:]
    same = (
        "argv",
        "orig_argv",
        "executable",
        "name",
        "main_is_module",
        "main_globals",
        "main_loader",
        "main_spec",
        "stdin_is_devnull",
        "stdout",
        "stderr",
        "signals",
        "open_fds",
        "flags",
    )
    assert {k: prestarted[k] for k in same} == {k: fresh[k] for k in same}
    assert prestarted["argv"] == ["train.py"] and prestarted["stdin_is_devnull"]
    assert len(prestarted["courier_fds"]) == 2 and fresh["courier_fds"] == []
    # Both run in the session and process group the runner signals (the pid it returned).
    assert (fresh["group"], fresh["session"]) == (fresh_pid, fresh_pid)
    assert (prestarted["group"], prestarted["session"]) == (spare_pid, spare_pid)


def test_each_prestarted_trial_is_its_own_process_with_its_own_hash_seed(runner, tmp_path):
    collector = runner.collector
    start_spares(runner, collector, tmp_path)
    pids = []
    for n in (2, 3):
        (spare,) = wait_for_spares(runner)
        pid, _, code = run_trial(runner, collector, tmp_path, f"trial-{n}.1", PROBE)
        assert code == 0 and pid == spare.process.pid
        pids.append(pid)
    first, second = probe(collector, pids[0]), probe(collector, pids[1])
    assert first["hash"] != second["hash"]  # string hashing is randomized per process


def test_exit_status_and_uncaught_exceptions_as_from_a_fresh_process(runner, tmp_path):
    collector = runner.collector
    failing = (
        "import sys\nprint('before', flush=True)\n"
        "def inner():\n    raise ValueError('boom')\ninner()\n"
    )
    outcomes = {}
    for n, (name, script) in enumerate(
        [
            ("exit3", "import sys\nsys.exit(3)\n"),
            ("raise", failing),
            ("syntax", "def broken(:\n"),
            ("message", "raise SystemExit('bye')\n"),
        ],
        start=1,
    ):
        (spare,) = start_spares(runner, collector, tmp_path) if n == 1 else wait_for_spares(runner)
        with collector.lock:
            collector.records.clear()
        pid, _, code = run_trial(runner, collector, tmp_path, f"trial-{n}.1", script)
        assert pid == spare.process.pid
        outcomes[name] = (code, collector.lines("stderr"))
    assert outcomes["exit3"][0] == 3
    code, stderr = outcomes["raise"]
    assert code == 1
    assert stderr[0] == "Traceback (most recent call last):"
    assert stderr[-1] == "ValueError: boom"
    assert not any("prestarted" in line or "<string>" in line for line in stderr)
    assert sum('train.py", line' in line for line in stderr) == 2  # <module> and inner()
    code, stderr = outcomes["syntax"]
    assert code == 1 and stderr[-1].startswith("SyntaxError")
    assert not any(line.startswith("Traceback") for line in stderr)
    assert outcomes["message"] == (1, ["bye"])


def test_a_missing_script_fails_like_the_interpreter_says(runner, tmp_path):
    collector = runner.collector
    (spare,) = start_spares(runner, collector, tmp_path)
    with collector.lock:
        collector.records.clear()
    pid, spec, code = run_trial(
        runner, collector, tmp_path, "trial-2.1", "pass\n", entrypoint="python3 missing.py"
    )
    assert pid == spare.process.pid and code == 2
    assert collector.lines("stderr") == [
        f"python3: can't open file {str(spec.work_dir / 'missing.py')!r}: "
        "[Errno 2] No such file or directory"
    ]


def test_proc_environ_shows_the_trial_environment_so_orphans_are_found(runner, tmp_path):
    collector = runner.collector
    (spare,) = start_spares(runner, collector, tmp_path)
    spec = LaunchSpec(
        allocation_id="trial-2.1",
        trial_id=2,
        argv=entrypoint_argv("python3 train.py"),
        env=dict(
            trial_env(tmp_path, "trial-2.1"),
            DET_SESSION_TOKEN="tok-2",
            DET_EXPERIMENT_CONFIG="{" + "x" * 20000 + "}",
        ),
        work_dir=work_dir(
            tmp_path, "trial-2.1", "import time\nprint('up', flush=True)\ntime.sleep(600)\n"
        ),
    )
    pid = runner.launch(spec)
    assert pid == spare.process.pid
    wait_until(lambda: "up" in collector.lines("stdout"), 60, "the trial's output", 0.02)
    # The master finds its runs (after a restart) by what the kernel shows there.
    entries = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    shown = dict(entry.decode().split("=", 1) for entry in entries if entry)
    assert shown == dict(spec.env, PWD=str(spec.work_dir))
    assert not kill_orphaned_group(pid, "trial-3.1")
    assert kill_orphaned_group(pid, "trial-2.1")
    wait_until(lambda: "trial-2.1" in collector.exits, 60, "the killed trial's exit", 0.02)
    assert collector.exits["trial-2.1"] == 128 + signal.SIGKILL


def test_an_environment_too_large_for_the_spare_starts_fresh(runner, tmp_path):
    collector = runner.collector
    (spare,) = start_spares(runner, collector, tmp_path)
    big = "{" + "x" * 100_000 + "}"
    spec = LaunchSpec(
        allocation_id="trial-2.1",
        trial_id=2,
        argv=entrypoint_argv("python3 train.py"),
        env=dict(trial_env(tmp_path, "trial-2.1"), DET_EXPERIMENT_CONFIG=big),
        work_dir=work_dir(
            tmp_path, "trial-2.1", "import os\nprint(len(os.environ['DET_EXPERIMENT_CONFIG']))\n"
        ),
    )
    pid = runner.launch(spec)
    assert pid != spare.process.pid
    wait_until(lambda: "trial-2.1" in collector.exits, 60, "the trial to exit", 0.02)
    assert collector.exits["trial-2.1"] == 0 and str(len(big)) in collector.lines("stdout")
    assert runner.spare_pool.spares()[0] is spare  # still there for the next launch


def test_spares_exit_when_retired_or_when_turned_off(tmp_path):
    collector = Collector()
    off = LocalRunner(log_sink=collector.sink, on_exit=collector.on_exit, prestarted=0)
    assert off.spare_pool is None
    runner = LocalRunner(log_sink=collector.sink, on_exit=collector.on_exit, prestarted=2)
    spares = start_spares(runner, collector, tmp_path, 2)
    runner.close()
    for spare in spares:
        assert spare.process.wait(timeout=60) == 0  # end of file on its control pipe
    assert runner.spare_pool.spares() == []


def test_locale_coercion_matches_a_fresh_interpreter(runner, tmp_path, monkeypatch):
    """With a C locale the interpreter sets LC_CTYPE at start-up (PEP 538); a spare did that
    before it knew the trial, and must keep it as a fresh process would."""
    collector = runner.collector
    # A run's environment is the master's under its own: the master has no locale either.
    for name in list(os.environ):
        if name.startswith(("LC_", "LANG")):
            monkeypatch.delenv(name)

    def env_for(allocation_id):
        return {
            k: v
            for k, v in trial_env(tmp_path, allocation_id).items()
            if not k.startswith(("LC_", "LANG"))
        }

    reports = []
    for n in (1, 2, 3):  # fresh; fresh, after which spares start; prestarted
        if n == 3:
            (spare,) = wait_for_spares(runner)
        allocation_id = f"trial-{n}.1"
        spec = LaunchSpec(
            allocation_id=allocation_id,
            trial_id=n,
            argv=entrypoint_argv("python3 train.py"),
            env=env_for(allocation_id),
            work_dir=work_dir(tmp_path, allocation_id, PROBE),
        )
        pid = runner.launch(spec)
        wait_until(
            lambda exited=allocation_id: exited in collector.exits,
            60,
            f"{allocation_id} to exit",
            0.02,
        )
        reports.append(probe(collector, pid))
    assert pid == spare.process.pid
    fresh, _, prestarted = reports
    assert "LC_CTYPE" in fresh["environ"]  # what coercion added (C.UTF-8)
    assert prestarted["environ"].get("LC_CTYPE") == fresh["environ"]["LC_CTYPE"]
