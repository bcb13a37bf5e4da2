"""`master-lite`: run the master standalone."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sqlite3
import sys
from typing import Any

from traitlets import TraitError
from traitlets.config import Config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="master-lite",
        description="Run the jupyter-determined master standalone. Settings default to the "
        "MASTER_LITE_* environment variables, then to built-in defaults.",
    )
    parser.add_argument(
        "--root-dir",
        help="state directory (default: $MASTER_LITE_ROOT_DIR or <jupyter data dir>/determined)",
    )
    parser.add_argument("--host", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, help="port to listen on; 0 = any free port (default: 8080)"
    )
    parser.add_argument(
        "--advertised-url",
        metavar="URL",
        help="the URL trials (DET_MASTER) and other machines use to reach the master, e.g. "
        "http://10.0.0.5:8080 (default: $MASTER_LITE_ADVERTISED_URL, else the --host address; "
        "for 0.0.0.0 the address routing to the Ray head or the default route; "
        "docs/distributed.md)",
    )
    parser.add_argument("--cpu-slots", type=int, help="CPU slots when there is no GPU (default: 2)")
    parser.add_argument(
        "--resource-manager", choices=["local", "ray"], help="what runs trials (default: local)"
    )
    parser.add_argument(
        "--kernel-gateway-url",
        metavar="URL",
        help="a Jupyter Gateway for the kernels of kernel experiments whose config names none "
        "(token: $MASTER_LITE_KERNEL_GATEWAY_TOKEN or $JUPYTER_GATEWAY_AUTH_TOKEN; default: "
        "$MASTER_LITE_KERNEL_GATEWAY_URL, else local kernels)",
    )
    parser.add_argument(
        "--kernel-gateway-master-url",
        metavar="URL",
        help="the master URL that trials in gateway kernels are given (one the gateway's "
        "machine reaches; default: the master's own URL)",
    )
    parser.add_argument(
        "--jupyterhub",
        action="store_true",
        help="run as the JupyterHub-managed service (c.JupyterHub.services): read the "
        "JUPYTERHUB_* variables the Hub sets, serve the API under JUPYTERHUB_SERVICE_PREFIX "
        "and identify callers through the Hub (docs/team.md)",
    )
    parser.add_argument(
        "--run-trials-as",
        choices=["master", "owner"],
        help="which Unix account runs trials: the master's own, or the experiment owner's "
        "(needs root; default: $MASTER_LITE_RUN_TRIALS_AS, else master)",
    )
    parser.add_argument(
        "--read-access",
        choices=["all", "own"],
        help="who reads what: every signed-in user everything, or a non-admin only their own "
        "objects (default: $MASTER_LITE_READ_ACCESS, else all; docs/team.md)",
    )
    parser.add_argument(
        "--fallback-unix-user",
        metavar="USER",
        help="with --run-trials-as owner: the account for users without a Unix account of "
        "their own (default: $MASTER_LITE_FALLBACK_UNIX_USER, else none: their trials fail)",
    )
    parser.add_argument(
        "--scheduler",
        choices=["fair_share", "priority"],
        help="how slots are shared (default: $MASTER_LITE_SCHEDULER or fair_share; "
        "docs/scheduling.md)",
    )
    parser.add_argument(
        "--preemption",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="priority scheduler: preempt less important runs for a waiting job (default: on)",
    )
    parser.add_argument(
        "--scheduler-min-run-seconds",
        type=float,
        metavar="S",
        help="never preempt a run younger than this (default: 10)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default: INFO",
    )
    return parser


def _config(args: argparse.Namespace) -> Config:
    config = Config()
    for option, trait in (
        ("root_dir", "root_dir"),
        ("host", "host"),
        ("port", "port"),
        ("advertised_url", "advertised_url"),
        ("cpu_slots", "cpu_slots"),
        ("resource_manager", "resource_manager"),
        ("kernel_gateway_url", "kernel_gateway_url"),
        ("kernel_gateway_master_url", "kernel_gateway_master_url"),
        ("run_trials_as", "run_trials_as"),
        ("read_access", "read_access"),
        ("fallback_unix_user", "fallback_unix_user"),
        ("scheduler", "scheduler"),
        ("preemption", "preemption"),
        ("scheduler_min_run_seconds", "scheduler_min_run_seconds"),
    ):
        value = getattr(args, option)
        if value is not None:
            config.MasterLite[trait] = value
    return config


def _hub_service(args: argparse.Namespace, config: Config) -> Any:
    """The Hub service of `--jupyterhub` (HubServiceError: a variable is missing). Where the
    master listens comes from JUPYTERHUB_SERVICE_URL unless --host/--port say; running as
    root, trials run as their owners (`run_trials_as=owner`) unless configured otherwise."""
    from master_lite._app import HubService, MasterLite

    service = HubService.from_environment()
    host, port = service.bind_address()
    if args.host is None and host:
        config.MasterLite.host = host
    if args.port is None and port:
        config.MasterLite.port = port
    running_as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if (
        running_as_root
        and MasterLite.class_traits().get("run_trials_as") is not None
        and not os.environ.get("MASTER_LITE_RUN_TRIALS_AS")
    ):
        # A shared host: a trial must not run as root (issue 29, contract 5).
        config.MasterLite.run_trials_as = "owner"
    return service


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("tornado.access").setLevel(logging.WARNING)

    from master_lite._app import HubServiceError, MasterLite, MasterLiteStartError

    service = None
    config = _config(args)
    if args.jupyterhub:
        try:
            service = _hub_service(args, config)
        except HubServiceError as exc:
            print(f"master-lite: error: {exc}", file=sys.stderr)
            return 2
    try:
        app = MasterLite(config=config)
        app.hub_service = service
        app.root_dir  # noqa: B018 - resolve env defaults now, so a bad value fails here
        app.port  # noqa: B018
        app.advertised_url  # noqa: B018
        app.cpu_slots  # noqa: B018
        app.kernel_gateway_url  # noqa: B018
        app.kernel_gateway_master_url  # noqa: B018
        app.run_trials_as  # noqa: B018
        app.read_access  # noqa: B018
        app.scheduling_policy()  # a bad scheduler setting fails here, naming it
    except TraitError as exc:
        print(f"master-lite: error: {exc}", file=sys.stderr)
        return 2

    def announce(url: str) -> None:
        print(
            f"master-lite listening on {url} (root dir {app.root_dir}, token in "
            f"{app.user_token_path})",
            flush=True,
        )

    try:
        asyncio.run(app.serve(on_listening=announce))
    except (MasterLiteStartError, ValueError) as exc:  # ValueError: a bad resource_pools entry
        print(f"master-lite: error: {exc}", file=sys.stderr)
        return 1
    except (OSError, sqlite3.Error) as exc:
        # A read-only or full root dir: one line that says what to fix, not a traceback.
        logging.getLogger("master_lite").debug("storage failure", exc_info=True)
        print(
            f"master-lite: error: {exc} (root dir {app.root_dir} must be a writable "
            "directory on a disk with free space)",
            file=sys.stderr,
        )
        return 1
    return 0


__all__ = ["main"]
