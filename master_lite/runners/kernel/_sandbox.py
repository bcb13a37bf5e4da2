"""Kernel trials in the trial sandbox: a local kernel started for a trial runs under the process
runner's trampoline (`master_lite.runners.process._sandbox`), so its code cannot read the
master's secrets (`LaunchSpec.hidden`: the user token's directory, the store, and on a hosted
master Jupyter's runtime dir) nor see any process outside the kernel.

jupyter_client starts a kernel through its manager's provisioner; `SandboxProvisioner` is the
local one with the kernel's argv behind the trampoline's. The runner gives each trial's kernel
manager an instance before the kernel starts (jupyter_client keeps a provisioner it finds set),
so neither an entry point nor a kernelspec of ours is needed, and nothing changes for other
kernels:

* standalone: `LocalKernel` builds the manager itself (`preset`);
* hosted: the Jupyter server's kernel manager builds it; `install` wraps its manager factory
  once, and the trial's start (`start_sandboxed`) sets `starting_sandboxed` around the call (a context variable:
  only kernels started inside it, on the server's loop, get the provisioner).

What differs for the kernel, and how it is kept as it was:

* its connection file moves to a private temporary directory: the runtime dir it would be
  written to is hidden on a hosted master (the kernel could not read its own ports and key);
* ipykernel's parent poller is off (JPY_PARENT_PID=1: inside, the kernel's parent is the
  sandbox's init, PID 1, which it would take for "my parent died"): the trampoline watches the
  real parent instead
  (`--watch-parent`), so a kernel still ends with the process that started it;
* signals (interrupt, terminate, kill) go to the process group as before: the trampoline leads
  it and ignores them, the kernel inside gets them; restarts reuse the provisioner (and so the
  sandbox); ports stay on loopback (the network is not namespaced), so attach, JupyterLab's
  consoles and the debugger reach the kernel as before.

Kernels of a kernelspec naming a provisioner of its own, and Jupyter Gateway kernels, are not
ours to start, and are not sandboxed.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from jupyter_client.provisioning import LocalProvisioner
from traitlets import Integer, List, Unicode

# The trampoline argv a kernel started on the server's loop now gets (empty: none).
_STARTING: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "master_lite_kernel_sandbox", default=()
)


# The account (uid, gid, groups) and interpreter a kernel started now runs as (`starting_as`).
_AS_OWNER: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "master_lite_kernel_owner", default=None
)


class SandboxProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, with the kernel started under `sandbox` (the
    trampoline's argv up to `--`)."""

    sandbox = List(Unicode(), help="the trampoline's argv, up to and including `--`")
    # A kernel run as another Unix account (`LaunchSpec.run_as`, then with no sandbox): its
    # uid, gid and groups (uid -1: the master's own), and the interpreter it can execute.
    owner_uid = Integer(-1)
    owner_gid = Integer(-1)
    owner_groups = List(Integer())
    python = Unicode("")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._private_dir: str | None = None

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        km = self.parent
        if km is not None:
            self.kernel_id = km.kernel_id or self.kernel_id
            written = km._connection_file_written and os.path.exists(km.connection_file)
            if not written:  # a restart keeps the file written at the first start
                self._private_dir = self._private_dir or tempfile.mkdtemp(prefix="det-kernel-")
                name = os.path.basename(km.connection_file or "") or f"kernel-{self.kernel_id}.json"
                km.connection_file = os.path.join(self._private_dir, name)
        kwargs = await super().pre_launch(**kwargs)
        cmd = list(kwargs["cmd"])
        if self.owner_uid >= 0 and km is not None:
            # The kernel reads its connection file as its account: its dir and file are its.
            for path in (self._private_dir, km.connection_file):
                if path:
                    os.chown(path, self.owner_uid, self.owner_gid)
            if self.python and cmd and cmd[0] == sys.executable:
                cmd[0] = self.python  # the master's interpreter may be closed to that account
        kwargs["cmd"] = [*self.sandbox, *cmd]
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        if self.sandbox:
            # The trampoline watches the parent (see the module's docstring); "1" (init) turns
            # ipykernel's parent poller off and keeps it from printing its Ctrl-C note.
            kwargs["env"] = {**(kwargs.get("env") or os.environ), "JPY_PARENT_PID": "1"}
            kwargs["independent"] = True
        if self.owner_uid >= 0:
            kwargs.update(
                user=self.owner_uid,
                group=self.owner_gid,
                extra_groups=list(self.owner_groups),
                umask=0o077,
            )
        return await super().launch_kernel(cmd, **kwargs)

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        if not restart and self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None


