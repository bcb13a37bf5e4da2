"""`det trial attach TRIAL_ID`: a console on the kernel of a kernel trial (`environment.kernel`),
local (over ZMQ) or on a Jupyter Gateway (over the kernel's websocket).

While the trial runs, code runs in a kernel *subshell* (ipykernel >= 7), a thread of its own, so
it never waits for (or blocks) the training loop and sees the script's live globals. After a
failure the kernel is kept for post-mortem (`environment.kernel.keep_alive`): code runs in the
kernel's main shell, where `%debug` opens the debugger on the real traceback.

The console is not read-only: it runs whatever you type in the trial's process, like the
trial's own code (assigning to the script's globals changes the training). The master hands
the connection info only to users allowed to execute.
"""

from __future__ import annotations

import argparse
import queue
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from determined.cli._base import CliError, Context

_POLL = 0.1
_REPLY_TIMEOUT = 30.0
_DEBUGGER_PROMPT = re.compile(r"(ipdb|\(Pdb\))")
Write = Callable[[str], None]
Answer = Callable[[str, bool], str]


class TrialKernel:
    """A client of a trial's kernel, from the master's `GET /trials/{id}/kernel` answer.

    `run(code)` executes code (in a subshell while the trial runs) and writes its output."""

    def __init__(self, info: dict, *, subshell: bool | None = None) -> None:
        self.info = info
        self.trial_id = info.get("trial_id")
        self.client: Any
        if "gateway" in info:  # a kernel on a Jupyter Gateway: through its websocket
            from determined.cli._gateway_kernel import gateway_client

            self.client = gateway_client(info)
        else:
            from jupyter_client.blocking import BlockingKernelClient

            self.client = BlockingKernelClient()
            self.client.load_connection_info(info["kernel"])
            self.client.start_channels()
        self.subshell_id: str | None = None
        if subshell if subshell is not None else not info.get("post_mortem"):
            self.subshell_id = self._create_subshell()

    def __repr__(self) -> str:
        how = "post-mortem" if self.info.get("post_mortem") else "running, in a subshell"
        return f"<TrialKernel trial {self.trial_id} ({how}); .run(code) runs code in it>"

    def _control(self, msg_type: str, content: dict) -> dict:
        message = self.client.session.msg(msg_type, content)
        self.client.control_channel.send(message)
        deadline = time.monotonic() + _REPLY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                reply = self.client.get_control_msg(timeout=_POLL)
            except queue.Empty:
                if not self.client.is_alive():
                    raise CliError(
                        f"trial {self.trial_id}'s kernel is gone (it ended or died)"
                    ) from None
                continue
            if reply["parent_header"].get("msg_id") == message["header"]["msg_id"]:
                return dict(reply["content"])
        raise CliError(
            f"trial {self.trial_id}'s kernel did not answer {msg_type} within "
            f"{_REPLY_TIMEOUT:g} s (is it still running? `det trial describe {self.trial_id}`)"
        )

    def _create_subshell(self) -> str:
        content = self._control("create_subshell_request", {})
        if content.get("status") != "ok" or "subshell_id" not in content:
            raise CliError(
                f"trial {self.trial_id}'s kernel cannot open a subshell (it needs ipykernel "
                ">= 7, where a console does not wait for the running trial): "
                f"{content.get('evalue') or content}"
            )
        return str(content["subshell_id"])

    def run(self, code: str, *, write: Write | None = None, answer: Answer | None = None) -> bool:
        """Execute `code`; its output goes to `write` (default: stdout), input requests (the
        debugger's prompt) are answered by `answer(prompt, password)`. True when it succeeded."""
        out: Write = write or (lambda text: print(text, end="", flush=True))
        content = {
            "code": code,
            "silent": False,
            # Not kept in the trial kernel's history (the console keeps its own): recording
            # it costs the kernel a database write per cell, time the training loop loses.
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": answer is not None,
            "stop_on_error": False,
        }
        message = self.client.session.msg("execute_request", content)
        if self.subshell_id is not None:
            message["header"]["subshell_id"] = self.subshell_id
        self.client.shell_channel.send(message)
        msg_id = message["header"]["msg_id"]
        reply: dict | None = None
        idle = False
        while reply is None or not idle:
            idle = self._drain_iopub(msg_id, out) or idle
            if answer is not None:
                self._answer_input(msg_id, answer)
            if reply is None:
                reply = self._shell_reply(msg_id)
            if (reply is None or not idle) and not self.client.is_alive():
                raise CliError(f"trial {self.trial_id}'s kernel is gone (it ended or died)")
        return bool(reply.get("status") == "ok")

    def _drain_iopub(self, msg_id: str, out: Write) -> bool:
        try:
            message = self.client.get_iopub_msg(timeout=_POLL)
        except queue.Empty:
            return False
        if message["parent_header"].get("msg_id") != msg_id:
            return False  # the trial's own output, or another client's
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            out(content.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            out(str(content.get("data", {}).get("text/plain", "")) + "\n")
        elif kind == "error":
            out("\n".join(content.get("traceback") or []) + "\n")
        return kind == "status" and content.get("execution_state") == "idle"

    def _answer_input(self, msg_id: str, answer: Answer) -> None:
        try:
            message = self.client.get_stdin_msg(timeout=0)
        except queue.Empty:
            return
        if message["parent_header"].get("msg_id") == msg_id:
            content = message["content"]
            self.client.input(answer(content.get("prompt", ""), bool(content.get("password"))))

    def _shell_reply(self, msg_id: str) -> dict | None:
        while True:
            try:
                message = self.client.get_shell_msg(timeout=0)
            except queue.Empty:
                return None
            if message["parent_header"].get("msg_id") == msg_id:
                return dict(message["content"])

    def close(self) -> None:
        """Close the subshell (if any) and the connection; the kernel goes on."""
        try:
            if self.subshell_id is not None:
                self._control("delete_subshell_request", {"subshell_id": self.subshell_id})
        except CliError:
            if self.client.is_alive():
                raise
            # The kernel ended (the code run may have ended the trial): nothing to close.
        finally:
            self.client.stop_channels()


def attach_trial(session: Any, trial_id: int) -> TrialKernel:
    """A `TrialKernel` of the trial (the master says why when there is none)."""
    return TrialKernel(session.get(f"/trials/{trial_id}/kernel"))


def _terminal_answer(prompt: str, password: bool) -> str:
    try:
        return input(prompt)
    except EOFError:
        # End of input inside the debugger: quit it rather than repeat its last command.
        return "q" if _DEBUGGER_PROMPT.search(prompt) else ""


def _read_cell(prompt: str) -> str:
    """One statement; a line ending in ':' continues until an empty line."""
    lines = [input(prompt)]
    while lines[0].rstrip().endswith(":") and lines[-1].strip():
        lines.append(input("... "))
    return "\n".join(lines)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _write(text: str) -> None:
    # Colours for a terminal; plain text into a file or a pipe.
    print(text if sys.stdout.isatty() else _ANSI.sub("", text), end="", flush=True)


def attach(args: argparse.Namespace, ctx: Context) -> int:
    kernel = attach_trial(ctx.session, args.trial_id)
    try:
        if args.command is not None:
            ok = kernel.run(args.command, write=_write, answer=_terminal_answer)
            return 0 if ok else 1
        state = kernel.info.get("state")
        if kernel.info.get("post_mortem"):
            how = f"{state}, kept for post-mortem: %debug opens the debugger on its traceback"
        else:
            how = f"{state}: a subshell, the trial keeps running"
        print(
            f"Attached to trial {args.trial_id}'s kernel ({how}). The script's globals are "
            "live; this is not read-only. Ctrl-D detaches.",
            file=sys.stderr,
        )
        while True:
            try:
                cell = _read_cell(f"trial {args.trial_id}> ")
            except EOFError:
                break
            if cell.strip():
                kernel.run(cell, write=_write, answer=_terminal_answer)
        return 0
    finally:
        kernel.close()


def add_attach_parser(verbs: Any) -> None:
    p = verbs.add_parser(
        "attach",
        help="a console on a kernel trial's kernel (live globals; %%debug after a failure)",
    )
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.add_argument("-c", "--command", metavar="CODE", help="run CODE, print its output and detach")
    p.set_defaults(handler=attach)


__all__ = ["TrialKernel", "add_attach_parser", "attach", "attach_trial"]
