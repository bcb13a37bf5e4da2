"""The one context-tarball builder: what `det experiment create` uploads as `context`."""

from __future__ import annotations

import base64
import io
import pathlib
import tarfile
import textwrap
from collections.abc import Iterable, Mapping


def tar_gz(
    files: Mapping[str, str | bytes],
    *,
    members: Iterable[tuple[tarfile.TarInfo, bytes | None]] = (),
    dedent: bool = False,
    mode: int = 0o644,
) -> bytes:
    """A tar.gz of regular files, in name order, then of hand-made members.

    Args:
        files: archive name -> content (text is UTF-8 encoded).
        members: (TarInfo, data or None) added after the files exactly as given: links, devices,
            names that escape the destination (to test what an unpacker refuses). The size of a
            member with data is set from the data.
        dedent: `textwrap.dedent` text contents first (for scripts written inline, indented).
        mode: the permission bits of every file from `files`.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in sorted(files.items()):
            if isinstance(content, str):
                content = (textwrap.dedent(content) if dedent else content).encode()
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = mode
            tar.addfile(info, io.BytesIO(content))
        for info, data in members:
            if data is None:
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def context_tarball(
    files: Mapping[str, str | bytes],
    *,
    members: Iterable[tuple[tarfile.TarInfo, bytes | None]] = (),
    dedent: bool = False,
) -> str:
    """The base64 text of `tar_gz(...)`: the `context` field of `POST /experiments`.

    Args:
        files: archive name -> content.
        members: hand-made members added after the files (see `tar_gz`).
        dedent: dedent text contents first.
    """
    return base64.b64encode(tar_gz(files, members=members, dedent=dedent)).decode()


def directory_files(directory: pathlib.Path) -> dict[str, bytes]:
    """The regular files directly in `directory`, name -> bytes: a context for `context_tarball`."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}
