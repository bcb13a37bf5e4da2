"""Attach from JupyterLab to a kernel trial (real JupyterLab, Chromium): a failed trial's kernel
is kept for post-mortem; from the sidebar, its experiment's trial row offers "Debug in console",
which opens a console on that very kernel, where the failed script's variable is there. A running
trial's row offers "Attach": a console whose cells run in a subshell of the trial's kernel,
answering while it trains. Closing the attached console shuts its own small kernel down, never
the trial's; closing a Debug console leaves the trial's kernel to be debugged again.
Screenshots in light and dark theme go to test-output/screenshots/."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import requests

from tests._support import context_tarball, wait_until
from tests._support.browser import dismiss_notifications, set_theme, show_sidebar
from tests.browser.test_notebook_widget_e2e import WIDGET, config_cell, run_in_notebook
from tests.master_lite.runners.kernel.test_attach import BOOM, LOOP
from tests.master_lite.runners.kernel.test_kernels import SINGLE, config

if TYPE_CHECKING:
    from tests._support.browser import Lab

CONSOLE = ".jp-CodeConsole"


def jupyter_get(lab: Lab, path: str) -> Any:
    """Jupyter's own REST API (`api/kernels`, `api/sessions`), as the server's owner."""
    headers = {"Authorization": f"token {lab.token}"}
    response = requests.get(f"{lab.base}api/{path}", headers=headers, timeout=30)
    response.raise_for_status()
    return response.json()


def running_kernels(lab: Lab) -> set[str]:
    return {kernel["id"] for kernel in jupyter_get(lab, "kernels")}


def console_kernel(lab: Lab, name: str) -> str:
    """The kernel of the console session named `name` (what Attach named its console)."""
    [kernel_id] = [s["kernel"]["id"] for s in jupyter_get(lab, "sessions") if s["name"] == name]
    return str(kernel_id)


def close_console(page: Any, name: str) -> None:
    """Close the console whose session is `name`, as its tab's close button does."""
    closed = page.evaluate(
        """(name) => {
            for (const widget of window.jupyterapp.shell.widgets('main')) {
                if (widget.sessionContext && widget.sessionContext.name === name) {
                    widget.close();
                    return true;
                }
            }
            return false;
        }""",
        name,
    )
    assert closed, f"no console {name!r} is open"
    page.wait_for_selector(CONSOLE, state="detached")


def print_in_console(page: Any, code: str, expected: str) -> None:
    """Type `code` in the console's prompt, run it, and wait for `expected` in its output."""
    page.click(f"{CONSOLE} .jp-CodeConsole-promptCell .jp-InputArea-editor")
    page.keyboard.type(code)
    page.keyboard.press("Shift+Enter")
    page.wait_for_selector(
        f"{CONSOLE} .jp-OutputArea-output:has-text('{expected}')", timeout=60_000
    )


def test_debug_in_console_opens_the_failed_trials_kernel(
    lab: Lab, page: Any, screenshot: Any, extension_page_errors: Any
) -> None:
    cfg = {
        **config(searcher=SINGLE, step_sleep=0, kernel={"keep_alive": 600}),
        "name": "kernel-attach",
        "entrypoint": "python3 s.py",
    }
    body = {"config": json.dumps(cfg), "context": context_tarball({"s.py": BOOM})}
    exp_id = lab.api("POST", "experiments", json=body)["experiment"]["id"]
    wait_until(
        lambda: lab.api("GET", f"experiments/{exp_id}")["experiment"]["state"] == "ERROR",
        120,
        "the experiment to fail",
    )
    (trial,) = lab.api("GET", f"experiments/{exp_id}")["trials"]
    kernel_id = lab.api("GET", f"trials/{trial['id']}/kernel")["jupyter_kernel_id"]

    lab.open_in(page)
    show_sidebar(page)
    row = f'.jp-Det-expRow[data-experiment-id="{exp_id}"]'
    page.wait_for_selector(row)
    page.click(row)
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{exp_id}"]'
    page.click(f'{view} .jp-Det-tab[data-section="trials"]')
    button = f'{view} button[data-attach-trial="{trial["id"]}"]'
    page.wait_for_selector(button)
    assert page.inner_text(button) == "Debug in console"
    screenshot(page, "kernel-attach-button-light")
    page.click(button)

    console = ".jp-CodeConsole"
    page.wait_for_selector(console, timeout=60_000)
    # The console's session is on the trial's kernel, not a new one.
    sessions = page.evaluate(
        """async () => {
            const manager = window.jupyterapp.serviceManager.sessions;
            await manager.refreshRunning();
            return [...manager.running()].map(s => ({type: s.type, kernel: s.kernel && s.kernel.id}));
        }"""
    )
    assert {"type": "console", "kernel": kernel_id} in sessions, sessions
    # The banner comes with the kernel's info reply: the console is connected.
    page.wait_for_selector(f"{console} .jp-CodeConsole-banner:has-text('Python')", timeout=60_000)
    page.click(f"{console} .jp-CodeConsole-promptCell .jp-InputArea-editor")
    page.keyboard.type("print('best is', best)")
    page.keyboard.press("Shift+Enter")
    page.wait_for_selector(
        f"{console} .jp-OutputArea-output:has-text('best is 41')", timeout=60_000
    )
    screenshot(page, "kernel-attach-console-light")
    set_theme(page, "JupyterLab Dark")
    screenshot(page, "kernel-attach-console-dark")
    set_theme(page, "JupyterLab Light")
    # Closing this console leaves the trial's kernel (it ends with keep_alive): Debug in console
    # finds it again, globals and all.
    close_console(page, f"trial-{trial['id']}")
    assert kernel_id in running_kernels(lab)
    page.click(button)
    page.wait_for_selector(f"{CONSOLE} .jp-CodeConsole-banner:has-text('Python')", timeout=60_000)
    print_in_console(page, "print('still', best)", "still 41")
    assert kernel_id in running_kernels(lab)
    assert extension_page_errors() == []


