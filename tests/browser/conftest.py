"""A real JupyterLab with jupyter_determined (server extension + the built labextension), and
Debian's Chromium driven by Playwright (PyPI): `Lab` and the browser helpers live in
tests._support.browser (test files import them from there, never from this conftest).

Needs: `apt-get install -y chromium`, `pip install playwright` (never `playwright install`: the
browser comes from Debian), and the built labextension (`cd labextension && jlpm install &&
jlpm build`, or any `pip install` of the project); `make test` installs all of them. A missing
piece fails these tests with the command that provides it (never a silent skip). Screenshots
go to `test-output/screenshots/`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Lab,
    missing_browser_requirement,
    save_screenshot,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _browser_requirements() -> None:
    missing = missing_browser_requirement()
    if missing:
        pytest.fail(missing, pytrace=False)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    server = Lab.start(tmp_path_factory.mktemp("lab"))
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
    return lambda: [
        message
        for message in page.console_messages
        if message.startswith("pageerror") and "jupyter-determined/static" in message
    ]


@pytest.fixture
def screenshot() -> Callable[[Any, str], Path]:
    """`screenshot(page, name)` saves test-output/screenshots/<name>.png."""
    return save_screenshot
