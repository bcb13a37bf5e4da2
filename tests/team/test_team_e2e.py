"""Issue 29, end to end: a team's GPU server, as its users meet it.

Two real Unix users, `e2e_alice` and `e2e_bob`, share one master, deployed two ways:

* **hub**: a real JupyterHub (configurable-http-proxy, DummyAuthenticator) runs `master-lite
  --jupyterhub` as its service `determined`, and its own spawner (LocalProcessSpawner) starts
  each user's JupyterLab as that user, from the trial interpreter `make install` makes. The
  users sign in through the Hub's login page in Chromium; their terminals are their servers'
  environment (`DET_MASTER` of the service, their `JUPYTERHUB_API_TOKEN`), with no login step.
  The admin is a member of the Hub group `determined-admins`.
* **standalone**: `master-lite --run-trials-as owner` with `det user` accounts; each user signs
  in with `det user login` in their terminal and starts their own JupyterLab pointed at the
  master (`DET_MASTER`), which proxies with their stored login.

In both: alice's and bob's JupyterLabs show one list of experiments, with whose each is;
alice's trial runs as alice's uid and cannot read bob's checkpoint, the master's database,
master.json or the master's token; bob cannot kill alice's experiment (403 naming her), the
admin can; alice's `det e list` in her terminal works without signing in.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from determined.common.api import APIException, Session
from tests._support import MasterProcess, free_port, trials, wait_for_experiment, wait_until
from tests._support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    missing_browser_requirement,
    save_screenshot,
    set_theme,
    show_sidebar,
)
from tests._support.hub import HubProcess
from tests._support.jupyter import BUILT_EXTENSION
from tests._support.process import REPO, ServerProcess
from tests._support.unix_users import (
    UnixUser,
    missing_account_requirement,
    process_environment,
    run_as,
    unix_users,
)

pytestmark = pytest.mark.slow

ALICE, BOB, ADMIN = "e2e_alice", "e2e_bob", "e2e_admin"
# window.jupyterapp: the test switches the theme through its commands (tests/_support/browser.py).
LAB_TEST_ARGS = ["--LabApp.expose_app_in_browser=True"]
PASSWORD = "Team-e2e-pw1"

# Saves a checkpoint (bob's experiment: the file alice's trial will try to read).
WRITER = """
import os
import determined as det

with det.core.init() as core:
    with core.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
        (path / "weights").write_text("bob's weights")
    core.train.report_validation_metrics(steps_completed=1, metrics={"uid": os.getuid()})
"""

# Tries to read each path of targets.json and reports what it saw (alice's experiment).
PROBE = """
import json, os
import determined as det

tries = {}
for path, kind in json.load(open("targets.json")).items():
    try:
        if kind == "dir":
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        tries[path] = "read"
    except OSError as exc:
        tries[path] = type(exc).__name__
hub_vars = sorted(k for k in os.environ if k.startswith("JUPYTERHUB_") or k == "JPY_API_TOKEN")
print("SEEN " + json.dumps({"uid": os.getuid(), "tries": tries, "hub_vars": hub_vars}), flush=True)
with det.core.init() as core:
    core.train.report_validation_metrics(steps_completed=1, metrics={"uid": os.getuid()})
"""

# Runs until it is told to stop (the experiment bob may not kill and the admin may).
UNTIL_STOPPED = """
import time
import determined as det

with det.core.init() as core:
    step = 0
    while not core.preempt.should_preempt():
        step += 1
        core.train.report_training_metrics(steps_completed=step, metrics={"step": step})
        time.sleep(0.5)  # a slow training step
