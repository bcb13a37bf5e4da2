"""`master-lite`: run the master standalone."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sqlite3
import sys

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
        ("cpu_slots", "cpu_slots"),
        ("resource_manager", "resource_manager"),
        ("kernel_gateway_url", "kernel_gateway_url"),
        ("kernel_gateway_master_url", "kernel_gateway_master_url"),
        ("scheduler", "scheduler"),
        ("preemption", "preemption"),
        ("scheduler_min_run_seconds", "scheduler_min_run_seconds"),
    ):
        value = getattr(args, option)
        if value is not None:
            config.MasterLite[trait] = value
    return config


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("tornado.access").setLevel(logging.WARNING)

    from master_lite._app import MasterLite, MasterLiteStartError

    try:
        app = MasterLite(config=_config(args))
        app.root_dir  # noqa: B018 - resolve env defaults now, so a bad value fails here
        app.port  # noqa: B018
        app.cpu_slots  # noqa: B018
        app.kernel_gateway_url  # noqa: B018
        app.kernel_gateway_master_url  # noqa: B018
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
