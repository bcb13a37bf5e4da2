"""The trial sandbox's trampoline: a standalone program (standard library only, run with
`python -I -S`) that starts a trial where the master's secrets are out of sight.

    python -I -S _sandbox_main.py [--probe] [--watch-parent] [--hide PATH]... -- ARGV...

1. It enters a new user namespace (mapping only its own uid and gid), mount namespace and PID
   namespace (no root needed where the kernel allows unprivileged user namespaces).
2. It forks the namespace's init (PID 1), which mounts a fresh /proc (so no process outside,
   the master above all, can be named, signalled or read through /proc/PID/root, fd, environ
   or mem) and covers each `--hide` path: a directory with an empty private tmpfs, a file with
   an unconnected socket (mode 000) that
   cannot be opened. Paths that do not exist are skipped.
3. The init forks the trial, which first enters one more user namespace (so that even a trial
   running as root holds no capability over the mount namespace: it cannot unmount the covers,
   and mounts it copies into a namespace of its own are locked together) and then execs ARGV.
4. The init reaps orphans, and reports the trial's wait status to this process, which exits
   the same way (its exit code, or killed by the same signal). When the init exits the kernel
   kills whatever is left in the namespace.

Signals sent to the process group (the runner's terminate and kill) reach the trial directly;
this process and the init ignore the catchable ones so that only the trial decides. The
network, /dev (GPUs) and every other path are untouched.

`--watch-parent` (for kernels, whose own parent poller cannot work here: inside, their parent
is the init, PID 1): when this process's parent (the master, or the Jupyter server that started
the kernel) exits, the init is killed and with it the whole namespace, as the kernel would have
ended itself.

`--probe` sets everything up and exits 0 without running anything: the runner's check that the
platform allows it. Any failure: one line on stderr starting `sandbox:` and exit status 125.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
import stat
import sys
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
SETUP_FAILED = 125
# The signals a runner may send to the process group: the trial gets them directly.
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGCONT,
)

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(code)} (errno {code})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None):
    _check(
        _libc.mount(
            None if source is None else os.fsencode(source),
            os.fsencode(target),
            None if fstype is None else os.fsencode(fstype),
            ctypes.c_ulong(flags),
            None if data is None else os.fsencode(data),
        ),
        f"mount {fstype or 'bind'} on {target}",
    )


def _enter_user_namespace(uid: int, gid: int, flags: int) -> None:
    """unshare(CLONE_NEWUSER | flags) and map our own uid and gid only (as themselves)."""
    _check(_libc.unshare(CLONE_NEWUSER | flags), "unshare (user namespaces not permitted?)")
    with open("/proc/self/setgroups", "w") as file:
        file.write("deny")
    with open("/proc/self/uid_map", "w") as file:
        file.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as file:
        file.write(f"{gid} {gid} 1")


def _hide(paths: list[str]) -> None:
    """Cover each path (in the init: /proc is still the old one here and is used as a scratch
    mount point for the placeholder file, then replaced by a fresh proc)."""
    files, dirs = [], []
    for path in paths:
        try:
            mode = os.lstat(path).st_mode
        except OSError:  # absent, or not reachable: the trial (same uid) cannot reach it either
            continue
        if stat.S_ISDIR(mode):
            dirs.append(path)
        elif not stat.S_ISLNK(mode):
            files.append(path)
    _mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700,size=4k")
    # A socket, not a regular file: opening it fails (ENXIO) for everyone, a trial running as
    # root in its namespace included (it could read an empty file whatever its mode).
    placeholder = "/proc/hidden"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(placeholder)
    os.chmod(placeholder, 0)
    for path in files:
        _mount(placeholder, path, None, MS_BIND, None)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
    _check(_libc.umount2(b"/proc", MNT_DETACH), "umount scratch /proc")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    for path in dirs:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")


def _ignore(_sig: int, _frame: object) -> None:
    """A handler, not SIG_IGN: handlers go back to default across exec, SIG_IGN would not."""


def _init(hidden: list[str], argv: list[str], probe: bool, uid: int, gid: int, report: int):
    """PID 1 of the namespace: set up, run the trial, reap, report its wait status."""
    try:
        _hide(hidden)
    except (SetupError, OSError) as exc:
        print(f"sandbox: {exc}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    if probe:
        os.write(report, b"0")
        os._exit(0)
    for sig in FORWARDED:
        signal.signal(sig, _ignore)
    child = os.fork()
    if child == 0:
        try:
            os.close(report)
            for sig in FORWARDED:
                signal.signal(sig, signal.SIG_DFL)
            _enter_user_namespace(uid, gid, 0)
            os.execvp(argv[0], argv)
        except (SetupError, OSError) as exc:
            print(f"sandbox: cannot run {argv[0]!r}: {exc}", file=sys.stderr, flush=True)
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        if pid == child:
            os.write(report, str(status).encode())
            os._exit(0)


def _watch_parent(parent: int, init: int) -> int | None:
    """Return once the init has exited (its wait status where it was reaped here); kill it
    (and so the namespace) first if this process's parent is gone (looked at each second, as
    ipykernel's own parent poller does). No thread: a process that unshared its PID namespace
    cannot start one."""
    try:
        pidfd = os.pidfd_open(init)
    except (AttributeError, OSError):  # before Linux 5.3: look each second
        pidfd = None
    while True:
        if pidfd is not None:
            if select.select([pidfd], [], [], 1.0)[0]:
                return None
        else:
            pid, status = os.waitpid(init, os.WNOHANG)
            if pid:
                return status
            time.sleep(1.0)
        if os.getppid() != parent:
            try:
                os.kill(init, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return None


def main(args: list[str]) -> None:
    probe = False
    watch_parent = False
    hidden: list[str] = []
    while args and args[0] != "--":
        if args[0] == "--probe":
            probe = True
            args = args[1:]
        elif args[0] == "--watch-parent":
            watch_parent = True
            args = args[1:]
        elif args[0] == "--hide" and len(args) > 1:
            hidden.append(args[1])
            args = args[2:]
        else:
            print(f"sandbox: unknown argument {args[0]!r}", file=sys.stderr)
            os._exit(2)
    argv = args[1:]
    if not argv and not probe:
        print("sandbox: nothing to run (give it after --)", file=sys.stderr)
        os._exit(2)
    uid, gid = os.getuid(), os.getgid()
    parent = os.getppid()
    try:
        _enter_user_namespace(uid, gid, CLONE_NEWNS | CLONE_NEWPID)
        # Nothing mounted here may propagate back out.
        _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    except (SetupError, OSError) as exc:
        print(f"sandbox: {exc}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)
    read_end, write_end = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(read_end)
        # If this process dies alone (a SIGKILL to its pid, not its group), the init follows,
        # and with it the whole namespace: nothing of the trial outlives what the runner holds.
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _init(hidden, argv, probe, uid, gid, write_end)
    os.close(write_end)
    for sig in FORWARDED:
        signal.signal(sig, _ignore)
    init_status = _watch_parent(parent, init) if watch_parent and parent != 1 else None
    if init_status is None:
        _, init_status = os.waitpid(init, 0)
    reported = b""
    while chunk := os.read(read_end, 64):
        reported += chunk
    if not reported:  # the init failed before the trial ran (its message is on stderr)
        os._exit(os.waitstatus_to_exitcode(init_status) if os.WIFEXITED(init_status) else 125)
    status = int(reported)
    if os.WIFSIGNALED(status):
        killed_by = os.WTERMSIG(status)
        if killed_by in FORWARDED:  # ignored here; SIGKILL and the like cannot be (OSError)
            signal.signal(killed_by, signal.SIG_DFL)
        os.kill(os.getpid(), killed_by)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