"""

CONFIG = """\
name: {name}
entrypoint: python3 train.py
max_restarts: 0
searcher: {{name: single, metric: uid, max_length: 1}}
"""


class Terminal:
    """A user's terminal: their account, the environment their JupyterLab gives terminals."""

    def __init__(self, user: UnixUser, env: dict[str, str]) -> None:
        self.user = user
        self.env = env

    def det(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """`det ARGS` as this user (`stdin`: what they type)."""
        return run_as(
            self.user, [self.env["TRIAL_VENV_BIN"] + "/det", *args], self.env, stdin=stdin
        )

    def create_experiment(self, name: str, script: str, extra: dict[str, str] = {}) -> int:  # noqa: B006
        """`det e create` of a context written into the user's home; the new experiment's id."""
        folder = Path(self.user.home) / name
        folder.mkdir(exist_ok=True)
        files = {"train.py": script, "config.yaml": CONFIG.format(name=name), **extra}
        for file_name, text in files.items():
            (folder / file_name).write_text(text)
        for path in [folder, *folder.iterdir()]:
            os.chown(path, self.user.uid, self.user.gid)
        made = run_as(
            self.user,
            [self.env["TRIAL_VENV_BIN"] + "/det", "e", "create", "config.yaml", "."],
            self.env,
            cwd=str(folder),
        )
        assert made.returncode == 0, f"det e create as {self.user.name}: {made.stderr}"
        found = re.search(r"Created experiment (\d+)", made.stdout)
        assert found, made.stdout
        return int(found.group(1))


class Team:
    """One deployment of the shared master, as the tests use it."""

    kind: str
    root: Path  # the master's root dir
    terminals: dict[str, Terminal]
    admin: Session  # an admin user of the master (not the owner account)
    owner: Session  # the master token (the master's own Unix account)
    user_sessions: dict[str, Session]

    def open_lab(self, page: Any, name: str) -> None:
        """Sign `name` in and open their JupyterLab in `page`."""
        raise NotImplementedError


def _trial_venv(place: Path, check_user: str) -> Path:
    """The interpreter users run (their JupyterLab, det, trials), made as `make install` does."""
    out = place / "venv-trials"
    made = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "make_trial_venv.py"),
            "--venv",
            sys.prefix,
            "--out",
            str(out),
            "--check-user",
            check_user,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    return out


def _lab_data(place: Path, users: dict[str, UnixUser]) -> Path:
    """A Jupyter data dir holding this checkout's built labextension (as `make install` puts it
    in .venv), for every user's JupyterLab (JUPYTER_PATH); and no "Jupyter news?" toast over
    the screenshots (each user's own labconfig)."""
    data = place / "jupyter-data"
    link = data / "labextensions" / "jupyter-determined"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(BUILT_EXTENSION, target_is_directory=True)
    for user in users.values():
        labconfig = Path(user.home) / ".jupyter" / "labconfig"
        labconfig.mkdir(parents=True, exist_ok=True)
        (labconfig / "page_config.json").write_text(
            json.dumps(
                {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
            )
        )
        for path in (labconfig.parent, labconfig, labconfig / "page_config.json"):
            os.chown(path, user.uid, user.gid)
    return data


def _terminal_env(base: dict[str, str], user: UnixUser, venv: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in base.items()
        if key.startswith(("DET_", "JUPYTERHUB_", "JPY_", "JUPYTER_PATH", "LANG", "LC_"))
    }
    env.update(
        HOME=user.home,
        USER=user.name,
        LOGNAME=user.name,
        PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        TRIAL_VENV_BIN=str(venv / "bin"),
    )
    return env


@pytest.fixture(scope="module")
def place() -> Iterator[Path]:
    """A directory every user may enter (as /srv is): the master's root dir, the Hub's files,
    the trial interpreter."""
    missing = missing_account_requirement() or missing_browser_requirement()
    if missing:
        pytest.fail(missing, pytrace=False)
    parent = Path(tempfile.mkdtemp(prefix="det-team-e2e-"))
    parent.chmod(0o755)
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="module")
def accounts(place: Path) -> Iterator[dict[str, UnixUser]]:
    with unix_users([ALICE, BOB]) as made:
        yield made


