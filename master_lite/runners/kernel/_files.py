"""Shipping a run's files to a kernel on a Jupyter Gateway, which may run on another machine
than the master: the run's work dir (the experiment's context as unpacked for the run) is sent
as a gzipped tar in base64 cells, then unpacked into a fresh temporary directory there, which
becomes the kernel's cwd (and is removed when the kernel exits).

Cells are at most `CHUNK_BYTES` of base64: a websocket message has a size limit (tornado's is
10 MiB), and the whole archive is at most the master's `kernel_gateway_files_limit`.
"""

from __future__ import annotations

import base64
import io
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

# The compressed files a gateway kernel is sent at most, by default (the context's own limit).
DEFAULT_FILES_LIMIT = 96 * 1024 * 1024
CHUNK_BYTES = 4 * 1024 * 1024  # of base64 per cell (3 MiB of archive)
_PART = "_determined_trial_files"  # the attribute of `sys` that gathers the archive


class FilesTooLarge(OSError):
    """The run's files exceed the limit (the message names it and what to do)."""


def pack_work_dir(work_dir: Path, limit: int) -> bytes:
    """The work dir as a gzipped tar (paths relative to it); FilesTooLarge over `limit`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(work_dir.rglob("*")):
            archive.add(path, arcname=str(path.relative_to(work_dir)), recursive=False)
            if buffer.tell() > limit:
                break  # no need to compress the rest to know it is too large
    data = buffer.getvalue()
    if len(data) > limit:
        raise FilesTooLarge(
            f"the trial's files (its context, unpacked in {work_dir}) are over "
            f"{limit:,} bytes compressed, the most a kernel on a Jupyter Gateway is sent "
            "(MasterLite.kernel_gateway_files_limit): keep data out of the context (.detignore) "
            "and read it from storage the gateway's machine sees, or raise the limit"
        )
    return data


def chunk_cells(archive: bytes) -> Iterator[str]:
    """Cells that gather `archive` in the kernel, `CHUNK_BYTES` of base64 each."""
    encoded = base64.b64encode(archive).decode("ascii")
    yield f"import sys; sys.{_PART} = []"
    for start in range(0, len(encoded), CHUNK_BYTES):
        yield f"__import__('sys').{_PART}.append({encoded[start : start + CHUNK_BYTES]!r})"


# Runs in the kernel (a private namespace): unpack into a new temporary directory, chdir there,
# remove it when the kernel exits. Warns when the checkpoint storage is not on this machine.
_UNPACK_SOURCE = """
import atexit, base64, io, json, os, shutil, socket, sys, tarfile, tempfile

def unpack(trial_id):
    data = base64.b64decode("".join(getattr(sys, PART)))
    delattr(sys, PART)
    target = tempfile.mkdtemp(prefix=f"determined-trial-{trial_id}-")
    atexit.register(shutil.rmtree, target, True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(target, filter="data")
        else:
            archive.extractall(target)
    os.chdir(target)
    storage = json.loads(os.environ.get("DET_EXPERIMENT_CONFIG") or "{}").get(
        "checkpoint_storage") or {}
    path = storage.get("host_path") or storage.get("container_path")
    if path and not os.path.isdir(path):
        print(
            f"checkpoint_storage: {path} does not exist on the gateway's machine "
            f"({socket.gethostname()}): checkpoints this trial saves would stay there, where the "
            "master cannot read them; mount the master's checkpoint storage at the same path "
            "there (a shared filesystem)",
            file=sys.stderr,
        )

unpack(TRIAL_ID)
"""


def unpack_cell(trial_id: int) -> str:
    """The cell (after `chunk_cells`) that unpacks the files and makes their dir the cwd."""
    source = _UNPACK_SOURCE.replace("PART", repr(_PART)).replace("TRIAL_ID", str(int(trial_id)))
    return (
        f"exec(compile({source!r}, '<determined trial files>', 'exec'), "
        "{'__name__': '__determined_trial_files__'})"
    )


def ship_files(
    work_dir: Path,
    trial_id: int,
    limit: int,
    run_cell: Callable[[str, bool], dict | None],
) -> int | None:
    """Send `work_dir` into a kernel through `run_cell(code, silent)` (the reply's content,
    None when the kernel died) and make its copy the kernel's cwd; the archive's size, None
    when the kernel died meanwhile. FilesTooLarge over `limit`, OSError when the kernel could
    not unpack them."""
    archive = pack_work_dir(work_dir, limit)
    # Silent: the chunks are not echoed to every client of the kernel; the unpack's warnings
    # go to the trial's log.
    cells = [(code, True) for code in chunk_cells(archive)]
    for code, silent in [*cells, (unpack_cell(trial_id), False)]:
        reply = run_cell(code, silent)
        if reply is None:
            return None
        if reply.get("status") != "ok":
            raise OSError(
                "the kernel could not unpack the trial's files: "
                f"{reply.get('ename')}: {reply.get('evalue')}"
            )
    return len(archive)


__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_FILES_LIMIT",
    "FilesTooLarge",
    "chunk_cells",
    "pack_work_dir",
    "ship_files",
    "unpack_cell",
]