def test_the_notebook_widgets_banner_debugs_a_failed_kernel_trial_in_a_console(
    lab: Lab, page: Any, screenshot: Any, extension_page_errors: Any
) -> None:
    # %%det_submit from a notebook of this server runs its trial in a kernel by default.
    experiment_id = run_in_notebook(
        page,
        lab,
        "fails-in-kernel.ipynb",
        [
            "%load_ext jupyter_determined",
            "def rate(x):\n    return 1 / x",
            config_cell("fails-in-kernel", 10),
            "%%det_submit config\nimport determined as det\nlast_x = 0\n"
            "with det.core.init() as core_context:\n    rate(last_x)",
        ],
    )
    banner = page.wait_for_selector(f"{WIDGET} .jp-Det-nbBanner-line", timeout=120_000)
    assert "failed in [2], line 2 of the cell `def rate(x):`: ZeroDivisionError" in (
        banner.inner_text()
    )
    answer = lab.api("GET", f"experiments/{experiment_id}")
    assert answer["experiment"]["config"]["environment"]["kernel"] == {}
    page.click(f"{WIDGET} .jp-Det-nbDebug")
    console = ".jp-CodeConsole"
    page.wait_for_selector(console, timeout=60_000)
    # The banner comes with the kernel's info reply: the console is connected.
    page.wait_for_selector(f"{console} .jp-CodeConsole-banner:has-text('Python')", timeout=60_000)
    dismiss_notifications(page)  # the experiment's end notice sits over the console's prompt
    page.click(f"{console} .jp-CodeConsole-promptCell .jp-InputArea-editor")
    page.keyboard.type("print('last_x is', last_x)")
    page.keyboard.press("Shift+Enter")
    try:
        page.wait_for_selector(
            f"{console} .jp-OutputArea-output:has-text('last_x is 0')", timeout=60_000
        )
    finally:
        screenshot(page, "kernel-attach-from-widget-light")
    assert extension_page_errors() == []


def test_attach_to_a_running_trial_answers_from_a_subshell_while_it_trains(
    lab: Lab, page: Any, screenshot: Any, extension_page_errors: Any
) -> None:
    cfg = {
        **config(searcher=SINGLE, step_sleep=0, kernel={"keep_alive": 0}),
        "name": "kernel-attach-live",
        "entrypoint": "python3 s.py",
    }
    body = {"config": json.dumps(cfg), "context": context_tarball({"s.py": LOOP})}
    exp_id = lab.api("POST", "experiments", json=body)["experiment"]["id"]

    def trial_logs() -> list[str]:
        trials = lab.api("GET", f"experiments/{exp_id}")["trials"]
        if not trials:
            return []
        return [e["line"] for e in lab.api("GET", f"trials/{trials[0]['id']}/logs")["logs"]]

    wait_until(lambda: "looping" in trial_logs(), 120, "the trial's loop to start")
    (trial,) = lab.api("GET", f"experiments/{exp_id}")["trials"]
    lab.open_in(page)
    show_sidebar(page)
    page.click(f'.jp-Det-expRow[data-experiment-id="{exp_id}"]')
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{exp_id}"]'
    page.click(f'{view} .jp-Det-tab[data-section="trials"]')
    button = f'{view} button[data-attach-trial="{trial["id"]}"]'
    page.wait_for_selector(button)
    assert page.inner_text(button) == "Attach"
    page.click(button)
    console = ".jp-CodeConsole"
    page.wait_for_selector(
        f"{console} .jp-OutputArea-output:has-text('Attached to trial {trial['id']}')",
        timeout=60_000,
    )
    # The loop holds the trial kernel's main shell until `stop` is set: only a subshell of it
    # can answer this, with the script's live globals.
    page.click(f"{console} .jp-CodeConsole-promptCell .jp-InputArea-editor")
    page.keyboard.type("print('STEP', step > 0, stop)")
    page.keyboard.press("Shift+Enter")
    page.wait_for_selector(f"{console} .jp-OutputArea-output:has-text('STEP True False')")
    assert lab.api("GET", f"experiments/{exp_id}")["experiment"]["state"] == "ACTIVE"
    screenshot(page, "kernel-attach-live-light")
    # The console's small kernel serves it alone: closing the console shuts it down, and only it.
    trial_kernel = lab.api("GET", f"trials/{trial['id']}/kernel")["jupyter_kernel_id"]
    small_kernel = console_kernel(lab, f"trial-{trial['id']} (attached)")
    assert small_kernel != trial_kernel
    close_console(page, f"trial-{trial['id']} (attached)")
    wait_until(
        lambda: small_kernel not in running_kernels(lab),
        60,
        "the closed console's kernel to shut down",
    )
    assert trial_kernel in running_kernels(lab)
    assert lab.api("GET", f"experiments/{exp_id}")["experiment"]["state"] == "ACTIVE"
    # Attached again: not read-only, setting the global ends the training loop.
    page.click(button)
    page.wait_for_selector(
        f"{console} .jp-OutputArea-output:has-text('Attached to trial {trial['id']}')",
        timeout=60_000,
    )
    page.click(f"{console} .jp-CodeConsole-promptCell .jp-InputArea-editor")
    page.keyboard.type("stop = True")
    page.keyboard.press("Shift+Enter")
    wait_until(
        lambda: lab.api("GET", f"experiments/{exp_id}")["experiment"]["state"] == "COMPLETED",
        120,
        "the experiment to complete",
    )
    assert any(line.startswith("stopped at ") for line in trial_logs())
    assert extension_page_errors() == []