class _HubTeam(Team):
    kind = "hub"

    def __init__(self, hub: HubProcess, users: dict[str, UnixUser], venv: Path) -> None:
        self.hub = hub
        self.root = hub.master_root
        self.terminals = {}
        for name, user in users.items():
            hub.start_server(name)
            pid = wait_until(lambda n=name: _server_pid(n), 30, f"{name}'s JupyterLab process")
            self.terminals[name] = Terminal(
                user, _terminal_env(process_environment(pid), user, venv)
            )
        hub_url = hub.service_url
        self.admin = Session(hub_url, hub.new_token(ADMIN))
        self.owner = Session(hub_url, (self.root / "private" / "user_token").read_text().strip())
        self.user_sessions = {name: Session(hub_url, hub.new_token(name)) for name in users}

    def open_lab(self, page: Any, name: str) -> None:
        page.goto(f"{self.hub.url}/hub/login?next=/hub/user/{name}/lab")
        page.fill("input#username_input", name)
        page.fill("input#password_input", HubProcess.password)
        page.click("#login_submit")
        page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=120_000)
        page.wait_for_selector(".jp-LabShell", timeout=120_000)


def _server_pid(name: str) -> int | None:
    found = subprocess.run(
        ["pgrep", "-u", name, "-f", "jupyterhub-singleuser"], capture_output=True, text=True
    )
    pids = [int(p) for p in found.stdout.split()]
    return min(pids) if pids else None


class UserLab(ServerProcess):
    """A user's own JupyterLab (the standalone deployment), run as that user."""

    name = "jupyterlab"

    def __init__(self, user: UnixUser, env: dict[str, str], log: Path) -> None:
        super().__init__(log)
        self.user = user
        self.env = env
        self.port = free_port()
        self.token = secrets.token_hex(16)

    def command(self) -> list[str]:
        return [
            self.env["TRIAL_VENV_BIN"] + "/jupyter-lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.user.home}",
            *LAB_TEST_ARGS,
        ]

    def environment(self) -> dict[str, str]:
        return self.env

    def ready(self) -> bool:
        import requests

        try:
            return requests.get(f"http://127.0.0.1:{self.port}/api", timeout=2).ok
        except requests.RequestException:
            return False

    def launch(self, timeout: float = 120, interval: float = 0.2) -> None:
        user = self.user

        def become_user() -> None:
            os.setgroups(os.getgrouplist(user.name, user.gid))
            os.setgid(user.gid)
            os.setuid(user.uid)
            os.chdir(user.home)

        self.preexec_fn = become_user
        super().launch(timeout, interval)


class _StandaloneTeam(Team):
    kind = "standalone"

    def __init__(
        self, master: MasterProcess, users: dict[str, UnixUser], venv: Path, place: Path
    ) -> None:
        self.master = master
        self.root = master.root_dir
        self.owner = master.session
        self.master.session.post(
            "/users", {"user": {"username": ADMIN, "admin": True}, "password": PASSWORD}
        )
        admin_token = master.session.post("/auth/login", {"username": ADMIN, "password": PASSWORD})
        self.admin = Session(master.url, admin_token["token"])
        self.terminals = {}
        self.user_sessions = {}
        self.labs: dict[str, UserLab] = {}
        for name, user in users.items():
            master.session.post("/users", {"user": {"username": name}, "password": PASSWORD})
            env = _terminal_env(
                {"DET_MASTER": master.url, "JUPYTER_PATH": str(_lab_data(place, users))},
                user,
                venv,
            )
            terminal = Terminal(user, env)
            # The one sign-in a standalone user does: `det user login` in their terminal.
            login = terminal.det("user", "login", name, stdin=PASSWORD + "\n")
            assert login.returncode == 0, login.stdout + login.stderr
            self.terminals[name] = terminal
            token = master.session.post("/auth/login", {"username": name, "password": PASSWORD})
            self.user_sessions[name] = Session(master.url, token["token"])
            lab = UserLab(user, env, place / f"lab-{name}.log")
            lab.launch()
            self.labs[name] = lab

    def open_lab(self, page: Any, name: str) -> None:
        lab = self.labs[name]
        page.goto(f"http://127.0.0.1:{lab.port}/lab?token={lab.token}")
        page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=120_000)
        page.wait_for_selector(".jp-LabShell", timeout=120_000)

    def close(self) -> None:
        for lab in self.labs.values():
            if lab.alive():
                lab.stop(60)