def _own_provisioner(km: Any) -> str | None:
    """The provisioner the kernel's spec names, where it names one other than the local one."""
    metadata = getattr(km.kernel_spec, "metadata", None) or {}
    name = (metadata.get("kernel_provisioner") or {}).get("provisioner_name")
    return None if name in (None, "local-provisioner") else str(name)


def preset(km: Any, sandbox: Sequence[str]) -> bool:
    """Give the (not yet started) kernel manager `km` a provisioner that starts its kernel
    under `sandbox`, or (inside `starting_as`) as that account with its interpreter; False
    (nothing changed) where there is neither or the kernel's spec names a provisioner of its
    own (OSError then, for an account: it could not run as that account)."""
    owner, python = _AS_OWNER.get() or (None, None)
    theirs = (
        getattr(km, "provisioner", None) is not None
        or "gateway" in type(km).__module__  # a Jupyter Gateway's kernel (remote)
        or _own_provisioner(km) is not None
    )
    if owner is not None and theirs:  # never a kernel of the master's own user instead
        raise OSError(
            f"kernelspec {km.kernel_name!r} has a provisioner of its own: its kernel cannot "
            "be started as the trial's Unix user"
        )
    if (not sandbox and owner is None) or theirs:
        return False
    km.provisioner = SandboxProvisioner(
        kernel_id=km.kernel_id or None,
        kernel_spec=km.kernel_spec,
        parent=km,
        sandbox=list(sandbox),
        **(
            {}
            if owner is None
            else {
                "owner_uid": owner[0],
                "owner_gid": owner[1],
                "owner_groups": list(owner[2]),
                "python": python or "",
            }
        ),
    )
    return True


def sandboxed(km: Any) -> bool:
    """Whether `km`'s kernel runs in the sandbox."""
    provisioner = getattr(km, "provisioner", None)
    return isinstance(provisioner, SandboxProvisioner) and bool(provisioner.sandbox)


def install(kernels: Any) -> None:
    """Make the multi-kernel manager `kernels` (the Jupyter server's) give the kernels started
    inside `starting_sandboxed` the sandbox provisioner; other kernels are untouched."""
    factory = kernels.kernel_manager_factory
    if getattr(factory, "master_lite_sandbox", False):
        return

    def sandboxing_factory(*args: Any, **kwargs: Any) -> Any:
        km = factory(*args, **kwargs)
        sandbox = _STARTING.get()
        if sandbox:
            preset(km, sandbox)
        return km

    sandboxing_factory.master_lite_sandbox = True  # type: ignore[attr-defined]
    kernels.kernel_manager_factory = sandboxing_factory


@contextlib.contextmanager
def starting_as(owner: tuple[int, int, Sequence[int]], python: str | None) -> Iterator[None]:
    """Kernel managers `preset` inside this block start their kernel as `owner` (uid, gid,
    groups), with `python` in place of the master's interpreter (`_owner`)."""
    token = _AS_OWNER.set((owner, python))
    try:
        yield
    finally:
        _AS_OWNER.reset(token)


@contextlib.contextmanager
def starting_sandboxed(sandbox: Sequence[str]) -> Iterator[None]:
    """Kernels started (by an `install`ed manager) inside this block get `sandbox`."""
    token = _STARTING.set(tuple(sandbox))
    try:
        yield
    finally:
        _STARTING.reset(token)


async def start_sandboxed(kernels: Any, sandbox: Sequence[str], **kwargs: Any) -> str:
    """`kernels.start_kernel(**kwargs)` (the Jupyter server's multi-kernel manager, on its
    loop) with the kernel under `sandbox` (none where it is empty); the kernel's id."""
    if sandbox:
        install(kernels)
    with starting_sandboxed(sandbox):  # only this start (its task) sees it
        return str(await kernels.start_kernel(**kwargs))


__all__ = [
    "SandboxProvisioner",
    "install",
    "preset",
    "sandboxed",
    "start_sandboxed",
    "starting_as",
    "starting_sandboxed",
]
