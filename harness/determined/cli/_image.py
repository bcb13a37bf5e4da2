"""`det image build` and `det image list`: trial images in this machine's container runtime,
without a registry.

The build runs on this machine, as trials do (master_lite runs containers on its own machine),
with the options the master's trial containers get (`determined.common.containers`: runc, the
host's ulimits), so a `RUN` step works wherever a trial would. No master is needed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from determined.cli._base import CliError, Context
from determined.common import containers

# The master's own setting (MasterLite.container_runtime) when it comes from the environment.
RUNTIME_ENV = "MASTER_LITE_CONTAINER_RUNTIME"


def _runtime(args: argparse.Namespace) -> str:
    binary = args.runtime or os.environ.get(RUNTIME_ENV) or containers.default_runtime()
    found = binary if os.sep in binary and os.access(binary, os.X_OK) else shutil.which(binary)
    if not found:
        raise CliError(
            f"the container runtime {binary!r} is not installed (install it, e.g. `apt-get "
            f"install podman runc`, or name it with --runtime or {RUNTIME_ENV})"
        )
    return binary


def stored_name(name: str, runtime: str) -> str:
    """The reference the runtime stores a built `name` under: Podman puts names without a
    registry under `localhost/`, and both add `:latest` to a name without a tag."""
    last = name.rsplit("/", 1)[-1]
    if "@" not in last and ":" not in last:
        name += ":latest"
    podman = containers.runtime_name(runtime) == "podman"
    if podman and containers.registry_of(name) is None and not name.startswith("localhost/"):
        name = f"localhost/{name}"
    return name


def _containerfile(args: argparse.Namespace, context: Path) -> Path:
    if args.file:
        path = Path(args.file)
        if not path.is_file():
            raise CliError(f"-f {args.file}: no such file (the Containerfile to build)")
        return path
    for name in ("Containerfile", "Dockerfile"):
        if (context / name).is_file():
            return context / name
    raise CliError(
        f"{context} has no Containerfile or Dockerfile (write one there, or name it with -f)"
    )


def build(args: argparse.Namespace, ctx: Context) -> int:
    """Build an image from a Containerfile into the runtime's local store, streaming the
    runtime's output, and say how a config uses it."""
    context = Path(args.context)
    if not context.is_dir():
        raise CliError(f"{args.context}: not a directory (the build context: a directory)")
    containerfile = _containerfile(args, context)
    runtime = _runtime(args)
    command = [
        runtime,
        "build",
        *containers.host_settings(runtime),
        "--tag",
        args.tag,
        "--file",
        str(containerfile),
        *(arg for value in args.build_arg or [] for arg in ("--build-arg", value)),
        *args.runtime_options,
        str(context),
    ]
    print("+ " + " ".join(command), file=sys.stderr, flush=True)
    # The runtime writes to this terminal (or notebook cell) directly: its progress as it goes.
    result = subprocess.run(command)
    if result.returncode != 0:
        raise CliError(
            f"{containers.runtime_name(runtime)} build failed (exit code {result.returncode}); "
            "its message is above"
        )
    name = stored_name(args.tag, runtime)
    print(
        f"built {name}: trials use it with\n"
        f"  environment:\n    image: {name}\n"
        "(it is in this machine's local image store: the master runs it without a registry)"
    )
    return 0


def list_images(args: argparse.Namespace, ctx: Context) -> int:
    """The images in the runtime's local store, as the runtime lists them."""
    runtime = _runtime(args)
    return subprocess.run([runtime, "images"]).returncode


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "image", help="build and list trial images in this machine's container runtime"
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    runtime_help = (
        f"the container runtime: podman, docker or a path (default: ${RUNTIME_ENV}, else "
        "podman when installed, else docker)"
    )

    p = verbs.add_parser(
        "build",
        help="build an image from a Containerfile into the local store (no registry needed)",
        description="Build an image from a Containerfile with the settings this machine's "
        "trial containers get. Options after CONTEXT_DIR go to the runtime's build as they are "
        "(e.g. --volume /data:/data:ro).",
    )
    p.add_argument("-t", "--tag", required=True, metavar="NAME", help="the image's name")
    p.add_argument(
        "-f",
        "--file",
        metavar="CONTAINERFILE",
        help="the Containerfile (default: CONTEXT_DIR/Containerfile, else its Dockerfile)",
    )
    p.add_argument(
        "--build-arg", action="append", metavar="KEY=VALUE", help="a build argument (repeatable)"
    )
    p.add_argument("--runtime", metavar="BINARY", help=runtime_help)
    p.add_argument("context", metavar="CONTEXT_DIR", help="the build context directory")
    p.add_argument("runtime_options", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(handler=build)

    p = verbs.add_parser("list", aliases=["ls"], help="list the images in the local store")
    p.add_argument("--runtime", metavar="BINARY", help=runtime_help)
    p.set_defaults(handler=list_images)


__all__ = ["add_parser", "build", "list_images", "stored_name"]
