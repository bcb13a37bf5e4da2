"""The Ray actor's side, run here without Ray: the context it receives is unpacked by the one
safe extraction (`determined.common.context.unpack`), so symbolic links survive as the context
had them and one that would leave the work dir is refused; and the actor's modules import only
the standard library and each other, so they can be shipped to Ray nodes by value."""

from __future__ import annotations

import ast
import io
import sys
import tarfile
from pathlib import Path

import pytest

from determined.common import context
from master_lite.runners import _exits, _lines
from master_lite.runners.ray import _actor
from master_lite.runners.ray._actor import TrialContainer
from master_lite.runners.ray._runner import _pack_work_dir


def run_in_actor(context_bytes: bytes, script: str) -> tuple[int, list[str]]:
    actor = TrialContainer("trial-1.1")
    actor.start([sys.executable, "-c", script], {"PATH": "/usr/bin:/bin"}, context_bytes)
    lines: list[str] = []
    while True:
        got, code = actor.poll(30)
        lines += [raw.decode() for _, _, raw in got]
        if code is not None:
            return code, lines


def tar_gz(*members: tuple[str, bytes | str]) -> bytes:
    """A context with regular files (bytes) and symbolic links (str: the link's target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if isinstance(content, str):
                info.type = tarfile.SYMTYPE
                info.linkname = content
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_a_symlink_inside_the_context_survives_the_ray_extraction() -> None:
    packed = tar_gz(("data/real.txt", b"through the link\n"), ("link.txt", "data/real.txt"))
    script = (
        "import os; print(os.path.islink('link.txt'), os.readlink('link.txt'), "
        "open('link.txt').read().strip())"
    )
    code, lines = run_in_actor(packed, script)
    assert (code, lines) == (0, ["True data/real.txt through the link"])


def test_the_ray_path_gives_every_node_what_a_link_in_the_work_dir_names(tmp_path: Path) -> None:
    """The master packs the run's work dir (`_pack_work_dir`) for the nodes: a link inside it
    arrives with its target's content."""
    work_dir = tmp_path / "run-1"
    (work_dir / "data").mkdir(parents=True)
    (work_dir / "data" / "real.txt").write_text("through the link\n")
    (work_dir / "link.txt").symlink_to("data/real.txt")
    code, lines = run_in_actor(_pack_work_dir(work_dir), "print(open('link.txt').read().strip())")
    assert (code, lines) == (0, ["through the link"])


def test_a_symlink_leaving_the_work_dir_is_refused(tmp_path: Path) -> None:
    actor = TrialContainer("trial-1.1")
    with pytest.raises(context.ContextError, match="leaving the destination"):
        actor.start(["true"], {}, tar_gz(("escape", "../../etc/passwd")))
    assert actor.process is None  # nothing ran
    with pytest.raises(context.ContextError, match="absolute path"):
        TrialContainer("trial-1.2").start(["true"], {}, tar_gz(("abs", "/etc/passwd")))


def test_the_actor_ships_by_value():
    """What `RayCluster.connect` registers by value imports nothing else but the stdlib."""
    shipped = {m.__name__: Path(m.__file__ or "") for m in (_actor, _exits, _lines, context)}
    for name, path in shipped.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                assert (
                    module in shipped
                    or top in sys.stdlib_module_names
                    or top == "__future__"
                    or module in ("ray", "pynvml")  # imported inside the actor, on the node
                ), f"{name} imports {module}"


