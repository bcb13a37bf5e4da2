"""JupyterLab with the built labextension, driven by Debian's Chromium through Playwright.

`Lab` is a `JupyterServer` with the page helpers the browser tests share. Test files import it
from here (never from a conftest: in a whole-suite run `conftest` may name another folder's).
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Callable
from typing import Any

from tests._support.jupyter import BUILT_EXTENSION, JupyterServer
from tests._support.process import REPO
from tests._support.waiting import wait_until

SCREENSHOTS = REPO / "test-output" / "screenshots"
DOC_IMAGES = REPO / "docs" / "images"
SIDEBAR_TAB = '.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="jupyter-determined-sidebar"]'
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def missing_browser_requirement() -> str | None:
    """What the browser tests lack (with the command that provides it), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return (
            "playwright is not installed (pip install playwright; the browser is Debian's chromium)"
        )
    if not pathlib.Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set CHROMIUM)"
    if not (BUILT_EXTENSION / "package.json").exists():
        return (
            "the labextension is not built: cd labextension && jlpm install && jlpm build "
            "(or pip install -e .)"
        )
    return None


class Lab(JupyterServer):
    """JupyterLab + the extension (server and labextension) on loopback, for a browser."""

    def __init__(self, tmp: pathlib.Path, **kwargs: Any) -> None:
        kwargs.setdefault("labextension", True)
        kwargs.setdefault("log_name", "jupyterlab.log")
        super().__init__(tmp, **kwargs)

    def url(self, path: str = "lab") -> str:
        """The URL of `path` under the server, with the token."""
        separator = "&" if "?" in path else "?"
        return f"{self.base}{path}{separator}token={self.token}"

    def wait_for(
        self, what: str, check: Callable[[], Any], timeout: float = 120, interval: float = 0.5
    ) -> Any:
        """Poll `check` until it returns something truthy; fail naming `what` and the log."""
        return wait_until(
            check,
            timeout,
            what,
            interval,
            details=lambda: f"server log (tail):\n{self.log()[-3000:]}",
        )

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
        page.wait_for_selector(
            ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
        )

    def write_notebook(self, name: str, cells: list[str]) -> pathlib.Path:
        """A minimal nbformat 4.5 notebook of code cells (with ids) in the server's root."""
        notebook = {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "id": f"cell-{i}",
                    "metadata": {},
                    "outputs": [],
                    "source": source,
                }
                for i, source in enumerate(cells)
            ],
            "metadata": {
                "kernelspec": {
                    "display_name": "Python 3 (ipykernel)",
                    "language": "python",
                    "name": "python3",
                },
                "language_info": {"name": "python"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        path = self.notebook_dir / name
        path.write_text(json.dumps(notebook, indent=1))
        return path


def set_theme(page: Any, theme: str) -> None:
    """Switch JupyterLab to `theme` ("JupyterLab Light", "JupyterLab Dark") and wait until the
    page shows it: the theme's colours applied, and the splash JupyterLab covers the page with
    while a theme loads gone."""
    page.evaluate(
        "async theme => { await window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme}); }",
        theme,
    )
    # The attribute changes before the theme's CSS applies: wait for the page's colour too.
    page.wait_for_function(
        """theme => document.body.dataset.jpThemeName === theme && (
               getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim()
               === (theme.includes('Dark') ? '#111' : 'white'))""",
        arg=theme,
        timeout=15_000,
    )
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=60_000)


def show_sidebar(page: Any) -> None:
    """Open the Determined sidebar unless it is open (clicking the tab of the open panel would
    close it)."""
    if not page.is_visible("#jupyter-determined-sidebar"):
        page.click(SIDEBAR_TAB)
    page.wait_for_selector("#jupyter-determined-sidebar")


def dismiss_notifications(page: Any) -> None:
    """Close the JupyterLab notifications shown (as a user does before clicking what they
    cover, e.g. an experiment's end notice over a console's prompt); they stay listed in the
    notification center."""
    close = ".jp-Notification-Toast-Close"
    while shown := page.locator(close).count():
        page.locator(close).first.click()
        page.wait_for_function(
            "([sel, n]) => document.querySelectorAll(sel).length < n",
            arg=[close, shown],
            timeout=15_000,
        )


def save_screenshot(page: Any, name: str) -> pathlib.Path:
    """Save test-output/screenshots/<name>.png of `page`."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def widen_sidebar(page: Any, width: int) -> None:
    """Drag the left panel's splitter to about `width` px, as a user widens the sidebar."""
    handle = page.locator("#jp-main-split-panel > .lm-SplitPanel-handle").first
    box = handle.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 200)
    page.mouse.down()
    page.mouse.move(width + 40, box["y"] + 200, steps=5)
    page.mouse.up()


def save_sidebar_image(page: Any, name: str) -> pathlib.Path:
    """Save docs/images/<name>.png of the Determined sidebar (the docs' screenshots)."""
    DOC_IMAGES.mkdir(parents=True, exist_ok=True)
    path = DOC_IMAGES / f"{name}.png"
    page.locator("#jupyter-determined-sidebar").screenshot(path=str(path))
    return path