def test_console_buttons_only_where_they_work(
    lab: Lab, page: Any, extension_page_errors: Any
) -> None:
    """A QUEUED trial has no kernel yet: no Attach. A failed trial's kernel is kept for its
    keep_alive only: Debug in console goes away when the kernel does (issue 28, item 6)."""
    # Three trials at once on the lab's two slots: one of them waits.
    cfg = {
        **config(
            searcher={"name": "random", "max_trials": 3, "max_concurrent_trials": 3},
            step_sleep=0,
            kernel={"keep_alive": 0},
        ),
        "name": "one-waits-for-a-slot",
        "entrypoint": "python3 s.py",
    }
    body = {"config": json.dumps(cfg), "context": context_tarball({"s.py": LOOP})}
    exp_id = lab.api("POST", "experiments", json=body)["experiment"]["id"]

    def run_states() -> dict[str, list[int]]:
        states: dict[str, list[int]] = {}
        for t in lab.api("GET", f"experiments/{exp_id}")["trials"]:
            states.setdefault(str(t["run_state"]), []).append(t["id"])
        return states

    wait_until(
        lambda: sorted(map(len, run_states().values())) == [1, 2] and "QUEUED" in run_states(),
        120,
        "two trials running and one queued",
    )
    states = run_states()
    lab.open_in(page)
    show_sidebar(page)
    page.click(f'.jp-Det-expRow[data-experiment-id="{exp_id}"]')
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{exp_id}"]'
    page.click(f'{view} .jp-Det-tab[data-section="trials"]')
    for trial_id in states["RUNNING"]:
        button = f'{view} button[data-attach-trial="{trial_id}"]'
        page.wait_for_selector(button)
        assert page.inner_text(button) == "Attach"
    [waiting] = states["QUEUED"]
    assert page.locator(f'{view} tr[data-trial-id="{waiting}"]').count() == 1
    assert page.locator(f'{view} button[data-attach-trial="{waiting}"]').count() == 0
    lab.api("POST", f"experiments/{exp_id}/kill")

    keep_alive = 15
    cfg = {
        **config(searcher=SINGLE, step_sleep=0, kernel={"keep_alive": keep_alive}),
        "name": "kept-for-a-while",
        "entrypoint": "python3 s.py",
    }
    body = {"config": json.dumps(cfg), "context": context_tarball({"s.py": BOOM})}
    failed = lab.api("POST", "experiments", json=body)["experiment"]["id"]
    wait_until(
        lambda: lab.api("GET", f"experiments/{failed}")["experiment"]["state"] == "ERROR",
        120,
        "the experiment to fail",
    )
    (trial,) = lab.api("GET", f"experiments/{failed}")["trials"]
    assert trial["kernel_kept"] is True
    page.click(f'.jp-Det-expRow[data-experiment-id="{failed}"]')
    view = f'.jp-Det-experimentView:not(.jp-Det-embedded)[data-experiment-id="{failed}"]'
    page.click(f'{view} .jp-Det-tab[data-section="trials"]')
    button = f'{view} button[data-attach-trial="{trial["id"]}"]'
    page.wait_for_selector(button)
    assert page.inner_text(button) == "Debug in console"
    # keep_alive runs out: the master says so (a trial event) and the button goes.
    page.wait_for_selector(button, state="detached", timeout=(keep_alive + 60) * 1000)
    assert lab.api("GET", f"trials/{trial['id']}")["trial"]["kernel_kept"] is False
    assert extension_page_errors() == []
