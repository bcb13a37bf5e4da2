"""The contexts part: experiment context tarballs, checked on upload and stored by hash.

Checking and unpacking a context is file work that grows with its member count (a context of
100k empty files is 1 MiB gzipped and takes seconds): the methods that do it touch no store, so
that callers can run them in a worker thread (`check_and_write`, `unpack_file`); the store's
rows are read and written on the loop thread (`record`, `tarball_path`). A large context's
file work runs in a child interpreter: in a thread of the master, its Python code (per member)
would still take the GIL from the loop often enough to stall it by 100s of ms.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from determined.common import context as context_mod
from master_lite import errors
from master_lite._core._shared import MasterState

# A context tarball over this size is checked and unpacked by a child interpreter (see
# `_in_child`); a smaller one (a few hundred members at most) in the calling thread.
CHILD_BYTES = 16 * 1024


class Contexts:
    """Checks, stores and reads back the context tarballs experiments run in."""

    def __init__(self, shared: MasterState, *, size_limit: int) -> None:
        self._shared = shared
        self.size_limit = size_limit

    def verify(self, data: bytes) -> str:
        """Check that `data` unpacks within the size limit; returns its content hash.
        (No store access: safe in a worker thread.)"""
        if len(data) > self.size_limit:
            raise errors.TooLarge(
                f"context is {len(data)} bytes, over the limit of {self.size_limit} "
                "bytes: list large files in .detignore or raise the master's context size limit"
            )
        with tempfile.TemporaryDirectory(prefix="context-check-") as scratch:
            try:
                context_mod.unpack(data, scratch, limit_bytes=self.size_limit)
            except context_mod.ContextTooLarge as exc:
                raise errors.TooLarge(f"context: {exc}") from exc
            except context_mod.ContextError as exc:
                raise errors.InvalidRequest(f"context: {exc}", [f"context: {exc}"]) from exc
        return context_mod.content_hash(data)

    def write(self, context_hash: str, data: bytes) -> Path:
        """Write the tarball under `<root_dir>/contexts` (once per content hash); its path.
        (No store access: safe in a worker thread.)"""
        path = self._shared.root_dir / "contexts" / f"{context_hash}.tar.gz"
        if not path.exists():
            # Written aside and renamed: a crash never leaves a truncated tarball under its
            # hash. A name of its own per writer: two uploads of one context may race.
            fd, partial = tempfile.mkstemp(
                dir=path.parent, prefix=f".{context_hash}.", suffix=".partial"
            )
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                os.replace(partial, path)
            except BaseException:
                Path(partial).unlink(missing_ok=True)
                raise
        return path

    def check_and_write(self, data: bytes) -> str:
        """`verify` then `write`: the upload's file work, in one call for a worker thread;
        the content hash (`record` it on the loop thread). A context over CHILD_BYTES is
        checked in a child process: in a thread its work would still hold the master's GIL."""
        if len(data) <= CHILD_BYTES:
            context_hash = self.verify(data)
            self.write(context_hash, data)
            return context_hash
        if len(data) > self.size_limit:
            self.verify(data)  # raises TooLarge, naming the limit
        context_hash = context_mod.content_hash(data)
        path = self._shared.root_dir / "contexts" / f"{context_hash}.tar.gz"
        fd, partial = tempfile.mkstemp(
            dir=path.parent, prefix=f".{context_hash}.", suffix=".partial"
        )
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            try:
                self._in_child("check", Path(partial))
            except context_mod.ContextTooLarge as exc:
                raise errors.TooLarge(f"context: {exc}") from exc
            except context_mod.ContextError as exc:
                raise errors.InvalidRequest(f"context: {exc}", [f"context: {exc}"]) from exc
            os.replace(partial, path)
        finally:
            Path(partial).unlink(missing_ok=True)
        return context_hash

    def _in_child(self, mode: str, tarball: Path, *rest: Path) -> None:
        """Run `determined.common.context.child_main` in a child interpreter (the calling
        thread only waits); its failure as ContextTooLarge / ContextError."""
        harness = str(Path(context_mod.__file__).resolve().parents[2])  # where `determined` is
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (harness, env.get("PYTHONPATH")) if p)
        done = subprocess.run(
            [sys.executable, "-c", context_mod.CHILD_PROGRAM, mode, str(self.size_limit)]
            + [str(tarball), *map(str, rest)],
            env=env,
            capture_output=True,
            text=True,
        )
        message = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        if done.returncode == context_mod.CHILD_TOO_LARGE:
            raise context_mod.ContextTooLarge(message[0])
        if done.returncode != 0:
            raise context_mod.ContextError(message[0])

    def record(self, context_hash: str, size: int) -> None:
        """Record a written tarball in the store (on the loop thread)."""
        path = self._shared.root_dir / "contexts" / f"{context_hash}.tar.gz"
        self._shared.store.contexts.add(context_hash, str(path), size)

    def save(self, context_hash: str, data: bytes) -> None:
        """Keep the tarball under `<root_dir>/contexts` (written once per content hash)."""
        self.write(context_hash, data)
        self.record(context_hash, len(data))

    def tarball_path(self, context_hash: str) -> Path:
        """Where the stored tarball of `context_hash` is; NotFound if there is none."""
        row = self._shared.store.contexts.get(context_hash)
        if row is None:
            raise errors.NotFound(f"context {context_hash} not found")
        return Path(row.path)

    def stored_size(self, context_hash: str) -> int:
        """The stored tarball's size in bytes (0 if there is none)."""
        row = self._shared.store.contexts.get(context_hash)
        return 0 if row is None else int(row.size)

    def read(self, context_hash: str) -> bytes:
        """The stored tarball of `context_hash`; NotFound if there is none."""
        return self.tarball_path(context_hash).read_bytes()

    def unpack(self, context_hash: str, work_dir: Path) -> None:
        """Unpack the stored tarball into a run's fresh working directory."""
        context_mod.unpack(self.read(context_hash), work_dir, limit_bytes=self.size_limit)

    def unpack_file(self, tarball: Path, work_dir: Path) -> None:
        """Make `work_dir` afresh (removing what a crashed master left) and unpack the
        tarball at `tarball` into it. (No store access: safe in a worker thread.)"""
        if tarball.stat().st_size > CHILD_BYTES:
            self._in_child("unpack", tarball, work_dir)
            return
        if work_dir.exists():
            shutil.rmtree(work_dir)
        work_dir.mkdir(parents=True)
        context_mod.unpack(tarball.read_bytes(), work_dir, limit_bytes=self.size_limit)


__all__ = ["Contexts"]