@pytest.fixture(scope="module", params=["hub", "standalone"])
def team(
    request: pytest.FixtureRequest, place: Path, accounts: dict[str, UnixUser]
) -> Iterator[Team]:
    venv = _trial_venv(place / request.param, ALICE)
    service_env = {"MASTER_LITE_TRIAL_PYTHON": str(venv / "bin" / "python")}
    if request.param == "hub":
        spawner = "\n".join(
            [
                "c.JupyterHub.spawner_class = 'jupyterhub.spawner.LocalProcessSpawner'",
                f"c.Spawner.cmd = [{str(venv / 'bin' / 'jupyterhub-singleuser')!r}]",
                "c.Spawner.default_url = '/lab'",
                f"c.Spawner.args = {LAB_TEST_ARGS!r}",
                "c.Spawner.http_timeout = 120",
                "c.Spawner.start_timeout = 120",
            ]
        )
        hub_dir = place / "hub" / "hub"
        # Traversable (the master's root dir is inside), not listable: the Hub's database and
        # cookie secret are no user's business.
        hub_dir.mkdir(mode=0o711, parents=True)
        hub = HubProcess(
            hub_dir,
            users=list(accounts),
            admins_group=[ADMIN],
            service_environment=service_env,
            spawner_environment={"JUPYTER_PATH": str(_lab_data(place, accounts))},
            extra_config=spawner,
        )
        try:
            yield _HubTeam(hub, accounts, venv)
        finally:
            hub.stop()
    else:
        root = place / "standalone" / "root"
        with MasterProcess(
            root, cpu_slots=3, extra_args=["--run-trials-as", "owner"], env=service_env
        ) as master:
            deployment = _StandaloneTeam(master, accounts, venv, place / "standalone")
            try:
                yield deployment
            finally:
                deployment.close()


def _seen(session: Session, exp_id: int) -> dict:
    trial_id = trials(session, exp_id)[0]["id"]
    for entry in session.get(f"/trials/{trial_id}/logs")["logs"]:
        if entry["line"].startswith("SEEN "):
            return dict(json.loads(entry["line"][5:]))
    raise AssertionError(f"experiment {exp_id} printed nothing it saw")


@pytest.fixture(scope="module")
def experiments(team: Team) -> dict[str, int]:
    """Bob's experiment with a checkpoint, then alice's probe of bob's files and the master's."""
    bob, alice = team.terminals[BOB], team.terminals[ALICE]
    bob_exp = bob.create_experiment("bobs-weights", WRITER)
    assert wait_for_experiment(team.owner, bob_exp)["state"] == "COMPLETED"
    checkpoint = team.owner.get(f"/experiments/{bob_exp}/checkpoints")["checkpoints"][0]
    bob_dir = team.root / "checkpoints" / checkpoint["uuid"]
    assert (bob_dir / "weights").read_text() == "bob's weights"
    targets = {
        str(bob_dir / "weights"): "file",
        str(bob_dir): "dir",
        str(team.root / "master.db"): "file",
        str(team.root / "master.json"): "file",
        str(team.root / "private" / "user_token"): "file",
    }
    alice_exp = alice.create_experiment(
        "alices-probe", PROBE, {"targets.json": json.dumps(targets)}
    )
    assert wait_for_experiment(team.owner, alice_exp)["state"] == "COMPLETED"
    return {"bob": bob_exp, "alice": alice_exp}


