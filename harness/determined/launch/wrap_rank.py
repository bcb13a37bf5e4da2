"""Run a command and prefix every line of its output with ``[rank=N] ``.

Usage: ``python3 -m determined.launch.wrap_rank [--no-redirect-stdio] RANK [--] CMD...``

RANK is an integer, or a comma-separated list of environment variable names tried in order
(``RANK``, ``HOROVOD_RANK,OMPI_COMM_WORLD_RANK,PMI_RANK``): launchers know the variable's name
before they know its value. Both ``\\n`` and ``\\r`` end a line (progress bars redraw with
``\\r``), and lines longer than 8 KiB are split so one runaway line cannot hold memory. Signals
are forwarded to the command, and the exit code is the command's.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
from typing import BinaryIO

from determined.launch import _lifetime

MAX_LINE_BYTES = 8 * 1024

FORWARDED_SIGNALS = [
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGBREAK")
    if hasattr(signal, name)
]

# Inside a Determined container the trial's logs are these files rather than our own pipes.
CONTAINER_LOG_DIR = "/run/determined/train/logs"

# Give readers this long after the command exits: a grandchild that inherited the pipes could
# otherwise keep us alive forever.
_DRAIN_GRACE_S = 10.0

# Sent by the kernel when our parent (torchrun, a launcher) dies; kept apart from the forwarded
# signals so we know to escalate to SIGKILL if the command ignores SIGTERM.
_PARENT_DIED_SIGNAL = signal.SIGRTMIN + 2 if hasattr(signal, "SIGRTMIN") else None
_PARENT_DIED_GRACE_S = 5.0


def resolve_rank(spec: str) -> int | None:
    """An integer RANK, or the value of the first set variable of a comma-separated list."""
    if spec.strip().lstrip("-").isdigit():
        return int(spec)
    for name in spec.split(","):
        value = os.environ.get(name.strip())
        if value is not None and value != "":
            return int(value)
    return None


class LinePrefixer:
    """Copy a byte stream to ``out`` with ``prefix`` before every line."""

    def __init__(self, prefix: bytes, out: BinaryIO, lock: threading.Lock) -> None:
        self.prefix = prefix
        self.out = out
        self.lock = lock
        self.pending = b""
        self.after_cr = False

    def feed(self, data: bytes) -> None:
        pieces: list[bytes] = []
        if self.after_cr and data.startswith(b"\n") and not self.pending:
            # "\r\n" is one line ending, not a line followed by an empty one.
            pieces.append(b"\n")
            data = data[1:]
        self.after_cr = False
        buf = self.pending + data
        start = 0
        i = 0
        n = len(buf)
        while i < n:
            c = buf[i]
            if c == 0x0A or c == 0x0D:  # \n or \r
                end = i + 1
                if c == 0x0D and end < n and buf[end] == 0x0A:
                    end += 1
                pieces.append(self.prefix + buf[start:end])
                self.after_cr = c == 0x0D and end == i + 1 and end == n
                start = i = end
                continue
            if i - start + 1 >= MAX_LINE_BYTES:
                pieces.append(self.prefix + buf[start : i + 1] + b"\n")
                start = i + 1
            i += 1
        self.pending = buf[start:]
        if pieces:
            self._write(b"".join(pieces))

    def finish(self) -> None:
        if self.pending:
            self._write(self.prefix + self.pending + b"\n")
            self.pending = b""

    def _write(self, data: bytes) -> None:
        with self.lock:
            try:
                self.out.write(data)
                self.out.flush()
            except (BrokenPipeError, ValueError):
                pass  # our reader went away; keep draining so the command does not block


def _copy(stream: BinaryIO, prefixer: LinePrefixer) -> None:
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        prefixer.feed(chunk)
    prefixer.finish()


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 -m determined.launch.wrap_rank",
        description="Run CMD, prefixing each line of its stdout/stderr with [rank=RANK].",
    )
    parser.add_argument(
        "--no-redirect-stdio",
        action="store_true",
        help="write to our own stdout/stderr even inside a Determined container",
    )
    parser.add_argument("rank", metavar="RANK", help="integer, or comma-separated env var names")
    parser.add_argument("cmd", metavar="CMD", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.cmd and args.cmd[0] == "--":
        args.cmd = args.cmd[1:]
    if not args.cmd:
        parser.error("no command given: wrap_rank RANK -- CMD...")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    rank = resolve_rank(args.rank)
    if rank is None:
        print(
            f"wrap_rank: none of the environment variables {args.rank!r} is set; pass an integer "
            "rank or the name of a variable that holds it",
            file=sys.stderr,
        )
        return 1

    # Slurm jobs see the work dir through a symlink; tools resolve paths relative to the real one.
    if os.getcwd().endswith("/run/determined/workdir"):
        os.chdir("/run/determined/workdir")

    out_stdout: BinaryIO = sys.stdout.buffer
    out_stderr: BinaryIO = sys.stderr.buffer
    if not args.no_redirect_stdio and os.path.exists(os.path.join(CONTAINER_LOG_DIR, "stdout.log")):
        out_stdout = open(os.path.join(CONTAINER_LOG_DIR, "stdout.log"), "ab")
        out_stderr = open(os.path.join(CONTAINER_LOG_DIR, "stderr.log"), "ab")

    try:
        proc = subprocess.Popen(args.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        print(f"wrap_rank: could not start {args.cmd[0]!r}: {e}", file=sys.stderr)
        return 127

    forward = _lifetime.SignalForwarder(proc)
    forward.install(FORWARDED_SIGNALS)

    def parent_died(_signum: int, _frame: object) -> None:
        forward(signal.SIGTERM)
        timer = threading.Timer(_PARENT_DIED_GRACE_S, forward, (signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    if _PARENT_DIED_SIGNAL is not None:
        parent = os.getppid()
        signal.signal(_PARENT_DIED_SIGNAL, parent_died)
        if _lifetime.signal_me_when_parent_dies(_PARENT_DIED_SIGNAL) and os.getppid() != parent:
            parent_died(_PARENT_DIED_SIGNAL, None)  # it died before we asked
    if os.getpgrp() == os.getpid():
        # We lead a process group of our own (torchrun makes each worker a session leader):
        # let the launcher kill what is left of it.
        _lifetime.record_process_group()

    prefix = f"[rank={rank}] ".encode()
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(
            target=_copy, args=(pipe, LinePrefixer(prefix, out, threading.Lock())), daemon=True
        )
        for pipe, out in ((proc.stdout, out_stdout), (proc.stderr, out_stderr))
    ]
    for reader in readers:
        reader.start()
    returncode = proc.wait()
    for reader in readers:
        reader.join(_DRAIN_GRACE_S)
    if returncode < 0:
        # Killed by a signal: report it the way a shell would.
        return 128 - returncode
    return returncode


if __name__ == "__main__":
    sys.exit(main())
