"""The cost of JupyterHub in front of the master: the same work through the Hub service and
against the same master standalone, as ratios (issue 29).

Two masters run side by side: `master-lite --jupyterhub` as the managed service `determined`
of a real JupyterHub (tests/_support/hub.py; calls go through configurable-http-proxy to
`<hub>/services/determined/api/v1/...` with each user's Hub API token, identified by the
service through the Hub), and a standalone master (calls straight to it with each user's
session token, `det user login`'s). Three users act at once on each:

* **metrics ingestion**: each user's writer process posts CALLS batches of 100 training reports x
  10 metrics (1,000 points, the harness's batch) to a sleeping trial of an experiment that user
  owns, the three at once; points/s until the last batch is answered, every point verified stored.
* **submit latency**: each user submits a one-metric Core API trial at once; seconds from the
  `POST /experiments` until the trial's first metric is stored (polled through the same door
  every 10 ms); the median of the three users' latencies.

Both sides alternate, REPEATS times; medians. Ideal: ratio 1 (the Hub's proxy and the cached
token check cost nothing); target: ingestion rate through the Hub >= 0.5 x standalone, submit
latency through the Hub <= 1.5 x standalone.
Run: PYTHONPATH=harness:. python bench/bench_hub.py (needs jupyterhub and
configurable-http-proxy: `make install`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    FIRST_METRIC_SCRIPT,
    context_tarball,
    interleaved,
    median,
    package_version,
    record,
    running_master,
    verdict,
    wait_for_experiment,
    wait_until,
)

from determined.common.api import Session  # noqa: E402
from tests._support.hub import HubProcess  # noqa: E402

USERS = ("hub_u1", "hub_u2", "hub_u3")
POINTS_PER_CALL = 1000
METRICS_PER_REPORT = 10
CALLS = int(os.environ.get("BENCH_HUB_CALLS", "30"))  # per user and measurement
REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
SLEEPER = {
    "name": "bench-hub-sleeper",
    "entrypoint": "sleep 3600",
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    "max_restarts": 0,
}
ONE_METRIC = {
    "name": "bench-hub-submit",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    "max_restarts": 0,
}


def _writer(url: str, token: str, trial_id: int, first_step: int, start: Any, done: Any) -> None:
    """One user's reporting process (a trial's MetricsShipper sends these batches)."""
    session = Session(url, token)
    per_call = POINTS_PER_CALL // METRICS_PER_REPORT
    bodies = [
        {
            "reports": [
                {
                    "group": "training",
                    "steps_completed": first_step + call * per_call + i,
                    "metrics": {f"m{k}": 0.001 * i + k for k in range(METRICS_PER_REPORT)},
                }
                for i in range(per_call)
            ]
        }
        for call in range(CALLS)
    ]
    session.get(f"/trials/{trial_id}")  # untimed: imports, connection, the Hub's first answer
    start.wait()
    try:
        for body in bodies:
            session.post(f"/trials/{trial_id}/metrics", body)
    except BaseException as exc:
        done.put(("error", repr(exc)))
        raise
    done.put(("ok", time.perf_counter()))


class Side:
    """One door to a master: its URL and the three users' tokens."""

    def __init__(self, name: str, url: str, tokens: dict[str, str], database: Path) -> None:
        self.name = name
        self.url = url
        self.database = database  # its master.db, to count what was stored
        self.sessions = {user: Session(url, token) for user, token in tokens.items()}
        self.tokens = tokens
        self.trials: dict[str, int] = {}
        self.sleepers: list[tuple[str, int]] = []  # (owner, experiment id)
        self.round = 0

    def start_sleepers(self) -> None:
        for user, session in self.sessions.items():
            answer = session.post("/experiments", {"config": SLEEPER, "context": None})
            self.sleepers.append((user, int(answer["experiment"]["id"])))
            trials = wait_until(
                lambda s=session, e=self.sleepers[-1][1]: [
                    t for t in s.get(f"/experiments/{e}/trials")["trials"] if t["state"] == "ACTIVE"
                ],
                120,
                f"{user}'s sleeping trial",
            )
            self.trials[user] = int(trials[0]["id"])

    def stop_sleepers(self) -> None:
        for user, exp_id in self.sleepers:  # each by its owner
            self.sessions[user].post(f"/experiments/{exp_id}/kill", {})
        for user, exp_id in self.sleepers:
            wait_for_experiment(self.sessions[user], exp_id)

    def stored(self) -> int:
        """Reports stored for the sleeping trials (read from the store itself)."""
        ids = sorted(self.trials.values())
        with contextlib.closing(sqlite3.connect(self.database, timeout=30)) as conn:
            query = f"SELECT COUNT(*) FROM metrics WHERE trial_id IN ({','.join('?' * len(ids))})"
            return int(conn.execute(query, ids).fetchone()[0])

    def ingestion(self) -> float:
        """Points/s of the three users reporting at once."""
        self.round += 1
        ctx = multiprocessing.get_context("spawn")
        start, done = ctx.Event(), ctx.Queue()
        first = self.round * 10_000_000
        processes = [
            ctx.Process(
                target=_writer,
                args=(self.url, self.tokens[user], self.trials[user], first, start, done),
            )
            for user in self.sessions
        ]
        before = self.stored()
        for process in processes:
            process.start()
        time.sleep(3)  # every writer imported and connected before the clock starts
        began = time.perf_counter()
        start.set()
        ends = [done.get(timeout=600) for _ in processes]
        for process in processes:
            process.join(60)
        failures = [detail for kind, detail in ends if kind == "error"]
        if failures:
            raise RuntimeError(f"{self.name}: a writer failed: {failures}")
        seconds = max(end for _, end in ends) - began
        points = len(processes) * CALLS * POINTS_PER_CALL
        stored = (self.stored() - before) * METRICS_PER_REPORT
        if stored != points:
            raise AssertionError(f"{self.name}: stored {stored} of {points} points")
        return points / seconds

    def submit_latency(self) -> float:
        """The median over the three users of submit -> first metric stored, all at once."""
        context = context_tarball({"train.py": FIRST_METRIC_SCRIPT})

        def one(session: Session) -> float:
            began = time.perf_counter()
            answer = session.post("/experiments", {"config": ONE_METRIC, "context": context})
            exp_id = int(answer["experiment"]["id"])
            while True:
                trials = session.get(f"/experiments/{exp_id}/trials")["trials"]
                if (
                    trials
                    and session.get(f"/trials/{trials[0]['id']}/metrics", {"limit": 1})["metrics"]
                ):
                    break
                time.sleep(0.01)
            elapsed = time.perf_counter() - began
            wait_for_experiment(session, exp_id)
            return elapsed

        with concurrent.futures.ThreadPoolExecutor(len(self.sessions)) as pool:
            return median(list(pool.map(one, self.sessions.values())))


