"""Where is the master? `-m`, else DET_MASTER (+ DET_MASTER_TOKEN), else <root_dir>/master.json."""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib

from determined.common.api._errors import MasterNotFound

HOW_TO_START = (
    "no master found: start one with `master-lite` (or `make lab` for JupyterLab with the "
    "embedded master), or point at one with `det -m URL` / DET_MASTER=URL"
)


@dataclasses.dataclass(frozen=True)
class MasterAddress:
    url: str  # API root without /api/v1, e.g. http://127.0.0.1:8080
    token: str | None
    source: str  # where the address came from, for error messages


def default_root_dir() -> pathlib.Path:
    """The master's default root dir: <jupyter data dir>/determined (MASTER_LITE_ROOT_DIR wins)."""
    env = os.environ.get("MASTER_LITE_ROOT_DIR")
    if env:
        return pathlib.Path(env)
    try:
        from jupyter_core.paths import jupyter_data_dir
    except ImportError:  # jupyter_core is a dependency; keep discovery working without it anyway
        return pathlib.Path.home() / ".local" / "share" / "jupyter" / "determined"
    return pathlib.Path(jupyter_data_dir()) / "determined"


def canonical_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    return url


def read_master_file(root_dir: str | os.PathLike | None = None) -> MasterAddress | None:
    path = pathlib.Path(root_dir) if root_dir is not None else default_root_dir()
    path = path / "master.json"
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise MasterNotFound(f"{path}: unreadable master file ({e})") from e
    return MasterAddress(canonical_url(info["url"]), info.get("token"), str(path))


def discover_master(master: str | None = None, token: str | None = None) -> MasterAddress:
    """Resolve the master in the documented order; raise MasterNotFound with a how-to line."""
    token = token or os.environ.get("DET_MASTER_TOKEN") or os.environ.get("DET_SESSION_TOKEN")
    if master:
        found = read_master_file()
        if token is None and found is not None and found.url == canonical_url(master):
            token = found.token
        return MasterAddress(canonical_url(master), token, "-m")
    env = os.environ.get("DET_MASTER") or os.environ.get("DET_MASTER_ADDR")
    if env:
        found = read_master_file()
        if token is None and found is not None and found.url == canonical_url(env):
            token = found.token
        return MasterAddress(canonical_url(env), token, "DET_MASTER")
    found = read_master_file()
    if found is None:
        raise MasterNotFound(HOW_TO_START)
    return found
