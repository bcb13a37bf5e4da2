"""The sidebar's Queue section in a real JupyterLab (Chromium) on a master with a fake 2-GPU
inventory and the priority scheduler without preemption (docs/sidebar.md, "Queue").

ann's 2-slot job holds both GPUs; ben's and then ann's second 1-slot jobs wait behind it. The
Queue lists the three in queue order with their users, slots (2/2, 0/1) and states, and the
scheduler's reason each waiting job waits on a line of its own. Moving ann's waiting job up
(↑: ahead of ben's) reorders the queue, in the master's queue (GET /job-queues) and on screen;
a weight typed in the field is set; a priority out of range is refused in words, and the
value typed stays. A job's name opens its experiment, whose trials table shows why its trial
waits. Screenshots (light, dark, and light at the default panel width) go to
docs/images/sidebar-queue-*.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests._support.browser import (
    Lab,
    save_screenshot,
    save_sidebar_image,
    set_theme,
    show_sidebar,
    widen_sidebar,
)

QUEUE = "#jupyter-determined-sidebar .jp-Det-queue"
SLEEP = "python3 -c 'import time; time.sleep(600)'"


class _QueueLab(Lab):
    """Lab on two fake GPUs with the priority scheduler and no preemption: the running job
    keeps its slots and the others wait in queue order."""

    def environment(self) -> dict[str, str]:
        return {
            **super().environment(),
            "MASTER_LITE_FAKE_GPUS": "2",
            "MASTER_LITE_SCHEDULER": "priority",
            "MASTER_LITE_PREEMPTION": "false",
        }


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """This file's own Lab (_QueueLab)."""
    server = _QueueLab.start(tmp_path_factory.mktemp("queue-lab"), labextension=True)
    yield server
    server.stop()


