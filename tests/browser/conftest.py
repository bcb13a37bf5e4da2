"""A real JupyterLab with jupyter_determined (server extension + the built labextension), and
Debian's Chromium driven by Playwright (PyPI).

Needs: `apt-get install -y chromium`, `pip install playwright` (never `playwright install`: the
browser comes from Debian), and the built labextension (`cd labextension && jlpm install &&
jlpm build`, or any `pip install` of the project); `make test` installs all of them. A missing
piece fails these tests with the command that provides it (never a silent skip). Screenshots
go to `test-output/screenshots/`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
BUILT_EXTENSION = REPO / "jupyter_determined" / "labextension"
SCREENSHOTS = REPO / "test-output" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


def _missing_requirement() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; the browser is Debian's chromium)"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set CHROMIUM)"
    if not (BUILT_EXTENSION / "package.json").exists():
        return ("the labextension is not built: cd labextension && jlpm install && jlpm build "
                "(or pip install -e .)")
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _browser_requirements() -> None:
    missing = _missing_requirement()
    if missing:
        pytest.fail(missing, pytrace=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class Lab:
    process: subprocess.Popen
    base: str  # http://127.0.0.1:PORT/jl/
    token: str
    notebook_dir: Path
    log_path: Path
    tmp: Path
    port: int

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        response = requests.request(method, f"{self.base}determined/api/v1/{path.lstrip('/')}",
                                    headers={"Authorization": f"token {self.token}"},
                                    timeout=30, **kwargs)
        response.raise_for_status()
        return response.json()

    def url(self, path: str = "lab") -> str:
        separator = "&" if "?" in path else "?"
        return f"{self.base}{path}{separator}token={self.token}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 120,
                 interval: float = 0.5) -> Any:
        """Poll `check` until it returns something truthy; fail naming `what` and the log."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}\n"
                                     f"server log (tail):\n{self.log()[-3000:]}")
            time.sleep(interval)

    def open_in(self, page: Any, path: str = "lab") -> None:
        """Load JupyterLab at `path` in `page` and wait until it is ready.

        `reset` starts from an empty layout: no panels or notebooks restored from a test before.
        """
        page.goto(self.url(path + ("&" if "?" in path else "?") + "reset"))
        # `reset` redirects, so the splash may not exist yet: wait for the app, its restored
        # layout, and only then for the splash to go.
        page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
        page.evaluate("async () => { await window.jupyterapp.restored; }")
        page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=60_000)
        page.wait_for_selector(".jp-LabShell")

    def open_notebook(self, page: Any, name: str) -> None:
        """Open a notebook and wait for its kernel to be idle."""
        self.open_in(page, f"lab/tree/{name}")
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        # A fresh workspace may ask which kernel to use even though the notebook names one.
        try:
            page.wait_for_selector(".jp-Dialog:has-text('Select Kernel')", timeout=5_000)
            page.click(".jp-Dialog .jp-mod-accept")
        except Exception:  # playwright's TimeoutError: no dialog this time
            pass
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                               timeout=60_000)

    def write_notebook(self, name: str, cells: list[str]) -> Path:
        """A minimal nbformat 4.5 notebook of code cells (with ids) in the server's root."""
        notebook = {
            "cells": [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}",
                       "metadata": {}, "outputs": [], "source": source}
                      for i, source in enumerate(cells)],
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)",
                                        "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5,
        }
        path = self.notebook_dir / name
        path.write_text(json.dumps(notebook, indent=1))
        return path

    def restart(self) -> "Lab":
        """Stop this server and start it again on the same port, token and directories."""
        self.stop()
        self.process = start_lab(self.tmp, port=self.port, token=self.token).process
        return self

    def stop(self, timeout: float = 60) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_lab(tmp: Path, *, timeout: float = 120, port: int | None = None,
              token: str | None = None) -> Lab:
    """JupyterLab + the extension on loopback; again on the same `tmp` to restart it."""
    # The labextension is found through JUPYTER_PATH, as `pip install` would place it.
    data_dir = tmp / "jupyter-data"
    (data_dir / "labextensions").mkdir(parents=True, exist_ok=True)
    link = data_dir / "labextensions" / "jupyter-determined"
    if not link.exists():
        link.symlink_to(BUILT_EXTENSION, target_is_directory=True)
    config_dir = tmp / "jupyter-config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "jupyter_server_config.json").write_text(json.dumps({
        "ServerApp": {"jpserver_extensions": {"jupyter_determined": True}},
        "MasterLite": {"root_dir": str(tmp / "det-root"), "cpu_slots": 2,
                       "preemption_grace_seconds": 30},
    }))
    # No "get Jupyter news?" toast over the screenshots.
    (config_dir / "labconfig").mkdir(exist_ok=True)
    (config_dir / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    notebook_dir = tmp / "notebooks"
    notebook_dir.mkdir(exist_ok=True)
    port = port or free_port()
    token = token or "browser-test-" + os.urandom(6).hex()
    env = {key: value for key, value in os.environ.items() if not key.startswith("DET_")}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO / "harness"), str(REPO)]),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               JUPYTER_PATH=str(data_dir), JUPYTER_CONFIG_DIR=str(config_dir),
               JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), JUPYTER_PLATFORM_DIRS="1",
               IPYTHONDIR=str(tmp / "ipython"))
    argv = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
            "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={notebook_dir}", "--ServerApp.base_url=/jl/",
            "--ServerApp.port_retries=0", "--LabApp.expose_app_in_browser=True",
            f"--LabApp.workspaces_dir={tmp / 'workspaces'}", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    log_path = tmp / "jupyterlab.log"
    process = subprocess.Popen(argv, env=env, stdout=open(log_path, "ab"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(process, f"http://127.0.0.1:{port}/jl/", token, notebook_dir, log_path, tmp, port)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n{lab.log()[-4000:]}")
        try:
            lab.api("GET", "master")
            return lab
        except (requests.RequestException, ValueError):
            if time.monotonic() > deadline:
                lab.stop()
                raise RuntimeError(f"jupyter lab did not serve the Determined API within "
                                   f"{timeout} s:\n{lab.log()[-4000:]}")
            time.sleep(0.3)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    server = start_lab(tmp_path_factory.mktemp("lab"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, lab: Lab) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    # With the stack: a page error is a bug to find, and its message alone rarely says where.
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}\n{error.stack}"))
    page.console_messages = console  # type: ignore[attr-defined]
    yield page
    context.close()


@pytest.fixture
def extension_page_errors(page: Any) -> Callable[[], list[str]]:
    """`extension_page_errors()`: the page errors (with stacks) thrown through our code.

    Errors whose stack has no frame of the extension's bundle (`labextensions/jupyter-determined/`)
    are JupyterLab's own; once, in a cold CI run, JupyterLab logged a removeChild error that no
    run since has reproduced, and such an error says nothing about this extension.
    """
    return lambda: [message for message in page.console_messages
                    if message.startswith("pageerror") and "jupyter-determined/static" in message]


def save_screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@pytest.fixture
def screenshot() -> Callable[[Any, str], Path]:
    """`screenshot(page, name)` saves test-output/screenshots/<name>.png."""
    return save_screenshot
