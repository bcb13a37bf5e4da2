"""A real JupyterHub with master-lite as its managed service `determined`, for tests.

Usage::

    from tests._support.hub import HubProcess

    with HubProcess(tmp_path / "hub", users=["hub_alice", "hub_bob"],
                    admins_group=["hub_admin"]) as hub:
        token = hub.new_token("hub_alice")
        answer = hub.api("GET", "/experiments", token)       # through the proxy
        # <hub.url>/services/determined/api/v1/experiments

The Hub runs from its own directory (config file, database, cookie secret, logs), listens on
free loopback ports (public proxy, Hub API, proxy API, the service), uses DummyAuthenticator
(every user signs in with `HubProcess.password`), and starts `python -m master_lite
--jupyterhub --root-dir <dir>/master` as the service. A second service, `test-driver`, holds
the token the test manages the Hub with (users, groups, tokens: `driver_token`).

For suites that need the Hub's spawner (a single-user JupyterLab per user, real Unix users
named `<worktree>_alice`...): the Hub's default spawner (LocalProcessSpawner, as root) runs
`jupyterhub-singleuser` as the user's Unix account; pass `extra_config` (lines appended to
jupyterhub_config.py, e.g. `c.Spawner.cmd = [...]`, `c.Spawner.default_url = "/lab"`,
`c.Spawner.notebook_dir = ...`; or a function of the HubProcess returning them, for lines that
need its ports), `spawner_environment` (beside DET_MASTER = `service_url`, always set), and
start a server with `hub.start_server(name)`. `service_environment` adds variables to the
master's environment (`MASTER_LITE_*` settings). Everything started is stopped by `stop()`
(or leaving the `with`): the Hub stops its service, the users' servers and its proxy.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import signal
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import requests

from tests._support.process import REPO, ServerProcess, child_env, free_ports
from tests._support.waiting import wait_until

SERVICE = "determined"
ADMIN_GROUP = "determined-admins"
DRIVER = "test-driver"


def proxy_command() -> str:
    """configurable-http-proxy: on PATH, or where `make install` puts it (node_modules/.bin)."""
    found = shutil.which("configurable-http-proxy")
    local = REPO / "node_modules" / ".bin" / "configurable-http-proxy"
    if found:
        return found
    if local.exists():
        return str(local)
    raise RuntimeError(
        "configurable-http-proxy is not installed: run `make install` (it puts it in "
        "node_modules/.bin) or `npm install -g configurable-http-proxy`"
    )


class HubProcess(ServerProcess):
    """`jupyterhub -f <dir>/jupyterhub_config.py`, started by the constructor (see module doc).

    Args:
        hub_dir: the Hub's directory (made if missing).
        users: Hub users to create (not Unix users: no spawner is needed to use the service).
        admins_group: users (created too) in the Hub group `determined-admins`.
        hub_admins: users (created too) who are Hub admins.
        service_environment: extra variables for the master service.
        spawner_environment: variables for every user's server (`c.Spawner.environment`),
            beside DET_MASTER (the service's URL through the proxy).
        extra_config: lines appended to jupyterhub_config.py, or a function of this
            HubProcess (its ports and URLs are set) that returns them.
        cache_seconds: MASTER_LITE_HUB_CACHE_SECONDS of the service (how long it reuses the
            Hub's answer about a token).
        cpu_slots: the master's --cpu-slots.
        start_timeout: seconds to wait for the Hub and the service.
    """

    name = "jupyterhub"
    password = "hub-test-password"

    def __init__(
        self,
        hub_dir: pathlib.Path,
        *,
        users: Iterable[str] = (),
        admins_group: Iterable[str] = (),
        hub_admins: Iterable[str] = (),
        service_environment: Mapping[str, str] | None = None,
        spawner_environment: Mapping[str, str] | None = None,
        extra_config: str | Callable[[HubProcess], str] = "",
        cache_seconds: int = 1,
        cpu_slots: int = 2,
        start_timeout: float = 120,
    ) -> None:
        self.hub_dir = pathlib.Path(hub_dir).absolute()
        self.hub_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(self.hub_dir / "jupyterhub.log")
        self.public_port, self.hub_port, self.proxy_api_port, self.service_port = free_ports(4)
        self.url = f"http://127.0.0.1:{self.public_port}"
        self.service_url = f"{self.url}/services/{SERVICE}"  # DET_MASTER for clients
        self.master_root = self.hub_dir / "master"
        self.driver_token = secrets.token_hex(24)
        self.hub_admins = list(hub_admins)
        self.admins_group = list(admins_group)
        self.users = list(dict.fromkeys([*users, *self.admins_group, *self.hub_admins]))
        self.service_environment = dict(service_environment or {})
        self.service_environment.setdefault("MASTER_LITE_HUB_CACHE_SECONDS", str(cache_seconds))
        # What every user's server gets: the shared master's URL (issue 29, contract 4).
        self.spawner_environment = {"DET_MASTER": self.service_url, **(spawner_environment or {})}
        self.extra_config = extra_config
        self.cpu_slots = cpu_slots
        self.write_config()
        self.launch(start_timeout, interval=0.2)
        try:
            for name in self.users:
                self.add_user(name)
            if self.admins_group:
                self.hub_api("POST", f"/groups/{ADMIN_GROUP}/users", {"users": self.admins_group})
        except BaseException:
            self.stop()  # nothing of a half-made Hub outlives the constructor
            raise

    # -- process ------------------------------------------------------------------------------
    def config_text(self) -> str:
        service_env = {
            "PYTHONPATH": os.pathsep.join([str(REPO / "harness"), str(REPO)]),
            **self.service_environment,
        }
        command = [
            sys.executable,
            "-m",
            "master_lite",
            "--jupyterhub",
            "--root-dir",
            str(self.master_root),
            "--cpu-slots",
            str(self.cpu_slots),
        ]
        roles = [
            # Users reach the service; their servers' tokens carry what the user has.
            {"name": "user", "scopes": ["self", f"access:services!service={SERVICE}"]},
            {"name": "server", "scopes": ["inherit"]},
            {
                "name": "determined-service",
                "scopes": ["list:users", "read:users", "list:groups", "read:groups", "read:roles"],
                "services": [SERVICE],
            },
            {
                "name": "test-driver",
                "scopes": [
                    "admin:users",
                    "admin:groups",
                    "tokens",
                    "admin:servers",
                    "servers",
                    "read:servers",
                    "list:users",
                    "read:users",
                    "access:services",
                ],
                "services": [DRIVER],
            },
        ]
        services = [
            {
                "name": SERVICE,
                "url": f"http://127.0.0.1:{self.service_port}",
                "command": command,
                "environment": service_env,
                "oauth_no_confirm": True,
            },
            {"name": DRIVER, "api_token": self.driver_token},
        ]
        lines = [
            "c = get_config()  # noqa",
            "c.JupyterHub.ip = '127.0.0.1'",
            f"c.JupyterHub.port = {self.public_port}",
            "c.JupyterHub.hub_ip = '127.0.0.1'",
            f"c.JupyterHub.hub_port = {self.hub_port}",
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{self.proxy_api_port}'",
            f"c.ConfigurableHTTPProxy.command = [{proxy_command()!r}]",
            f"c.ConfigurableHTTPProxy.pid_file = {str(self.hub_dir / 'proxy.pid')!r}",
            "c.JupyterHub.authenticator_class = 'dummy'",
            f"c.DummyAuthenticator.password = {self.password!r}",
            "c.Authenticator.allow_all = True",
            f"c.Authenticator.admin_users = {set(self.hub_admins)!r}",
            f"c.JupyterHub.db_url = 'sqlite:///{self.hub_dir / 'jupyterhub.sqlite'}'",
            f"c.JupyterHub.cookie_secret_file = {str(self.hub_dir / 'cookie_secret')!r}",
            f"c.JupyterHub.load_roles = {roles!r}",
            f"c.JupyterHub.load_groups = {{{ADMIN_GROUP!r}: {{'users': []}}}}",
            f"c.JupyterHub.services = {services!r}",
            "c.JupyterHub.cleanup_servers = True",
            # POST /users/<name>/server answers 202 at once; `start_server` polls readiness.
            "c.JupyterHub.tornado_settings = {'slow_spawn_timeout': 0}",
            f"c.Spawner.environment = {self.spawner_environment!r}",
            self.extra_config(self) if callable(self.extra_config) else self.extra_config,
        ]
        return "\n".join(lines) + "\n"

    def write_config(self) -> None:
        (self.hub_dir / "jupyterhub_config.py").write_text(self.config_text())

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "jupyterhub",
            "-f",
            str(self.hub_dir / "jupyterhub_config.py"),
        ]

    def environment(self) -> dict[str, str]:
        env = child_env()
        env["PATH"] = os.pathsep.join(
            [str(pathlib.Path(proxy_command()).parent), env.get("PATH", "")]
        )
        return env

    def launch(self, timeout: float = 120, interval: float = 0.2) -> None:
        # The Hub's database and cookie secret are found relative to its working directory.
        cwd = os.getcwd()
        os.chdir(self.hub_dir)
        try:
            super().launch(timeout, interval)
        except BaseException:
            # A Hub that did not come up was killed alone: its proxy and its service (its
            # process group, and the proxy by its pid file) must not outlive the test.
            if self.process is not None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self._kill_leftover_proxy()
            raise
        finally:
            os.chdir(cwd)

    def ready(self) -> bool:
        """The Hub answers and the service answers through the proxy."""
        try:
            hub = requests.get(f"{self.url}/hub/api/", timeout=5)
            if hub.status_code != 200:
                return False
            service = requests.get(f"{self.service_url}/api/v1/master", timeout=5)
        except requests.RequestException:
            return False
        return service.status_code in (200, 401)

    def stop(self, timeout: float = 60) -> int:
        """Stop the Hub (it stops its service and its proxy)."""
        status = super().stop(timeout)
        self._kill_leftover_proxy()
        return status

    def _kill_leftover_proxy(self) -> None:
        try:
            pid = int((self.hub_dir / "proxy.pid").read_text().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, 15)
        except (ProcessLookupError, PermissionError):
            pass

    @property
    def master_log(self) -> str:
        """The Hub's log, where the service's output goes too."""
        return self.log_text()

    # -- the Hub's REST API (as the test driver) ---------------------------------------------
    def hub_api(self, method: str, path: str, body: Any = None, *, token: str | None = None) -> Any:
        """Call `<hub>/hub/api<path>` (the driver's token by default); the JSON answer."""
        answer = requests.request(
            method,
            f"{self.url}/hub/api{path}",
            json=body,
            headers={"Authorization": f"token {token or self.driver_token}"},
            timeout=30,
        )
        if answer.status_code >= 400:
            raise RuntimeError(f"Hub API {method} {path}: {answer.status_code} {answer.text[:500]}")
        return answer.json() if answer.content else None

    def add_user(self, name: str, *, admin: bool | None = None) -> None:
        """Create the Hub user `name` (tolerates an existing one)."""
        try:
            self.hub_api("GET", f"/users/{name}")
            return
        except RuntimeError:
            pass
        body = {} if admin is None else {"admin": admin}
        self.hub_api("POST", f"/users/{name}", body)

    def delete_user(self, name: str) -> None:
        """Remove the Hub user `name` (its tokens end with it)."""
        self.hub_api("DELETE", f"/users/{name}")

    def new_token(self, name: str, *, scopes: list[str] | None = None, note: str = "test") -> str:
        """A new Hub API token of user `name` (all the user's permissions unless `scopes`)."""
        body: dict[str, Any] = {"note": note}
        if scopes is not None:
            body["scopes"] = scopes
        return str(self.hub_api("POST", f"/users/{name}/tokens", body)["token"])

    def start_server(self, name: str, timeout: float = 120) -> str:
        """Start user `name`'s single-user server (needs a spawner that can: a Unix user) and
        wait until it is ready; its URL through the proxy."""
        try:
            self.hub_api("POST", f"/users/{name}/server")
        except RuntimeError as exc:
            if " 400 " not in str(exc):  # 400: already running
                raise
        wait_until(
            lambda: (self.hub_api("GET", f"/users/{name}")["servers"].get("") or {}).get("ready"),
            timeout,
            f"{name}'s server to be ready",
            details=lambda: self.log_text()[-5000:],
        )
        return f"{self.url}/user/{name}/"

    # -- the service, through the proxy -------------------------------------------------------
    def api(
        self, method: str, path: str, token: str | None = None, body: Any = None, **kwargs: Any
    ) -> requests.Response:
        """`<hub>/services/determined/api/v1<path>` with `Authorization: token <token>`."""
        headers = dict(kwargs.pop("headers", {}) or {})
        if token is not None:
            headers["Authorization"] = f"token {token}"
        return requests.request(
            method,
            f"{self.service_url}/api/v1{path}",
            json=body,
            headers=headers,
            allow_redirects=False,
            timeout=60,
            **kwargs,
        )

    def browser_login(self, name: str, next_path: str = "") -> requests.Session:
        """A requests session signed in to the Hub as `name` (its login form), then sent to
        `next_path` (default: the service's page, which signs in to the service by the OAuth
        redirects; not the Hub's default, the user's server, which needs a spawner)."""
        session = requests.Session()
        login = session.get(f"{self.url}/hub/login", timeout=30)
        xsrf = session.cookies.get("_xsrf", "")
        target = next_path or f"/services/{SERVICE}/"
        answer = session.post(
            f"{self.url}/hub/login?next={urllib.parse.quote(target)}",
            data={"username": name, "password": self.password, "_xsrf": xsrf},
            timeout=60,
        )
        if login.status_code != 200 or answer.status_code >= 400:
            raise RuntimeError(f"Hub login of {name}: {answer.status_code} {answer.text[:300]}")
        return session


__all__ = ["ADMIN_GROUP", "DRIVER", "SERVICE", "HubProcess", "proxy_command"]