# The actor's process runs this: starts a trial whose entrypoint leaves a grandchild running,
# prints both pids, then dies at once (as a Ray worker does when its node or cluster goes).
DYING_ACTOR = """
import os, sys, time
from master_lite.runners.ray._actor import TrialContainer

actor = TrialContainer("trial-9.1")
script = "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', " \\
    "'import time; time.sleep(300)']); print(p.pid, flush=True); time.sleep(300)"
pid = actor.start([sys.executable, "-c", script], dict(os.environ), None)
deadline = time.monotonic() + 30
lines = []
while not lines and time.monotonic() < deadline:
    got, _ = actor.poll(1)
    lines += [raw.decode().strip() for _, _, raw in got]
print(pid, lines[0], flush=True)
os._exit(0)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _survivors_of(actor_script: str) -> list[str]:
    """Run `actor_script` (which prints the supervisor's and the trial grandchild's pids, then
    exits), and name those of the two still alive 15 s after it ended."""
    import os
    import subprocess
    import time

    out = subprocess.run(
        [sys.executable, "-c", actor_script],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr
    supervisor, grandchild = (int(p) for p in out.stdout.split())
    deadline = time.monotonic() + 15
    while (_alive(supervisor) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = {"the supervisor": supervisor, "the trial's child": grandchild}
    return [name for name, pid in pids.items() if _alive(pid)]


def test_a_trials_processes_die_with_their_actor() -> None:
    """No orphans: when the actor's process dies, the trial's whole process group goes with it
    (the entrypoint and what it started), not only its direct child."""
    assert _survivors_of(DYING_ACTOR) == []


# As a Ray worker exits (RAY_kill_child_processes_on_worker_exit): it SIGKILLs its own children
# (the supervisor alone, not its group), then exits at once (no time for the actor's own
# threads to clean up).
EXITING_RAY_WORKER = DYING_ACTOR.replace("os._exit(0)", "os.kill(pid, 9)\nos._exit(0)")


def test_a_trials_processes_die_when_ray_kills_the_supervisor_alone() -> None:
    """A Ray worker kills its direct children as it exits: the supervisor dies at once, and the
    entrypoint and its child (the rest of the group) must still go with it."""
    assert _survivors_of(EXITING_RAY_WORKER) == []


def test_the_supervisor_ends_as_its_entrypoint_did() -> None:
    assert run_in_actor(b"", "import sys; print('x'); sys.exit(7)") == (7, ["x"])
    code, _ = run_in_actor(b"", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert code == 128 + 15


# The actor's host process outlives its parent (as a Ray worker outlives its raylet for a
# while): it starts a trial with a grandchild, writes the pids, and stays alive.
ORPHANED_ACTOR = """
import os, sys, time
from master_lite.runners.ray._actor import TrialContainer

actor = TrialContainer("trial-9.2")
script = "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', " \\
    "'import time; time.sleep(300)']); print(p.pid, flush=True); time.sleep(300)"
pid = actor.start([sys.executable, "-c", script], dict(os.environ), None)
lines = []
while not lines:
    got, _ = actor.poll(1)
    lines += [raw.decode().strip() for _, _, raw in got]
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(f"{os.getpid()} {pid} {lines[0]}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""

# Its parent: starts the actor's host, waits for the pids, and exits (the "raylet" dies).
DYING_PARENT = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], start_new_session=True)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.1)
"""


def test_a_trial_dies_when_its_workers_raylet_does(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import time

    pids_file = tmp_path / "pids"
    subprocess.run(
        [sys.executable, "-c", DYING_PARENT, ORPHANED_ACTOR, str(pids_file)],
        timeout=90,
        env=dict(os.environ),
        check=True,
    )
    host, supervisor, grandchild = (int(p) for p in pids_file.read_text().split())
    try:
        deadline = time.monotonic() + 15
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(grandchild), "the trial outlived its worker's parent"
        assert not _alive(supervisor)
        assert _alive(host)  # the worker itself was still there: the watchdog did it
    finally:
        try:
            os.kill(host, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_run_ended_by_its_raylets_death_polls_as_a_node_loss() -> None:
    import signal as signals

    actor = TrialContainer("trial-9.3")
    script = "import time; print('up', flush=True); time.sleep(60)"
    actor.start([sys.executable, "-c", script], {}, None)
    lines: list[str] = []
    while not lines:
        got, code = actor.poll(30)
        lines += [raw.decode() for _, _, raw in got]
    assert lines == ["up"]
    actor._raylet_lost = True  # what the watchdog sets before it kills the group
    actor.signal(signals.SIGKILL)
    with pytest.raises(_actor.NodeLost, match="raylet has died"):
        for _ in range(100):
            assert actor.poll(30)[1] is None  # never a plain exit code


def test_the_supervisor_itself_ends_the_trial_when_the_raylet_dies() -> None:
    """A Ray worker whose raylet died can hang (its own watchdog thread with it): the
    supervisor, a process of its own, watches the raylet too. Here its lifeline stays open
    (the "worker" lives) and only the raylet goes."""
    import os
    import subprocess
    import time

    from master_lite.runners.ray._actor import _SUPERVISOR

    raylet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    lifeline_read, lifeline_write = os.pipe()
    trial = (
        "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(300)']); print(p.pid, flush=True); time.sleep(300)"
    )
    supervisor = subprocess.Popen(
        [sys.executable, "-c", _SUPERVISOR, str(raylet.pid), sys.executable, "-c", trial],
        stdin=lifeline_read,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(lifeline_read)
    try:
        assert supervisor.stdout is not None
        grandchild = int(supervisor.stdout.readline())
        assert _alive(grandchild)
        raylet.kill()
        raylet.wait()
        assert supervisor.wait(timeout=30) == -9  # the group, itself included, was killed
        deadline = time.monotonic() + 15
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(grandchild), "the trial outlived its node's raylet"
    finally:
        os.close(lifeline_write)
        raylet.kill()
        supervisor.kill()
