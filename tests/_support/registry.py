"""A real container registry on loopback for pull tests: Debian's `docker-registry` (the CNCF
distribution registry) with its own config, storage in a temp dir, htpasswd (bcrypt) auth and
plain http, on a free port."""

from __future__ import annotations

import dataclasses
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from tests._support.containers import RUNTIME
from tests._support.process import free_port
from tests._support.waiting import wait_until

USER = "trainer"
PASSWORD = "s3cret-pull"

_CONFIG = """\
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
auth:
  htpasswd:
    realm: jd-test
    path: {htpasswd}
"""


@dataclasses.dataclass
class Registry:
    """A running registry: `host` is `127.0.0.1:<port>`; `push` copies a local image in."""

    host: str
    process: subprocess.Popen
    log: Path

    def push(self, local: str, name: str) -> str:
        """Push the local image `local` as `<host>/<name>`; returns that reference."""
        reference = f"{self.host}/{name}"
        result = subprocess.run(
            [
                RUNTIME,
                "push",
                "--tls-verify=false",
                "--creds",
                f"{USER}:{PASSWORD}",
                local,
                f"docker://{reference}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"push of {local} to {reference} failed: {result.stderr}")
        return reference

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_registry(directory: Path) -> Registry:
    """Start a registry whose files are all under `directory`; it answers before this returns."""
    directory.mkdir(parents=True, exist_ok=True)
    htpasswd = directory / "htpasswd"
    subprocess.run(
        ["htpasswd", "-B", "-b", "-c", str(htpasswd), USER, PASSWORD],
        check=True,
        capture_output=True,
        timeout=60,
    )
    port = free_port()
    config = directory / "config.yml"
    config.write_text(_CONFIG.format(storage=directory / "storage", port=port, htpasswd=htpasswd))
    log = directory / "registry.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["docker-registry", "serve", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    registry = Registry(f"127.0.0.1:{port}", process, log)

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"docker-registry exited: {log.read_text()}")
        try:
            urllib.request.urlopen(f"http://{registry.host}/v2/", timeout=5)
        except urllib.error.HTTPError as exc:
            return exc.code == 401  # up, and asking for credentials
        except OSError:
            return False
        return True

    try:
        wait_until(answers, timeout=60, what="the registry to answer", details=log.read_text)
    except BaseException:
        registry.stop()
        raise
    return registry


__all__ = ["PASSWORD", "USER", "Registry", "start_registry"]