def _signed_in(lab: Lab, name: str) -> str:
    """A new user's session token (the owner account, an admin, makes the account)."""
    lab.api("POST", "users", json={"user": {"username": name}, "password": f"{name}-pw"})
    answer = requests.post(
        f"{lab.det_master}/api/v1/auth/login",
        json={"username": name, "password": f"{name}-pw"},
        headers={"Authorization": f"token {lab.token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def _submit(lab: Lab, token: str, name: str, slots: int) -> int:
    """An active experiment of the token's user whose one trial sleeps on `slots` GPUs."""
    config = {
        "name": name,
        "entrypoint": SLEEP,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "resources": {"slots_per_trial": slots},
        "max_restarts": 0,
    }
    answer = requests.post(
        f"{lab.det_master}/api/v1/experiments",
        json={"config": config, "context": None, "activate": True},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["experiment"]["id"])


def _queue_ids(lab: Lab) -> list[str]:
    return [job["jobId"] for job in lab.api("GET", "job-queues")["jobs"]]


def _rows_shown(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        f"{QUEUE} tr.jp-Det-queueRow", "rows => rows.map(r => r.dataset.jobId)"
    )


def _wait_rows(page: Any, expected: list[str]) -> None:
    page.wait_for_function(
        """([sel, ids]) => JSON.stringify([...document.querySelectorAll(
               `${sel} tr.jp-Det-queueRow`)].map(r => r.dataset.jobId)) === JSON.stringify(ids)""",
        arg=[QUEUE, expected],
        timeout=30_000,
    )


def test_the_queue_lists_jobs_in_order_and_moving_one_up_reorders_it(
    page: Any, lab: Lab, extension_page_errors: Any
) -> None:
    lab.open_in(page)
    show_sidebar(page)
    # Nothing submitted yet: the empty state says so.
    page.wait_for_selector(f"{QUEUE} .jp-Det-queue-empty", timeout=30_000)
    assert "The queue is empty." in page.inner_text(QUEUE)

    ann, ben = _signed_in(lab, "ann"), _signed_in(lab, "ben")
    big = _submit(lab, ann, "ann-pretrain", 2)
    lab.wait_for(
        "ann's 2-slot job to hold both GPUs",
        lambda: lab.api("GET", f"experiments/{big}")["trials"][0].get("run_state") == "RUNNING",
        timeout=60,
    )
    sweep = _submit(lab, ben, "ben-sweep", 1)
    finetune = _submit(lab, ann, "ann-finetune", 1)
    try:
        first = [f"exp-{big}", f"exp-{sweep}", f"exp-{finetune}"]
        lab.wait_for("the master's queue", lambda: _queue_ids(lab) == first, timeout=30)
        assert [gpu["index"] for gpu in lab.api("GET", "resources")["gpus"]] == [0, 1]
        _wait_rows(page, first)
        page.wait_for_function(
            "() => document.querySelectorAll('.jp-Det-cluster .jp-Det-slot-busy').length === 2",
            timeout=30_000,
        )
        # JupyterLab's default panel width: each job is a card (no header row), its user,
        # state and slots under its name.
        card = f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{big}"] .jp-Det-q-narrowMeta'
        page.wait_for_selector(card, state="visible", timeout=10_000)
        assert page.inner_text(card) == "ann · Scheduled · 2/2 slots"
        assert not page.is_visible(f"{QUEUE} thead")
        save_sidebar_image(page, "sidebar-queue-narrow-light")
        widen_sidebar(page, 640)
        page.wait_for_selector(card, state="hidden", timeout=10_000)

        row = f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{big}"]'
        assert page.inner_text(f"{row} .jp-Det-q-name") == f"ann-pretrain (exp-{big})"
        assert page.inner_text(f"{row} .jp-Det-q-slots") == "2/2"
        assert page.inner_text(f"{row} td.jp-Det-q-state") == "Scheduled"
        waiting = f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{sweep}"]'
        assert page.inner_text(f"{waiting} td.jp-Det-q-user") == "ben"
        assert page.inner_text(f"{waiting} .jp-Det-q-slots") == "0/1"
        assert page.inner_text(f"{waiting} td.jp-Det-q-state") == "Queued"
        # Why it waits: the scheduler's words, on a visible line of their own.
        reason = f'{QUEUE} tr.jp-Det-queueReason[data-job-id="exp-{sweep}"]'
        page.wait_for_selector(reason, state="visible", timeout=30_000)
        assert page.inner_text(reason).strip().startswith("waiting")

        # ↑ on ann's waiting job: ahead of ben's, in the master and on screen.
        page.click(f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{finetune}"] .jp-Det-q-up')
        moved = [f"exp-{big}", f"exp-{finetune}", f"exp-{sweep}"]
        _wait_rows(page, moved)
        assert _queue_ids(lab) == moved

        # A change the master refuses (as it answers another user's job: 403) shows its
        # message; the queue on screen stays as it was.
        refusal = f"experiment {big} belongs to ann: only ann or an admin may update it"

        def refuse(route: Any) -> None:
            if route.request.method == "POST":
                route.fulfill(status=403, json={"message": refusal})
            else:
                route.continue_()

        page.route("**/determined/api/v1/job-queues*", refuse)
        page.click(f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{big}"] .jp-Det-q-down')
        error = page.wait_for_selector(f"{QUEUE} .jp-Det-error", timeout=10_000)
        assert error.inner_text() == f"Cannot move exp-{big} down: {refusal}"
        page.unroute("**/determined/api/v1/job-queues*", refuse)
        assert _rows_shown(page) == moved and _queue_ids(lab) == moved

        # A weight typed and Enter: set in the master (and the refusal's message goes).
        weight = f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{sweep}"] .jp-Det-q-weightInput'
        page.fill(weight, "2")
        page.press(weight, "Enter")
        lab.wait_for(
            "ben's job to weigh 2",
            lambda: (
                next(
                    j for j in lab.api("GET", "job-queues")["jobs"] if j["entityId"] == str(sweep)
                )["weight"]
                == 2
            ),
            timeout=30,
        )
        # A priority out of range: refused in words, nothing sent, the typed value kept.
        priority = f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{sweep}"] .jp-Det-q-priorityInput'
        page.fill(priority, "500")
        page.press(priority, "Enter")
        page.wait_for_selector(f"{QUEUE} .jp-Det-error:has-text('from 1 to 99')", timeout=10_000)
        assert page.input_value(priority) == "500"
        assert page.get_attribute(priority, "aria-invalid") == "true"
        page.fill(priority, "42")
        page.press(priority, "Enter")
        page.wait_for_selector(f"{QUEUE} .jp-Det-error", state="detached", timeout=30_000)

        _wait_rows(page, moved)
        page.wait_for_selector(f'{QUEUE} tr.jp-Det-queueReason[data-job-id="exp-{finetune}"]')
        save_sidebar_image(page, "sidebar-queue-light")
        set_theme(page, "JupyterLab Dark")
        save_sidebar_image(page, "sidebar-queue-dark")
        set_theme(page, "JupyterLab Light")
        # The title folds the section (the room goes to the experiment table) and unfolds it.
        page.click(f"{QUEUE} .jp-Det-queue-toggle")
        page.wait_for_selector(f"{QUEUE} .jp-Det-queue-body", state="hidden", timeout=5_000)
        page.click(f"{QUEUE} .jp-Det-queue-toggle")
        page.wait_for_selector(f"{QUEUE} .jp-Det-queue-body", state="visible", timeout=5_000)

        # The job's name opens its experiment, whose trials table says why the trial waits
        # under its state (the notebook widget shows the same view).
        page.click(f'{QUEUE} tr.jp-Det-queueRow[data-job-id="exp-{sweep}"] .jp-Det-q-name')
        note = ".jp-Det-trialsTable tr[data-state='QUEUED'] .jp-Det-waitNote"
        page.wait_for_selector(note, state="visible", timeout=30_000)
        assert page.inner_text(note).startswith("waiting")
        save_screenshot(page, "queue-experiment-wait-note")
        assert extension_page_errors() == []
    finally:
        for experiment in (finetune, sweep, big):
            lab.api("POST", f"experiments/{experiment}/kill")