def standalone_tokens(master: Any) -> dict[str, str]:
    """The three users on the standalone master, each signed in (a session token)."""
    tokens = {}
    for user in USERS:
        master.session.post("/users", {"user": {"username": user}, "password": f"{user}-pw"})
        login = Session(master.url, None).post(
            "/auth/login", {"username": user, "password": f"{user}-pw"}
        )
        tokens[user] = login["token"]
    return tokens


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-hub-") as tmp,
        HubProcess(
            Path(tmp) / "hub",
            users=USERS,
            cache_seconds=60,
            cpu_slots=6,
            service_environment={"MASTER_LITE_PREEMPTION_GRACE_SECONDS": "3"},
        ) as hub,
        running_master(cpu_slots=6) as master,
    ):
        hub_tokens = {u: hub.new_token(u) for u in USERS}
        through_hub = Side("hub", hub.service_url, hub_tokens, hub.master_root / "master.db")
        standalone = Side(
            "standalone", master.url, standalone_tokens(master), master.root_dir / "master.db"
        )
        sides = (through_hub, standalone)
        latencies = interleaved(
            {side.name: side.submit_latency for side in sides}, REPEATS + 1
        )  # the first of each: warm-up, dropped
        for side in sides:
            side.start_sleepers()
        try:
            through_hub.ingestion(), standalone.ingestion()  # warm-up, not counted
            rates = interleaved({side.name: side.ingestion for side in sides}, REPEATS)
        finally:
            for side in sides:
                side.stop_sleepers()
    rate_hub, rate_alone = median(rates["hub"]), median(rates["standalone"])
    lat_hub = median(latencies["hub"][1:])
    lat_alone = median(latencies["standalone"][1:])
    rate_ratio, lat_ratio = rate_hub / rate_alone, lat_hub / lat_alone
    print(
        f"ingestion: hub {rate_hub:,.0f} points/s, standalone {rate_alone:,.0f} "
        f"({rate_ratio:.2f}); submit: hub {lat_hub:.2f} s, standalone {lat_alone:.2f} s "
        f"({lat_ratio:.2f})",
        flush=True,
    )
    record(
        "Through JupyterHub (bench_hub.py)",
        f"Workload: 3 users at once on `master-lite --jupyterhub` behind JupyterHub "
        f"{package_version('jupyterhub')} and configurable-http-proxy (Hub API tokens, "
        f"checked through the Hub, cached 60 s) vs the same master standalone (session "
        f"tokens). Ingestion: each user posts {CALLS} batches of {POINTS_PER_CALL} points to "
        f"a trial they own; submit: each submits a one-metric Core API trial, median of the "
        f"three latencies to its first stored metric. Medians of {REPEATS} alternating runs.\n\n"
        "| measure | through the Hub | standalone | Hub / standalone | target |\n"
        "|---|---|---|---|---|\n"
        f"| ingestion, 3 users (points/s) | {rate_hub:,.0f} | {rate_alone:,.0f} | "
        f"{rate_ratio:.2f} | ≥ 0.5: {verdict(rate_ratio, 0.5, at_most=False)} |\n"
        f"| submit → first metric, 3 users (s) | {lat_hub:.2f} | {lat_alone:.2f} | "
        f"{lat_ratio:.2f} | ≤ 1.5: {verdict(lat_ratio, 1.5, at_most=True)} |",
    )


if __name__ == "__main__":
    main()
