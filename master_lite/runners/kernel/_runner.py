"""Trials in Jupyter kernels: `KernelRunner` runs each trial run in a kernel of its experiment's
kernelspec (`environment.kernel.spec`, default python3).

One thread per run starts the kernel (with the run's environment and work dir), executes the
trial's program in it (`_kernel_program.program_cell`), turns iopub `stream` and `error`
messages into the trial's log lines, and reports the exit status once the execution is over:
the program's `sys.exit` status, 1 for an exception, 130 for an interrupt (143 when the master
asked it to stop), or 128+N when the kernel process died of signal N. A kernel that dies
mid-trial is seen within a poll interval, so the trial never stays ACTIVE.

A local kernel (standalone or the hosting server's) starts in the trial sandbox where the
platform allows (`_sandbox`: the run's `LaunchSpec.hidden` out of its sight, as for process
trials); a gateway's kernel runs elsewhere and is not ours to sandbox.

A failed run keeps its kernel `keep_alive` seconds (its slots are released at once) so a person
can attach and `%debug` the real traceback; then it is shut down.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from master_lite.runners._base import (
    LaunchSpec,
    LogRecord,
    Runner,
    terminate_with_grace,
)
from master_lite.runners._exits import exit_code_of, killed_exit_code
from master_lite.runners._startup_hook import STARTUP_HOOK, has_startup_hook
from master_lite.runners.kernel import _warm
from master_lite.runners.kernel._files import ship_files
from master_lite.runners.kernel._handles import GatewayKernel, KernelHandle, ServerKernel
from master_lite.runners.kernel._output import KernelOutput
from master_lite.runners.kernel._owner import refuse_unless_own_kernel, start_as_owner
from master_lite.runners.kernel._program import (
    GatewayDefault,
    KernelSettings,
    effective_gateway,
    exit_expression,
    kernel_config_problems,
    kernel_program,
    kernel_settings,
    program_cell,
    setup_cell,
    trial_traceback,
)
from master_lite.runners.kernel._sandbox import sandboxed
from master_lite.runners.process import Sandbox, process_environment

log = logging.getLogger("master_lite.kernels")

_POLL = 0.2  # seconds between looks at a running kernel's messages and liveness
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclasses.dataclass
class _KernelRun:
    spec: LaunchSpec
    settings: KernelSettings
    gateway: Any = None  # the gateway its kernel runs on (a URL or {url, token}); None: local
    handle: KernelHandle | None = None
    pid: int | None = None
    killed: bool = False
    terminating: bool = False
    partial: dict[str, str] = dataclasses.field(default_factory=dict)
    warm_key: tuple | None = None  # its launches' key among warm kernels (_warm)
    warm: _warm.WarmKernel | None = None  # the warm kernel it took, if any


class KernelRunner(KernelOutput, Runner):
    """Runs each trial run in a Jupyter kernel: of a local kernelspec (through the hosting
    Jupyter server's kernel manager when there is one), or on a Jupyter Kernel Gateway."""

    def __init__(
        self,
        *,
        log_sink: Callable[[list[LogRecord]], None],
        on_exit: Callable[[str, int], None],
        jupyter_host: Any = None,
        loop: Any = None,
        gateway_default: GatewayDefault | None = None,
    ) -> None:
        """`jupyter_host`: the hosting Jupyter server (its `kernel_manager` and
        `session_manager`, used on `loop`), whose kernel manager then starts local kernels.
        `gateway_default`: the master's Jupyter Gateway, for experiments that name none."""
        super().__init__(log_sink=log_sink, on_exit=on_exit)
        self.jupyter_host = jupyter_host
        self.gateway_default = gateway_default or GatewayDefault()
        self._loop = loop
        self._runs: dict[str, _KernelRun] = {}
        # Failed runs whose kernels wait for a debugger: allocation id -> (run, shutdown timer).
        self._kept: dict[str, tuple[_KernelRun, threading.Timer]] = {}
        self._lock = threading.Lock()
        # Local kernels start sandboxed, hiding `LaunchSpec.hidden` (probed once, as for
        # process trials; $MASTER_LITE_TRIAL_SANDBOX=0 turns it off).
        self.sandbox = Sandbox()
        # Kernels started ahead with the modules a notebook's previous trial imported.
        self.warm = _warm.WarmKernels(self._start_warm)

    def config_problems(self, config: dict) -> list[str]:
        return kernel_config_problems(config, gateway_default=self.gateway_default)

    def launch(self, spec: LaunchSpec) -> None:
        """Start the run's thread (the kernel starts there, off the master's event loop)."""
        settings = kernel_settings(spec.config)
        if settings is None:
            raise ValueError(f"{spec.allocation_id}: its experiment has no environment.kernel")
        gateway = effective_gateway(settings, self.gateway_default)
        refuse_unless_own_kernel(self, spec, gateway is not None or self.jupyter_host is not None)
        try:
            program = kernel_program((spec.config or {}).get("entrypoint") or "")
        except ValueError as exc:  # checked at submit; a config stored before is told here
            raise OSError(str(exc)) from None
        if has_startup_hook(spec.work_dir):
            raise OSError(
                f"{STARTUP_HOOK}: a kernel trial cannot source a shell startup hook (do its "
                "setup in Python at the top of the script, or remove environment.kernel to "
                "run the trial as a process)"
            )
        run = _KernelRun(spec, settings, gateway)
        with self._lock:
            self._runs[spec.allocation_id] = run
        threading.Thread(
            target=self._run,
            args=(run, program_cell(program)),
            name=f"kernel-{spec.allocation_id}",
            daemon=True,
        ).start()
        return None

    # -- the run's thread ---------------------------------------------------------------------
    def _run(self, run: _KernelRun, cell: str) -> None:
        aid = run.spec.allocation_id
        code = 1
        keep = False
        try:
            handle = self._start(run)
            run.handle = handle
            run.pid = handle.pid
            if run.killed:  # killed while it started
                handle.signal(signal.SIGKILL)
            code, keep = self._execute(run, handle, cell)
        except Exception as exc:  # noqa: BLE001 (every failure must end the run, with its cause)
            self._master_line(
                run, f"could not run the trial in kernel {run.settings.spec!r}: {exc}"
            )
            code = killed_exit_code(signal.SIGKILL) if run.killed else 1
        # Only a failure is kept for post-mortem: not a run the master stopped or killed.
        stopped = run.terminating or run.killed
        keep = keep and code != 0 and not stopped and run.settings.keep_alive > 0
        if keep:
            timer = threading.Timer(run.settings.keep_alive, self._expire, args=(aid,))
            timer.daemon = True
            with self._lock:
                self._runs.pop(aid, None)
                self._kept[aid] = (run, timer)
            timer.start()
            self._master_line(
                run,
                f"the failed trial's kernel stays up for {run.settings.keep_alive:g} s so you can "
                f"attach to it (`det trial attach {run.spec.trial_id}`) and run %debug",
            )
        else:
            self._shutdown(run)
            with self._lock:
                self._runs.pop(aid, None)
        self._on_exit(aid, code)

    def _start(self, run: _KernelRun) -> KernelHandle:
        spec = run.settings.spec
        if run.gateway is not None:
            remote = GatewayKernel(
                run.gateway, spec, self._gateway_env(run), self.gateway_default.token
            )
            where = f"on the Jupyter Gateway {remote.connection()['gateway']}"
            self._master_line(
                run, f"kernel {spec!r} started {where} (id {remote.connection()['kernel_id']})"
            )
            return remote
        if run.spec.run_as is not None:  # as its owner: no sandbox, no warm kernel (`_owner`)
            handle = start_as_owner(run.spec, spec)
            self._master_line(run, f"kernel {spec!r} started (pid {handle.pid}) as its owner")
            return handle
        sandbox = self.sandbox.prefix(run.spec.hidden, watch_parent=True)
        name = f"trial-{run.spec.trial_id}"
        run.warm_key = _warm.warm_key(
            spec, _warm.own_env(run.spec.env), sandbox, _warm.script_of(run)
        )
        # Room for the trial's environment block, and what the kernel launcher adds to it.
        env_size = _warm.environment_block_size(process_environment(run.spec.env)) + 4096
        run.warm = self.warm.take(run.warm_key, env_size)
        if run.warm is not None:  # started ahead with the notebook's modules (_warm)
            handle = run.warm.handle
            _warm.rename_session(handle, name)
        else:
            env = process_environment(run.spec.env)
            cwd = str(run.spec.work_dir)
            handle = _warm.start_local_kernel(
                self.jupyter_host, self._loop, spec, env, cwd, name, sandbox
            )
        started = f"pid {handle.pid}"
        if isinstance(handle, ServerKernel):
            started += f", Jupyter kernel {handle.kernel_id}"
        where = " in the trial sandbox" if sandboxed(handle.manager) else ""
        if run.warm is not None:
            where += f", warm: {run.warm.imported} modules imported ahead"
        self._master_line(run, f"kernel {spec!r} started ({started}){where}")
        return handle

    def _start_warm(self, key: tuple, env: dict[str, str], cwd: str) -> KernelHandle:
        env = process_environment(env)
        host, loop, spec, sandbox = self.jupyter_host, self._loop, key[0], list(key[2])
        return _warm.start_local_kernel(host, loop, spec, env, cwd, "warm-kernel", sandbox)

    def _gateway_env(self, run: _KernelRun) -> dict[str, str]:
        """The trial's own variables (not the master's), for a kernel on a gateway: with the
        master URL the gateway's machine reaches (MasterLite.kernel_gateway_master_url)."""
        env = dict(run.spec.env)
        if self.gateway_default.master_url:
            env["DET_MASTER"] = self.gateway_default.master_url
        return env

    def _execute(self, run: _KernelRun, handle: KernelHandle, cell: str) -> tuple[int, bool]:
        """Run `cell`; (exit status, whether the kernel is still alive to be kept)."""
        if run.gateway is not None:
            # The gateway's machine may not see the master's files: the kernel gets its own
            # copy of the work dir, and runs there. It passes only the variables it
            # whitelists: the rest of the trial's own are set before the program starts.
            handle.execute(setup_cell(self._gateway_env(run)), silent=True, user_expressions={})
            if not self._ship_files(run, handle):
                return self._died(run), False
        else:
            work_dir = str(run.spec.work_dir)
            if run.warm is not None:  # the trial's environment and cwd, as a fresh kernel's
                env = process_environment(run.spec.env)
                answer = _warm.run_quietly(handle, _warm.handover_cell(env, work_dir), {}, 60)
                if (answer or {}).get("status") != "ok":
                    raise OSError(f"the warm kernel did not take the trial's environment: {answer}")
            handle.execute(setup_cell(None, work_dir), silent=True, user_expressions={})
        expressions = {"exit": exit_expression()}
        if run.gateway is None and run.warm_key is not None and self.warm.enabled:
            handle.execute(_warm.baseline_cell(), silent=True, user_expressions={})
            expressions["modules"] = _warm.learn_expression(str(run.spec.work_dir))
        reply = self._run_cell(run, handle, cell, expressions)
        if reply is None:
            return self._died(run), False
        status = self._status(run, reply)
        if status == 0 and "modules" in expressions:
            self.warm.learned(
                run.warm_key, _warm.own_env(run.spec.env), _warm.learned_modules(reply)
            )
        return status, True

    def _ship_files(self, run: _KernelRun, handle: KernelHandle) -> bool:
        """Send the run's files into the gateway kernel and make their copy its cwd; False
        when the kernel died meanwhile (OSError when the files cannot be sent)."""
        size = ship_files(
            Path(run.spec.work_dir),
            run.spec.trial_id,
            self.gateway_default.files_limit,
            lambda code, silent: self._run_cell(run, handle, code, {}, silent=silent),
        )
        if size is not None:
            self._master_line(run, f"sent the trial's files to the kernel ({size / 2**10:.1f} KiB)")
        return size is not None

    def _run_cell(
        self,
        run: _KernelRun,
        handle: KernelHandle,
        code: str,
        user_expressions: dict,
        silent: bool = False,
    ) -> dict | None:
        """Execute `code`, its output into the trial's log; its reply's content once the
        kernel is idle again, None when the kernel died first."""
        msg_id = handle.execute(code, silent=silent, user_expressions=user_expressions)
        reply: dict | None = None
        idle = False
        while reply is None or not idle:
            message = handle.iopub(_POLL)
            if message is not None and message["parent_header"].get("msg_id") == msg_id:
                idle = idle or self._on_iopub(run, message)
            while reply is None:
                answer = handle.shell()
                if answer is None:
                    break
                if answer["parent_header"].get("msg_id") == msg_id:
                    reply = answer
            if (reply is None or not idle) and not handle.alive():
                self._flush(run)
                return None
        self._flush(run)
        return dict(reply["content"])

    def _on_iopub(self, run: _KernelRun, message: dict) -> bool:
        """Log the message's output; True when it says the execution is over (status idle)."""
        kind = message["msg_type"]
        content = message["content"]
        if kind == "stream":
            self._stream(run, content.get("name", "stdout"), content.get("text", ""))
        elif kind == "error":
            self._flush(run)
            entries = trial_traceback(list(content.get("traceback") or []))
            lines = _ANSI.sub("", "\n".join(entries)).splitlines()
            self._emit(run, "stderr", lines or [f"{content.get('ename')}: {content.get('evalue')}"])
        return kind == "status" and content.get("execution_state") == "idle"

    def _status(self, run: _KernelRun, reply: dict) -> int:
        if reply.get("status") == "ok":
            value = ((reply.get("user_expressions") or {}).get("exit") or {}).get("data", {})
            try:
                return int(value.get("text/plain", "1"))
            except ValueError:
                return 1
        if reply.get("ename") == "KeyboardInterrupt":
            return killed_exit_code(signal.SIGTERM if run.terminating else signal.SIGINT)
        return 1

    def _died(self, run: _KernelRun) -> int:
        returncode = run.handle.returncode() if run.handle is not None else None
        if run.killed:
            self._master_line(run, "the trial's kernel was killed")
            return killed_exit_code(signal.SIGKILL)
        self._master_line(run, f"the trial's kernel died (exit status {returncode})")
        if returncode is None:
            return killed_exit_code(signal.SIGKILL)
        return exit_code_of(returncode)

    # -- ending -------------------------------------------------------------------------------
    def _shutdown(self, run: _KernelRun) -> None:
        handle = run.handle
        if handle is None:
            return
        try:
            handle.shutdown(now=run.killed)
        except Exception as exc:  # noqa: BLE001 (already gone, or refusing: kill it)
            log.warning("kernel of %s did not shut down: %s", run.spec.allocation_id, exc)
            handle.signal(signal.SIGKILL)

    def _expire(self, allocation_id: str) -> None:
        with self._lock:
            kept = self._kept.pop(allocation_id, None)
        if kept is not None:
            kept[1].cancel()  # when released before keep_alive ends
            self._shutdown(kept[0])
            # On its own timer nobody else knows the kernel is gone: the dispatcher forgets
            # the run's owner now (not at a `release` that may never come).
            self._released(allocation_id)

    def release(self, allocation_id: str) -> None:
        """Shut a kept post-mortem kernel down now (its experiment was deleted), in a thread of
        its own: a kernel's shutdown waits for it to exit (a gateway's, for an HTTP answer),
        which the caller (the master's event loop) must not."""
        with self._lock:
            kept = allocation_id in self._kept
        if kept:
            threading.Thread(
                target=self._expire, args=(allocation_id,), name=f"release-{allocation_id}"
            ).start()

    # -- the Runner seam ----------------------------------------------------------------------
    def _get(self, allocation_id: str) -> _KernelRun | None:
        with self._lock:
            return self._runs.get(allocation_id)

    def running(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def holds(self, allocation_id: str) -> bool:
        """Whether the ended run's kernel is kept for a debugger (until `release`)."""
        with self._lock:
            return allocation_id in self._kept

    def kept(self) -> list[str]:
        """Allocation ids of failed runs whose kernels wait for a debugger."""
        with self._lock:
            return list(self._kept)

    def pid_of(self, allocation_id: str) -> int | None:
        run = self._get(allocation_id)
        return run.pid if run else None

    def attach_info(self, allocation_id: str) -> dict[str, Any]:
        """The kernel's connection info (ports and key), for a running or kept run."""
        with self._lock:
            run = self._runs.get(allocation_id)
            if run is None and allocation_id in self._kept:
                run = self._kept[allocation_id][0]
        if run is None or run.handle is None:
            return {}
        info = {**run.handle.connection(), "kernel_spec": run.settings.spec, "pid": run.pid}
        if "gateway" in info:
            # What opens the kernel's websocket: for users allowed to execute, as a local
            # kernel's key is (the master's API never gives it to trial tokens).
            info["gateway_token"] = getattr(run.handle, "token", None)
        return info

    def send_signal(self, allocation_id: str, sig: int) -> bool:
        run = self._get(allocation_id)
        if run is None:
            return False
        if sig == signal.SIGKILL:
            return self.kill(allocation_id)
        if sig in (signal.SIGTERM, signal.SIGINT):
            run.terminating = run.terminating or sig == signal.SIGTERM
            sig = signal.SIGINT  # the kernel's interrupt: KeyboardInterrupt in the program
        return run.handle is not None and run.handle.signal(sig)

    def terminate(self, allocation_id: str, grace: float) -> bool:
        """Interrupt the program now; kill the kernel after `grace` seconds if still running."""
        return terminate_with_grace(
            lambda: self.send_signal(allocation_id, signal.SIGTERM),
            lambda: self._get(allocation_id) is not None,
            lambda: self.kill(allocation_id),
            grace,
        )

    def kill(self, allocation_id: str) -> bool:
        run = self._get(allocation_id)
        if run is None:
            return False
        run.killed = True
        if run.handle is not None:
            run.handle.signal(signal.SIGKILL)
        return True

    def close(self) -> None:
        """Shut down the warm kernels and those kept for debugging (running trials are not
        touched)."""
        self.warm.close()
        with self._lock:
            kept = list(self._kept.values())
            self._kept.clear()
        for run, timer in kept:
            timer.cancel()
            self._shutdown(run)


__all__ = ["KernelRunner"]