def test_alices_trial_runs_as_alice_and_cannot_read_bobs_checkpoint_nor_the_master(
    team: Team, accounts: dict[str, UnixUser], experiments: dict[str, int]
) -> None:
    seen = _seen(team.owner, experiments["alice"])
    assert seen["uid"] == accounts[ALICE].uid
    assert seen["tries"], "the probe tried nothing"
    refused = {path: what for path, what in seen["tries"].items() if what != "read"}
    assert refused == seen["tries"], f"alice's trial read {set(seen['tries']) - set(refused)}"
    assert seen["hub_vars"] == []
    experiment = team.owner.get(f"/experiments/{experiments['alice']}")["experiment"]
    assert experiment["username"] == ALICE


def test_bob_cannot_kill_alices_experiment_an_admin_can(team: Team) -> None:
    alice, bob = team.terminals[ALICE], team.terminals[BOB]
    exp_id = alice.create_experiment("alices-long-run", UNTIL_STOPPED)
    wait_until(
        lambda: [t for t in trials(team.owner, exp_id) if t.get("latest_training")],
        120,
        f"alice's experiment {exp_id} to train",
    )

    refused = bob.det("e", "kill", str(exp_id))
    assert refused.returncode != 0
    assert f"belongs to {ALICE}" in refused.stdout + refused.stderr
    with pytest.raises(APIException) as refusal:
        team.user_sessions[BOB].post(f"/experiments/{exp_id}/kill")
    assert refusal.value.status == 403 and ALICE in str(refusal.value)
    assert team.owner.get(f"/experiments/{exp_id}")["experiment"]["state"] == "ACTIVE"

    team.admin.post(f"/experiments/{exp_id}/kill")
    assert wait_for_experiment(team.owner, exp_id)["state"] == "CANCELED"


def test_alices_det_e_list_in_her_terminal_needs_no_login(
    team: Team, experiments: dict[str, int]
) -> None:
    listed = team.terminals[ALICE].det("e", "list", "--csv")
    assert listed.returncode == 0, listed.stderr
    rows = list(csv.DictReader(io.StringIO(listed.stdout)))
    owners = {int(row["ID"]): row.get("Owner") for row in rows}
    assert owners[experiments["alice"]] == ALICE and owners[experiments["bob"]] == BOB


def test_both_users_jupyterlabs_show_one_list_of_experiments(
    team: Team, experiments: dict[str, int]
) -> None:
    from playwright.sync_api import sync_playwright

    expected = {str(experiments["alice"]), str(experiments["bob"])}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name in (ALICE, BOB):
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                page = context.new_page()
                team.open_lab(page, name)
                show_sidebar(page)
                # Live: the event stream reaches the shared master through the user's server
                # (behind JupyterHub: signed in by the server's cookie, not a URL token).
                page.wait_for_selector(
                    '#jupyter-determined-sidebar .jp-Det-feed[data-mode="live"]', timeout=60_000
                )
                for exp_id in expected:
                    page.wait_for_selector(
                        f'#jupyter-determined-sidebar [data-experiment-id="{exp_id}"]',
                        timeout=60_000,
                    )
                save_screenshot(page, f"team-{team.kind}-sidebar-{name}")
                # Whose each experiment is, visible at the sidebar's default width.
                for exp_id, owner in ((experiments["alice"], ALICE), (experiments["bob"], BOB)):
                    row = page.locator(
                        f'#jupyter-determined-sidebar [data-experiment-id="{exp_id}"]'
                    )
                    assert row.locator(f'text="{owner}" >> visible=true').count() == 1, owner
                if name == ALICE:
                    for theme, label in (
                        ("JupyterLab Light", "light"),
                        ("JupyterLab Dark", "dark"),
                    ):
                        set_theme(page, theme)
                        save_screenshot(page, f"team-{team.kind}-sidebar-{label}")
                context.close()
        finally:
            browser.close()
