"""The contexts part: experiment context tarballs, checked on upload and stored by hash."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from determined.common import context as context_mod
from master_lite import errors
from master_lite._core._shared import MasterState


class Contexts:
    """Checks, stores and reads back the context tarballs experiments run in."""

    def __init__(self, shared: MasterState, *, size_limit: int) -> None:
        self._shared = shared
        self.size_limit = size_limit

    def verify(self, data: bytes) -> str:
        """Check that `data` unpacks within the size limit; returns its content hash."""
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

    def save(self, context_hash: str, data: bytes) -> None:
        """Keep the tarball under `<root_dir>/contexts` (written once per content hash)."""
        path = self._shared.root_dir / "contexts" / f"{context_hash}.tar.gz"
        if not path.exists():
            # Written aside and renamed: a crash never leaves a truncated tarball under its hash.
            partial = path.with_suffix(".partial")
            partial.write_bytes(data)
            os.replace(partial, path)
        self._shared.store.contexts.add(context_hash, str(path), len(data))

    def read(self, context_hash: str) -> bytes:
        """The stored tarball of `context_hash`; NotFound if there is none."""
        row = self._shared.store.contexts.get(context_hash)
        if row is None:
            raise errors.NotFound(f"context {context_hash} not found")
        return Path(row.path).read_bytes()

    def unpack(self, context_hash: str, work_dir: Path) -> None:
        """Unpack the stored tarball into a run's fresh working directory."""
        context_mod.unpack(self.read(context_hash), work_dir, limit_bytes=self.size_limit)


__all__ = ["Contexts"]
